package window_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/state"
)

// Tumbling and sliding windows keep their state in panes; these tests check
// them against windows kept one by one, and check that panes go.

// windowModel is Flink's WindowOperator for tumbling and sliding windows
// with an accumulator per window, by brute force: what the operator must
// emit, in the same order.
type windowModel struct {
	size, slide, lateness int64
	wm                    int64
	wins                  map[modelWin]*modelAcc
	dropped               int64
}

type modelWin struct {
	key   string
	start int64
}

type modelAcc struct {
	count   int
	vals    []int64 // the records' v, when numeric
	pending bool    // its firing at end-1 is still to come
}

func newWindowModel(size, slide, lateness int64) *windowModel {
	return &windowModel{size: size, slide: slide, lateness: lateness, wm: math.MinInt64, wins: map[modelWin]*modelAcc{}}
}

func (m *windowModel) gone(maxTs int64) bool { return maxTs+m.lateness <= m.wm }

func (m *windowModel) result(w modelWin, a *modelAcc) string {
	var b strings.Builder
	fmt.Fprintf(&b, `%s@%d {"key":%q,"window_start":%d,"window_end":%d,"count":%d`, w.key, w.start+m.size-1, w.key, w.start, w.start+m.size, a.count)
	if len(a.vals) == 0 {
		b.WriteString(`,"sum":0,"min":null,"max":null,"avg":null}`)
		return b.String()
	}
	sum := int64(0)
	for _, v := range a.vals {
		sum += v
	}
	avg := strconv.FormatFloat(float64(sum)/float64(len(a.vals)), 'f', -1, 64)
	fmt.Fprintf(&b, `,"sum":%d,"min":%d,"max":%d,"avg":%s}`, sum, slices.Min(a.vals), slices.Max(a.vals), avg)
	return b.String()
}

// add returns what the operator emits for one record, and whether the
// record is late: its windows from the latest back, each updated unless it
// is gone, and emitted at once when the watermark passed its end.
func (m *windowModel) add(key string, ts int64, v *int64) (emitted []string, late bool) {
	late = true
	for start := floorDiv(ts, m.slide) * m.slide; start > ts-m.size; start -= m.slide {
		maxTs := start + m.size - 1
		if m.gone(maxTs) {
			break
		}
		late = false
		w := modelWin{key, start}
		a := m.wins[w]
		if a == nil {
			a = &modelAcc{pending: maxTs > m.wm}
			m.wins[w] = a
		}
		a.count++
		if v != nil {
			a.vals = append(a.vals, *v)
		}
		if maxTs <= m.wm {
			emitted = append(emitted, m.result(w, a))
		}
	}
	return emitted, late
}

// advance returns what fires at watermark wm, in timer order: end-1, then
// key group, then key as the store orders them (length, then bytes).
func (m *windowModel) advance(wm int64) []string {
	if wm <= m.wm {
		return nil
	}
	m.wm = wm
	var due []modelWin
	for w, a := range m.wins {
		if a.pending && w.start+m.size-1 <= wm {
			a.pending = false
			due = append(due, w)
		}
	}
	slices.SortFunc(due, func(a, b modelWin) int {
		if a.start != b.start {
			return int(a.start - b.start)
		}
		ga, gb := state.KeyGroup([]byte(a.key), 128), state.KeyGroup([]byte(b.key), 128)
		if ga != gb {
			return ga - gb
		}
		if len(a.key) != len(b.key) {
			return len(a.key) - len(b.key)
		}
		return strings.Compare(a.key, b.key)
	})
	var out []string
	for _, w := range due {
		out = append(out, m.result(w, m.wins[w]))
	}
	for w := range m.wins {
		if m.gone(w.start + m.size - 1) {
			delete(m.wins, w)
		}
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// stateCounts is what a Store holds, from its snapshot: panes per key
// (decoded from its value of state "panes"), entries of the in-memory
// firing index per key, and anything else.
type stateCounts struct {
	panes, timers map[string]int
	other         int
}

func (c stateCounts) max(m map[string]int) int {
	n := 0
	for _, v := range m {
		n = max(n, v)
	}
	return n
}

func (c stateCounts) empty() bool { return len(c.panes) == 0 && len(c.timers) == 0 && c.other == 0 }

func countState(t testing.TB, h *harness) stateCounts {
	t.Helper()
	// Snapshot keys are relative to the scope; DecodeKey wants it.
	k, err := state.EncodeKey(nil, state.Key{Scope: h.scope, Kind: state.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	prefix := k[:len(k)-6] // group (2), kind (1), empty name, key and namespace (1 each)
	c := stateCounts{panes: map[string]int{}, timers: h.op.DueEntries()}
	var keys []string
	err = h.store.Snapshot(func(rel, _ []byte) error {
		key, err := state.DecodeKey(append(bytes.Clone(prefix), rel...))
		if err != nil {
			return err
		}
		if key.Kind == state.KindValue && key.Name == "panes" {
			keys = append(keys, string(key.Key))
		} else {
			c.other++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The value of a key's panes starts with the format byte, the varint
	// start of the next window to fire and the uvarint number of panes.
	for _, key := range keys {
		v, _, err := h.store.ValueGet("panes", []byte(key), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, n := binary.Varint(v[1:])
		count, m := binary.Uvarint(v[1+n:])
		if n <= 0 || m <= 0 || count == 0 {
			t.Fatalf("key %q: panes value %x does not decode or holds no pane", key, v)
		}
		c.panes[key] = int(count)
	}
	return c
}

// TestPanesMatchWindows feeds random records — out of order, some late,
// some without a number — and random watermarks to the operator and to the
// per-window model, and requires the same output after every step, in the
// same order, for sizes with and without slides that divide them. After
// the final watermark the store must be empty.
func TestPanesMatchWindows(t *testing.T) {
	cases := []struct {
		size, slide, lateness int64
		late                  bool
	}{
		{10, 10, 0, true},
		{7, 7, 5, false},
		{10, 5, 0, true},
		{10, 2, 7, true},
		{10, 3, 0, false},
		{10, 3, 4, true},
		{10, 4, 0, true},
		{10, 4, 9, false},
		{7, 2, 3, true},
		{61, 60, 0, true},
		{61, 60, 30, false},
		{12, 5, 25, true},
		{5, 1, 0, false},
		{9, 9, 20, true},
	}
	keys := []string{"a", "b", "cc", "d", "key-e"}
	for _, bk := range backends {
		for _, tc := range cases {
			name := fmt.Sprintf("%s/size %d slide %d lateness %d", bk.name, tc.size, tc.slide, tc.lateness)
			t.Run(name, func(t *testing.T) {
				w := sliding(tc.size, tc.slide)
				if tc.size == tc.slide {
					w = tumbling(tc.size)
				}
				lateOut := ""
				if tc.late {
					lateOut = "late"
				}
				h := newHarness(t, bk.open(t), windowNode(withLateness(w, tc.lateness, lateOut), "count", "sum(v)", "min(v)", "max(v)", "avg(v)"))
				m := newWindowModel(tc.size, tc.slide, tc.lateness)
				rng := rand.New(rand.NewPCG(uint64(tc.size), uint64(tc.slide*100+tc.lateness)))
				now := int64(-3 * tc.size) // negative times too
				var refired, lateRecs int
				for i := range 400 {
					var s step
					if i%3 < 2 {
						for range 1 + rng.IntN(6) {
							ts := now + rng.Int64N(tc.size/2+3) - 2
							if rng.IntN(8) == 0 { // far behind
								ts -= rng.Int64N(2*(tc.size+tc.lateness) + 1)
							}
							key := keys[rng.IntN(len(keys))]
							value := fmt.Sprintf(`{"v":"%d"}`, i)
							var v *int64
							if rng.IntN(5) > 0 {
								x := rng.Int64N(41) - 20
								v = &x
								value = fmt.Sprintf(`{"v":%d}`, x)
							}
							s.recs = append(s.recs, in{key, ts, value})
							emitted, late := m.add(key, ts, v)
							s.want = append(s.want, emitted...)
							refired += len(emitted)
							if late {
								lateRecs++
								if tc.late {
									s.late = append(s.late, fmt.Sprintf("%s@%d %s", key, ts, value))
								} else {
									m.dropped++
								}
							}
						}
						now += rng.Int64N(tc.slide + 2)
					} else {
						s.wm = now - rng.Int64N(tc.slide+3)
						if rng.IntN(10) == 0 {
							s.wm += rng.Int64N(3 * tc.size) // jumps over several windows
							now = max(now, s.wm)
						}
						s.want = m.advance(s.wm) // nothing when it does not advance
					}
					got, late, err := h.run(s)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if !equal(got, s.want) || !equal(late, s.late) {
						t.Fatalf("step %d (%+v): emitted\n\t%s\nlate\n\t%s\nwant\n\t%s\nlate\n\t%s", i, s.recs, strings.Join(got, "\n\t"), strings.Join(late, "\n\t"), strings.Join(s.want, "\n\t"), strings.Join(s.late, "\n\t"))
					}
				}
				want := m.advance(math.MaxInt64)
				got, _, err := h.run(step{wm: math.MaxInt64})
				if err != nil {
					t.Fatal(err)
				}
				if !equal(got, want) {
					t.Fatalf("final watermark: emitted\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
				}
				if h.op.Dropped() != m.dropped {
					t.Errorf("dropped %d, want %d", h.op.Dropped(), m.dropped)
				}
				if c := countState(t, h); !c.empty() {
					t.Errorf("after the final watermark the store holds panes %v, timers %v and %d other entries; want nothing", c.panes, c.timers, c.other)
				}
				// Without allowed lateness a window that fired is gone: none
				// fires again.
				if (tc.lateness > 0 && refired == 0) || lateRecs == 0 {
					t.Errorf("the data does not exercise the case: %d re-firings, %d late records", refired, lateRecs)
				}
			})
		}
	}
}

// TestPaneStateIsBounded runs a long stream with disorder and checks, from
// the store's snapshot, that the panes and timers of a key stay within what
// its live windows need, however long the run, and that nothing is left
// after the final watermark.
func TestPaneStateIsBounded(t *testing.T) {
	const (
		records  = 100_000
		stepMs   = 20 // 2000s of event time: 33 tumbling windows, 200 sliding ones
		ooo      = 3_000
		keyCount = 4
	)
	cases := []struct {
		name                  string
		size, slide, lateness int64
	}{
		{"tumbling", 60_000, 60_000, 0},
		{"tumbling with lateness", 60_000, 60_000, 5_000},
		{"sliding", 10_000, 1_000, 0},
		{"sliding with lateness", 10_000, 1_000, 4_000},
		{"sliding not divisible", 10_000, 3_000, 0},
		{"sliding not divisible with lateness", 10_000, 3_000, 2_500},
	}
	for _, bk := range backends {
		for _, tc := range cases {
			t.Run(bk.name+"/"+tc.name, func(t *testing.T) {
				w := sliding(tc.size, tc.slide)
				if tc.size == tc.slide {
					w = tumbling(tc.size)
				}
				h := newHarness(t, bk.open(t), windowNode(withLateness(w, tc.lateness, "late"), "count", "sum(v)"))
				// A pane lives until the watermark passes its latest window's
				// cleanup time; records run up to ooo ahead of the watermark.
				// So a key's panes span (size + lateness + ooo) of time, two
				// a slide when the slide does not divide the size; its timers
				// are one per window not cleaned up.
				perSlide := int64(1)
				if tc.size%tc.slide != 0 {
					perSlide = 2
				}
				slides := (tc.size+tc.lateness+ooo+tc.slide-1)/tc.slide + 1
				maxPanes, maxTimers := int(perSlide*slides), int(slides+1)
				rng := rand.New(rand.NewPCG(1, 2))
				ts, maxTs := int64(1_767_225_600_000), int64(math.MinInt64)
				seenPanes, seenTimers := 0, 0
				for i := 0; i < records; i += 100 {
					var s step
					for j := range 100 {
						r := ts - rng.Int64N(ooo)
						maxTs = max(maxTs, r)
						s.recs = append(s.recs, in{fmt.Sprintf("k%d", (i+j)%keyCount), r, `{"v":1}`})
						ts += stepMs
					}
					if _, _, err := h.run(s); err != nil {
						t.Fatal(err)
					}
					if _, _, err := h.run(step{wm: maxTs - ooo - 1}); err != nil {
						t.Fatal(err)
					}
					if i%1000 != 0 {
						continue
					}
					c := countState(t, h)
					if c.other != 0 {
						t.Fatalf("after %d records: %d entries other than panes and timers", i, c.other)
					}
					if p, tm := c.max(c.panes), c.max(c.timers); p > maxPanes || tm > maxTimers {
						t.Fatalf("after %d records: a key holds %d panes and %d timers, want at most %d and %d", i, p, tm, maxPanes, maxTimers)
					}
					seenPanes, seenTimers = max(seenPanes, c.max(c.panes)), max(seenTimers, c.max(c.timers))
				}
				if _, _, err := h.run(step{wm: math.MaxInt64}); err != nil {
					t.Fatal(err)
				}
				if c := countState(t, h); !c.empty() {
					t.Errorf("after the final watermark the store holds panes %v, timers %v and %d other entries; want nothing", c.panes, c.timers, c.other)
				}
				t.Logf("at most %d panes (bound %d) and %d timers (bound %d) per key", seenPanes, maxPanes, seenTimers, maxTimers)
			})
		}
	}
}

// TestCorruptPaneFails checks that a pane the operator cannot decode fails
// the task with state.ErrCorrupt, naming the node and key, whether a
// record reads it or a firing window does.
func TestCorruptPaneFails(t *testing.T) {
	// The panes of a key are its value of state "panes".
	garbage := []byte{1, 0, 1, 0x80}
	for _, tc := range []struct {
		name      string
		recordTs  int64 // a record in another pane of the window, or the corrupt one
		wm        int64 // fires the window when the record does not fail
		viaRecord bool
		size      int64
	}{
		{name: "record", recordTs: 5, viaRecord: true, size: 10},
		{name: "firing", recordTs: 17, wm: 19, size: 10},
		{name: "tumbling firing", recordTs: 3, wm: 9, size: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := sliding(tc.size, 5)
			if tc.name == "tumbling firing" {
				w = tumbling(tc.size)
			}
			h := newHarness(t, backends[0].open(t), windowNode(w, "count", "sum(v)"))
			if !tc.viaRecord {
				if _, _, err := h.run(step{recs: []in{{"a", tc.recordTs, `{"v":1}`}}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.store.ValuePut("panes", []byte("a"), nil, garbage, 0); err != nil {
				t.Fatal(err)
			}
			var err error
			if tc.viaRecord {
				_, _, err = h.run(step{recs: []in{{"a", tc.recordTs, `{"v":1}`}}})
			} else {
				_, _, err = h.run(step{wm: tc.wm})
			}
			if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), `node per_key: key "a"`) {
				t.Fatalf("err = %v, want a state.ErrCorrupt naming the node and key", err)
			}
		})
	}
}
