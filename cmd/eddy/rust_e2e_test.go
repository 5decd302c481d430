package main

import (
	"strings"
	"testing"
	"time"
)

// TestSwapRust runs the Rust build of the counter in a cluster, with keyed
// state and checkpoints, between the Go and C builds: the job starts on the
// Go build, is swapped to Rust and then to C, and every key's counts must
// go 1, 2, 3… across both swaps, which holds only if the Rust module
// reads the state the Go build wrote and writes what the C build reads,
// and emits the same output.
func TestSwapRust(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const count = 24000
	c := swapCluster(t, map[string]string{"counter-go": "counter-go.wasm", "counter-rust": "counter-rust.wasm", "counter-c": "counter-c.wasm"})
	id, out := submitSwapJob(t, c, count, 3000, "counter-go")
	_, before, _ := c.status(t, id)
	for _, to := range []string{"counter-rust@1", "counter-c@1"} {
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
