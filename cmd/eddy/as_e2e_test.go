package main

import (
	"strings"
	"testing"
	"time"
)

// TestAssemblyScriptInACluster runs the AssemblyScript build of the
// counter in a cluster, with keyed state and checkpoints: the job starts
// on it, is swapped to the Go build and back. Every key's counts must go
// 1, 2, 3… throughout, which holds only if the AssemblyScript module
// writes the state the Go build reads, reads what it wrote, and emits the
// same output.
func TestAssemblyScriptInACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const count = 24000
	c := swapCluster(t, map[string]string{"counter-as": "counter-as.wasm", "counter-go": "counter-go.wasm"})
	id, out := submitSwapJob(t, c, count, 3000, "counter-as")
	_, before, _ := c.status(t, id)
	for _, to := range []string{"counter-go@1", "counter-as@1"} {
		if r := c.client(t, "job", "swap", id, "--node", "count", "--module", to); r.code != 0 {
			t.Fatalf("swap to %s: %s", to, swapOut(r))
		}
	}
	if _, after, st := c.status(t, id); after != before {
		t.Errorf("attempt %d after the swaps, %d before: a swap restarted the job\n%s", after, before, st)
	}
	_, st := c.waitState(t, id, "FINISHED", 2*time.Minute)
	if strings.Count(st, "SWAPPED") < 2 {
		t.Errorf("want two swaps:\n%s", st)
	}
	checkSwapCounts(t, out, count, neverNew)
}
