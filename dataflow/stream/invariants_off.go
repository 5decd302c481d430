//go:build !invariants

package stream

const invariants = false
