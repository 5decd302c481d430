package join_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/state/statetest"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/join"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/state"
)

type backend struct {
	name string
	open func(t testing.TB) state.Backend
}

var backends = []backend{{"memory", statetest.Memory}, {"pebble", statetest.Pebble}}

func ms(n int64) jobspec.Duration { return jobspec.Duration(time.Duration(n) * time.Millisecond) }

func intervalNode(lower, upper int64, lowerInc, upperInc bool) *jobspec.Node {
	return &jobspec.Node{Name: "j", Input: jobspec.Inputs{"l", "r"}, Join: &jobspec.JoinSpec{LeftKey: "k", RightKey: "k",
		Interval: &jobspec.IntervalJoinSpec{Lower: jobspec.SignedDuration(ms(lower)), Upper: jobspec.SignedDuration(ms(upper)),
			LowerInclusive: &lowerInc, UpperInclusive: &upperInc}}}
}

func windowNode(size, slide int64) *jobspec.Node {
	w := &jobspec.WindowSpec{}
	if size == slide {
		d := ms(size)
		w.Tumbling = &d
	} else {
		w.Sliding = &jobspec.SlidingSpec{Size: ms(size), Slide: ms(slide)}
	}
	return &jobspec.Node{Name: "j", Input: jobspec.Inputs{"l", "r"}, Join: &jobspec.JoinSpec{LeftKey: "k", RightKey: "k", Window: w}}
}

// harness drives one join operator over one store.
type harness struct {
	t     testing.TB
	op    *join.Operator
	store state.Store
	out   []string // "key|ts|value"
}

func openStore(t testing.TB, b state.Backend, job string) state.Store {
	t.Helper()
	st, err := b.OpenTask(state.Scope{Tenant: "default", Job: job, Operator: "j"}, 128, state.Range{Start: 0, End: 128})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newHarness(t testing.TB, n *jobspec.Node, st state.Store) *harness {
	t.Helper()
	op, err := join.New(&jobspec.Spec{Name: "test", Parallelism: 1, MaxParallelism: 128}, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Open(context.Background(), stream.TaskInfo{Job: "test", Node: "j", Parallelism: 1, MaxParallelism: 128,
		KeyGroups: stream.KeyGroupRange{Start: 0, End: 128}, State: st}); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, op: op.(*join.Operator), store: st}
}

func (h *harness) collect(b *stream.Batch) {
	for _, r := range b.Records {
		h.out = append(h.out, fmt.Sprintf("%s|%d|%s", r.Key, r.Timestamp, r.Value))
	}
}

// event is a record of one side, or a watermark when side < 0.
type event struct {
	side int
	key  string
	ts   int64
	id   int
}

func (e event) value() string { return fmt.Sprintf(`{"id":%d}`, e.id) }

func (h *harness) run(evs []event) {
	h.t.Helper()
	ctx := context.Background()
	for _, e := range evs {
		out := stream.NewBatch(16)
		var err error
		if e.side < 0 {
			err = h.op.ProcessWatermark(ctx, e.ts, out)
		} else {
			in := stream.NewBatch(1)
			in.Add([]byte(e.key), []byte(e.value()), e.ts)
			err = h.op.ProcessInput(ctx, e.side, in, out)
		}
		if err != nil {
			h.t.Fatal(err)
		}
		h.collect(out)
	}
}

func (h *harness) entries() int {
	h.t.Helper()
	n := 0
	if err := h.store.Snapshot(func(_, _ []byte) error { n++; return nil }); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// randomEvents is n records on both sides over a few keys, with random
// event times around a rising clock and rising watermarks among them.
func randomEvents(rng *rand.Rand, n int) []event {
	var evs []event
	wm, clock := int64(math.MinInt64), int64(rng.IntN(40)-20)
	for i := range n {
		clock += int64(rng.IntN(4))
		ts := clock - int64(rng.IntN(30)) // out of order, some late
		evs = append(evs, event{side: rng.IntN(2), key: fmt.Sprintf("k%d", rng.IntN(3)), ts: ts, id: i})
		if rng.IntN(6) == 0 {
			if w := clock - int64(rng.IntN(15)); w > wm {
				wm = w
				evs = append(evs, event{side: -1, ts: wm})
			}
		}
	}
	return append(evs, event{side: -1, ts: math.MaxInt64})
}

// intervalModel is the interval join by brute force: every accepted left
// and right record of a key with l.ts+lo ≤ r.ts ≤ l.ts+hi, a record being
// accepted when it is not below the watermark at its arrival.
func intervalModel(evs []event, lo, hi int64) (out []string, dropped int64) {
	wm := int64(math.MinInt64)
	var acc [2][]event
	for _, e := range evs {
		switch {
		case e.side < 0:
			wm = max(wm, e.ts)
		case e.ts < wm:
			dropped++
		default:
			acc[e.side] = append(acc[e.side], e)
		}
	}
	for _, l := range acc[0] {
		for _, r := range acc[1] {
			if l.key == r.key && l.ts+lo <= r.ts && r.ts <= l.ts+hi {
				out = append(out, fmt.Sprintf(`%s|%d|{"left":%s,"right":%s}`, l.key, max(l.ts, r.ts), l.value(), r.value()))
			}
		}
	}
	return out, dropped
}

// windowModel is the window join by brute force: per key and window, the
// cross product of the records put in it before it fired.
func windowModel(evs []event, size, slide int64) (out []string, dropped int64) {
	type win struct {
		key   string
		start int64
	}
	wm := int64(math.MinInt64)
	sides := map[win]*[2][]event{}
	for _, e := range evs {
		if e.side < 0 {
			wm = max(wm, e.ts)
			continue
		}
		kept := false
		// Every window [s, s+size) with s a multiple of slide holding ts.
		for s := e.ts - size - slide; s <= e.ts; s++ {
			if ((s%slide)+slide)%slide != 0 || e.ts < s || e.ts >= s+size || s+size-1 <= wm {
				continue
			}
			kept = true
			w := win{e.key, s}
			if sides[w] == nil {
				sides[w] = &[2][]event{}
			}
			sides[w][e.side] = append(sides[w][e.side], e)
		}
		if !kept {
			dropped++
		}
	}
	for w, s := range sides {
		for _, l := range s[0] {
			for _, r := range s[1] {
				out = append(out, fmt.Sprintf(`%s|%d|{"left":%s,"right":%s}`, w.key, w.start+size-1, l.value(), r.value()))
			}
		}
	}
	return out, dropped
}

func sameMultiset(t *testing.T, got, want []string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("joined %d records, want %d\ngot  %.600q\nwant %.600q", len(got), len(want), got, want)
	}
}

func TestIntervalJoinModel(t *testing.T) {
	bounds := []struct{ lower, upper int64 }{{-5, 10}, {0, 0}, {-10, -3}, {2, 8}, {-7, 7}}
	for _, be := range backends {
		for _, bd := range bounds {
			for _, inc := range [][2]bool{{true, true}, {false, true}, {true, false}, {false, false}} {
				lo, hi := bd.lower, bd.upper
				if !inc[0] {
					lo++
				}
				if !inc[1] {
					hi--
				}
				if lo > hi {
					continue
				}
				name := fmt.Sprintf("%s/[%d,%d]/inc=%v,%v", be.name, bd.lower, bd.upper, inc[0], inc[1])
				t.Run(name, func(t *testing.T) {
					b := be.open(t)
					for seed := range uint64(6) {
						rng := rand.New(rand.NewPCG(seed, 7))
						evs := randomEvents(rng, 150)
						h := newHarness(t, intervalNode(bd.lower, bd.upper, inc[0], inc[1]), openStore(t, b, fmt.Sprintf("%s-%d", t.Name(), seed)))
						h.run(evs)
						want, dropped := intervalModel(evs, lo, hi)
						sameMultiset(t, h.out, want)
						if h.op.Dropped() != dropped || h.op.Joined() != int64(len(want)) {
							t.Fatalf("seed %d: dropped %d joined %d, want %d and %d", seed, h.op.Dropped(), h.op.Joined(), dropped, len(want))
						}
						if dropped == 0 {
							t.Fatalf("seed %d: no late record: the test does not cover lateness", seed)
						}
						if n := h.entries(); n != 0 {
							t.Fatalf("seed %d: %d state entries left after the end of input", seed, n)
						}
					}
				})
			}
		}
	}
}

// TestIntervalJoinCleanup checks that state shrinks as the watermark
// passes, not only at the end: after a watermark beyond every record's
// reach, nothing is kept.
func TestIntervalJoinCleanup(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			h := newHarness(t, intervalNode(-5, 10, true, true), openStore(t, be.open(t), t.Name()))
			h.run([]event{{side: 0, key: "a", ts: 100, id: 1}, {side: 1, key: "a", ts: 104, id: 2}, {side: 1, key: "a", ts: 120, id: 3}})
			if len(h.out) != 1 || h.entries() == 0 {
				t.Fatalf("out %q, %d entries", h.out, h.entries())
			}
			// The left record at 100 can join rights up to 110; the right
			// at 120 lefts from 120-10=110 up to 125.
			h.run([]event{{side: -1, ts: 110}})
			before := h.entries()
			h.run([]event{{side: -1, ts: 111}})
			if after := h.entries(); after >= before {
				t.Fatalf("entries %d → %d: the left record at 100 was not removed after watermark 111", before, after)
			}
			// A right record exactly at the watermark is not late: it
			// still joins the left at 115 (which also joins the right at 120).
			h.run([]event{{side: 0, key: "a", ts: 115, id: 4}, {side: -1, ts: 120}, {side: 1, key: "a", ts: 120, id: 5}})
			if h.op.Dropped() != 0 || len(h.out) != 3 {
				t.Fatalf("dropped %d, out %q", h.op.Dropped(), h.out)
			}
			h.run([]event{{side: -1, ts: 126}})
			if n := h.entries(); n != 0 {
				t.Fatalf("%d entries left after watermark 126", n)
			}
		})
	}
}

func TestWindowJoinModel(t *testing.T) {
	windows := []struct{ size, slide int64 }{{10, 10}, {7, 7}, {10, 5}, {12, 5}, {9, 3}}
	for _, be := range backends {
		for _, w := range windows {
			t.Run(fmt.Sprintf("%s/size=%d,slide=%d", be.name, w.size, w.slide), func(t *testing.T) {
				b := be.open(t)
				for seed := range uint64(6) {
					rng := rand.New(rand.NewPCG(seed, 11))
					evs := randomEvents(rng, 150)
					h := newHarness(t, windowNode(w.size, w.slide), openStore(t, b, fmt.Sprintf("%s-%d", t.Name(), seed)))
					h.run(evs)
					want, dropped := windowModel(evs, w.size, w.slide)
					sameMultiset(t, h.out, want)
					if h.op.Dropped() != dropped {
						t.Fatalf("seed %d: dropped %d, want %d", seed, h.op.Dropped(), dropped)
					}
					if len(want) == 0 || dropped == 0 {
						t.Fatalf("seed %d: %d joined, %d late: the test does not exercise the join", seed, len(want), dropped)
					}
					if n := h.entries(); n != 0 {
						t.Fatalf("seed %d: %d state entries left after the end of input", seed, n)
					}
				}
			})
		}
	}
}

// TestJoinRestore stops a join midway, restores its state into a new
// store and operator, and checks that the whole output is that of an
// uninterrupted run.
func TestJoinRestore(t *testing.T) {
	nodes := map[string]*jobspec.Node{"interval": intervalNode(-5, 10, true, false), "window": windowNode(10, 5), "session": sessionNode(4)}
	for _, be := range backends {
		for name, n := range nodes {
			t.Run(be.name+"/"+name, func(t *testing.T) {
				b := be.open(t)
				evs := randomEvents(rand.New(rand.NewPCG(3, 3)), 300)
				whole := newHarness(t, n, openStore(t, b, "whole"))
				whole.run(evs)

				cut := len(evs) / 2
				first := newHarness(t, n, openStore(t, b, "first"))
				first.run(evs[:cut])
				var keys, vals [][]byte
				if err := first.store.Snapshot(func(k, v []byte) error {
					keys, vals = append(keys, slices.Clone(k)), append(vals, slices.Clone(v))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(keys) == 0 {
					t.Fatal("nothing buffered at the cut: the test restores nothing")
				}
				wm := int64(math.MinInt64)
				for _, e := range evs[:cut] {
					if e.side < 0 {
						wm = max(wm, e.ts)
					}
				}
				st := openStore(t, b, "second")
				if err := st.Restore(func(yield func([]byte, []byte) bool) {
					for i := range keys {
						if !yield(keys[i], vals[i]) {
							return
						}
					}
				}); err != nil {
					t.Fatal(err)
				}
				second := newHarness(t, n, st)
				// The task re-advances a restored subtask to the watermark
				// of its checkpoint before any record.
				second.run(append([]event{{side: -1, ts: wm}}, evs[cut:]...))
				sameMultiset(t, append(first.out, second.out...), whole.out)
				if first.op.Dropped()+second.op.Dropped() != whole.op.Dropped() {
					t.Fatalf("dropped %d+%d, uninterrupted %d", first.op.Dropped(), second.op.Dropped(), whole.op.Dropped())
				}
			})
		}
	}
}

func TestJoinRefusals(t *testing.T) {
	h := newHarness(t, intervalNode(-5, 10, true, true), openStore(t, backends[0].open(t), t.Name()))
	in := stream.NewBatch(1)
	in.Add([]byte("a"), []byte(`{}`), stream.NoTimestamp)
	ctx := context.Background()
	for name, err := range map[string]error{
		"no timestamp": h.op.ProcessInput(ctx, 0, in, stream.NewBatch(1)),
		"input 2":      h.op.ProcessInput(ctx, 2, in, stream.NewBatch(1)),
		"one-input":    h.op.Process(ctx, in, stream.NewBatch(1)),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func sessionNode(gap int64) *jobspec.Node {
	return &jobspec.Node{Name: "j", Input: jobspec.Inputs{"l", "r"}, Join: &jobspec.JoinSpec{LeftKey: "k", RightKey: "k",
		Window: &jobspec.WindowSpec{Session: &jobspec.SessionSpec{Gap: ms(gap)}}}}
}

// sessionModel is the session window join on plain slices: per key, its
// sessions with their records of both sides, merged as records arrive
// and fired when the watermark reaches their end-1.
func sessionModel(evs []event, gap int64) (out []string, dropped int64) {
	type session struct {
		start, end int64
		sides      [2][]event
	}
	wm := int64(math.MinInt64)
	open := map[string][]*session{}
	fire := func() {
		for key, ss := range open {
			var kept []*session
			for _, s := range ss {
				if s.end-1 > wm {
					kept = append(kept, s)
					continue
				}
				for _, l := range s.sides[0] {
					for _, r := range s.sides[1] {
						out = append(out, fmt.Sprintf(`%s|%d|{"left":%s,"right":%s}`, key, s.end-1, l.value(), r.value()))
					}
				}
			}
			open[key] = kept
		}
	}
	for _, e := range evs {
		if e.side < 0 {
			if e.ts > wm {
				wm = e.ts
				fire()
			}
			continue
		}
		m := &session{start: e.ts, end: e.ts + gap}
		var rest []*session
		for _, s := range open[e.key] {
			if s.start <= m.end && m.start <= s.end {
				m.start, m.end = min(m.start, s.start), max(m.end, s.end)
				m.sides[0] = append(m.sides[0], s.sides[0]...)
				m.sides[1] = append(m.sides[1], s.sides[1]...)
				continue
			}
			rest = append(rest, s)
		}
		if m.end-1 <= wm {
			dropped++
			continue
		}
		m.sides[e.side] = append(m.sides[e.side], e)
		open[e.key] = append(rest, m)
	}
	return out, dropped
}

func TestSessionJoinModel(t *testing.T) {
	for _, be := range backends {
		for _, gap := range []int64{1, 5, 12} {
			t.Run(fmt.Sprintf("%s/gap=%d", be.name, gap), func(t *testing.T) {
				b := be.open(t)
				for seed := range uint64(6) {
					rng := rand.New(rand.NewPCG(seed, 13))
					evs := randomEvents(rng, 150)
					h := newHarness(t, sessionNode(gap), openStore(t, b, fmt.Sprintf("%s-%d", t.Name(), seed)))
					h.run(evs)
					want, dropped := sessionModel(evs, gap)
					sameMultiset(t, h.out, want)
					if h.op.Dropped() != dropped {
						t.Fatalf("seed %d: dropped %d, want %d", seed, h.op.Dropped(), dropped)
					}
					if len(want) == 0 {
						t.Fatalf("seed %d: nothing joined: the test does not exercise the join", seed)
					}
					if n := h.entries(); n != 0 {
						t.Fatalf("seed %d: %d state entries left after the end of input", seed, n)
					}
				}
			})
		}
	}
}
