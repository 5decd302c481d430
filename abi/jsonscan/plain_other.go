//go:build !amd64 || purego

package jsonscan

// long is plainEnd after a first plain word. Elsewhere than on amd64 (in
// Wasm guests above all: this package is compiled into Go modules) it is
// the word loop.
func long(b []byte, i int) int { return words(b, i) }
