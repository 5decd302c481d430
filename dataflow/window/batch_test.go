package window_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
)

// batchSegment is records a test feeds an operator, in batches of a given
// size, followed by a watermark.
type batchSegment struct {
	recs []in
	wm   int64
}

// batchInput is bursts of transactions of 6 keys, two at a time, out of
// order by up to 1.2 s and 4% of them 1.5 to 4 s late, in segments of 256
// records ending with the watermark 1 s behind the latest record: sessions
// of 200 ms open, get extended, bridged and merged within a batch and
// across batches, fire, and take late records and re-fire.
func batchInput() []batchSegment {
	const (
		keys    = 6
		records = 3072
		segment = 256
	)
	rng := rand.New(rand.NewPCG(7, 11))
	countries := []string{"DE", "FR", "NL", "IT"}
	var segs []batchSegment
	var cur batchSegment
	maxTs := int64(0)
	for i := range records {
		phase := i / 150
		k := (phase + 2*rng.IntN(2)) % keys // two keys active per phase
		ts := 1_000_000 + int64(i)*40 - rng.Int64N(1200)
		if rng.IntN(100) < 4 {
			ts -= 1500 + rng.Int64N(2500)
		}
		maxTs = max(maxTs, ts)
		value := fmt.Sprintf(`{"card":"c%d","amount":%d.%02d,"country":"%s"}`, k, rng.IntN(500), rng.IntN(100), countries[rng.IntN(len(countries))])
		cur.recs = append(cur.recs, in{fmt.Sprintf("c%d", k), ts, value})
		if len(cur.recs) == segment {
			cur.wm = maxTs - 1000 - 1
			segs = append(segs, cur)
			cur = batchSegment{}
		}
	}
	return segs
}

// batchRun is what an operator emitted, in order, and the state it left.
type batchRun struct {
	out, late                       []string
	state                           []string // every entry of the store, timers included
	refires                         int      // results emitted by Process rather than by a watermark
	rounds, deferred, alone, merges int64
}

// runBatches feeds node the segments in batches of size, record by record
// through the per-record path if perRecord, and collects the results.
func runBatches(t *testing.T, bk backend, node *jobspec.Node, modules map[string]*host.Module, segs []batchSegment, size int, perRecord bool) batchRun {
	t.Helper()
	h := newHarnessWith(t, bk.open(t), node, modules)
	if perRecord {
		h.op.AddPerRecord()
	}
	ctx := context.Background()
	var run batchRun
	collect := func(out *stream.Batch) {
		for i := range out.Records {
			run.out = append(run.out, result(&out.Records[i]))
		}
		if h.late != "" {
			side := out.Side(h.late)
			for i := range side.Records {
				run.late = append(run.late, result(&side.Records[i]))
			}
		}
	}
	b := stream.NewBatch(size)
	for _, seg := range segs {
		for from := 0; from < len(seg.recs); from += size {
			b.Reset()
			for _, r := range seg.recs[from:min(from+size, len(seg.recs))] {
				b.Add([]byte(r.key), []byte(r.value), r.ts)
			}
			h.out.Reset()
			if err := h.op.Process(ctx, b, h.out); err != nil {
				t.Fatal(err)
			}
			run.refires += h.out.Len()
			collect(h.out)
		}
		h.out.Reset()
		if err := h.op.ProcessWatermark(ctx, seg.wm, h.out); err != nil {
			t.Fatal(err)
		}
		collect(h.out)
	}
	err := h.store.Snapshot(func(key, val []byte) error {
		run.state = append(run.state, hex.EncodeToString(key)+"="+hex.EncodeToString(val))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	run.rounds, run.deferred, run.alone, run.merges = h.op.BatchCounts()
	return run
}

// TestWasmBatchesAsRecords checks that session and global windows with a
// Wasm aggregate, which add a batch with one eddy_agg_add call a round,
// emit the same results in the same order, send the same late records and
// leave the same accumulators and timers as the per-record path, whatever
// the batch size, on both backends.
func TestWasmBatchesAsRecords(t *testing.T) {
	ctx := context.Background()
	e := testEngine(t)
	segs := batchInput()
	windows := []struct {
		name                  string
		window                func() *jobspec.WindowSpec
		sessions, wantRefires bool
	}{
		{"session with lateness", func() *jobspec.WindowSpec { return withLateness(sessionGap(200), 300, "late") }, true, true},
		{"session", func() *jobspec.WindowSpec { return withLateness(sessionGap(1000), 0, "late") }, true, false},
		{"global", func() *jobspec.WindowSpec { return globalCount(7) }, false, true},
	}
	for _, bk := range backends {
		for _, mod := range []string{"card-stats-c", "card-stats-go"} {
			m, err := e.Load(ctx, "../../udfs/build/"+mod+".wasm")
			if err != nil {
				t.Fatal(err)
			}
			modules := map[string]*host.Module{mod: m}
			for _, w := range windows {
				t.Run(fmt.Sprintf("%s/%s/%s", bk.name, mod, w.name), func(t *testing.T) {
					node := windowNode(w.window())
					node.Aggregate = &jobspec.AggregateSpec{Wasm: &jobspec.WasmSpec{Module: mod}, Name: "stats"}
					want := runBatches(t, bk, node, modules, segs, 256, true)
					if len(want.out) == 0 || len(want.state) == 0 {
						t.Fatalf("the record-at-a-time run emitted %d results and left %d entries", len(want.out), len(want.state))
					}
					for _, size := range []int{1, 13, 256} {
						got := runBatches(t, bk, node, modules, segs, size, false)
						for _, c := range []struct {
							what      string
							got, want []string
						}{{"results", got.out, want.out}, {"late records", got.late, want.late}, {"state", got.state, want.state}} {
							if i := firstDiff(c.got, c.want); i >= 0 {
								t.Errorf("batches of %d: %s differ from record at a time at %d of %d/%d:\n got %s\nwant %s",
									size, c.what, i, len(c.got), len(c.want), at(c.got, i), at(c.want, i))
							}
						}
						if size != 256 {
							continue
						}
						t.Logf("%d results (%d re-firings), %d late; batches of 256: %d rounds and %d records added alone (%d eddy_agg_add calls for %d records), %d records deferred to a later round, %d merges of stored sessions in a round",
							len(want.out), want.refires, len(want.late), got.rounds, got.alone, got.rounds+got.alone, len(segs)*256, got.deferred, got.merges)
						if w.sessions && (got.deferred == 0 || got.alone == 0 || got.merges == 0 || len(want.late) == 0) || w.wantRefires && want.refires == 0 {
							t.Errorf("the data does not exercise batches of sessions: %d deferred, %d alone, %d merges, %d re-firings, %d late",
								got.deferred, got.alone, got.merges, want.refires, len(want.late))
						}
					}
				})
			}
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
