package main

import "testing"

// TestAssemblyScriptInACluster runs the AssemblyScript build of the
// counter in a cluster, with keyed state and checkpoints: the job starts
// on it, is swapped to the Go build and back. Every key's counts must go
// 1, 2, 3… throughout, which holds only if the AssemblyScript module
// writes the state the Go build reads, reads what it wrote, and emits the
// same output.
func TestAssemblyScriptInACluster(t *testing.T) {
	swapThrough(t, "counter-as", "counter-go", "counter-as")
}
