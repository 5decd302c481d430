package main

import "testing"

// TestSwapRust runs the Rust build of the counter in a cluster, with keyed
// state and checkpoints, between the Go and C builds: the job starts on the
// Go build, is swapped to Rust and then to C, and every key's counts must
// go 1, 2, 3… across both swaps, which holds only if the Rust module
// reads the state the Go build wrote and writes what the C build reads,
// and emits the same output.
func TestSwapRust(t *testing.T) {
	swapThrough(t, "counter-go", "counter-rust", "counter-c")
}
