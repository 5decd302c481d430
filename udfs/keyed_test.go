package udfs_test

// Tests of the stateful operators (counter, country-change): each module
// runs against the test host's keyed state and timers, and is compared
// with a native driver of the same algorithm (packages counting and
// detector) that keeps its state in maps: the output, the state after every
// step, and the timers must be the same.

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit/keyedhost"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
	"github.com/eddy-stream/eddy/udfs/countrychange/detector"
)

// nativeCounter is the counter operator natively.
type nativeCounter struct {
	counts map[string][]byte
	out    []abi.Record
}

func (n *nativeCounter) process(t *testing.T, recs []abi.Record) {
	t.Helper()
	for _, r := range recs {
		stored, ok := n.counts[string(r.Key)]
		c, err := counting.Decode(stored, ok)
		if err != nil {
			t.Fatal(err)
		}
		n.counts[string(r.Key)] = counting.Append(nil, c+1)
		n.out = append(n.out, abi.Record{Key: r.Key, Value: counting.AppendJSON(nil, r.Key, c+1), Timestamp: r.Timestamp})
	}
}

// counterKeys include the empty key, bytes JSON must escape, and bytes
// that are not UTF-8.
var counterKeys = []string{"a", "b", "", "card-0042", `q"uote\`, "tab\there", "\x00\x01", "caf\xc3\xa9", "\xff\xfe", "😀", strings.Repeat("k", 300)}

func TestCounter(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	recs := make([]abi.Record, 2000)
	for i := range recs {
		recs[i] = abi.Record{Key: []byte(pick(rng, counterKeys)), Value: []byte(genValue(rng)), Timestamp: rng.Int64N(1e12)}
		if i%13 == 0 {
			recs[i].Timestamp = abi.NoTimestamp
		}
	}
	native := &nativeCounter{counts: map[string][]byte{}}
	native.process(t, recs)
	for _, lang := range modules {
		t.Run(lang, func(t *testing.T) {
			g := newGuest(t, "counter-"+lang)
			got := g.run([]byte(`{}`), recs, 1, 3, 17, 64, 100, 500)
			equalRecords(t, recs, got, native.out)
			h := g.calls.keyed
			if want := []keyedhost.Declaration{{Name: counting.StateName, Kind: abi.StateValue}}; !slices.Equal(h.Decls, want) {
				t.Errorf("declared %+v, want %+v", h.Decls, want)
			}
			if got := h.ValuesOf(counting.StateName); !maps.EqualFunc(got, native.counts, bytes.Equal) {
				t.Errorf("state %q differs from the native one:\n got  %q\n want %q", counting.StateName, got, native.counts)
			}
		})
	}
}

// nativeDetector is the country-change operator natively, with its state
// and timers in maps, as the test host keeps them.
type nativeDetector struct {
	config  detector.Config
	state   map[string][]byte
	timers  map[keyedhost.Timer]bool
	out     []abi.Record
	scratch []byte
}

func newNativeDetector(t testing.TB, config string) *nativeDetector {
	t.Helper()
	c, err := detector.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	return &nativeDetector{config: c, state: map[string][]byte{}, timers: map[keyedhost.Timer]bool{}}
}

func (n *nativeDetector) process(recs []abi.Record) {
	for _, r := range recs {
		if r.Timestamp == abi.NoTimestamp {
			continue
		}
		txn, scratch, ok := detector.ParseTxn(r.Value, n.scratch)
		n.scratch = scratch
		if !ok {
			continue
		}
		key := string(r.Key)
		stored, have := n.state[key]
		var last detector.Last
		if have {
			last, _ = detector.DecodeLast(stored)
		}
		step := n.config.Decide(last, have, txn.Country, r.Timestamp)
		if step.Alert {
			n.out = append(n.out, abi.Record{Key: r.Key, Value: detector.AppendAlert(nil, txn.Card, step, r.Timestamp), Timestamp: r.Timestamp})
		}
		if step.Replace {
			n.state[key] = detector.AppendLast(nil, detector.Last{Ts: r.Timestamp, Country: txn.Country})
			if step.HasOld {
				delete(n.timers, keyedhost.Timer{Kind: abi.TimerEventTime, Key: key, Time: step.OldTimer})
			}
			n.timers[keyedhost.Timer{Kind: abi.TimerEventTime, Key: key, Time: step.NewTimer}] = true
		}
	}
}

// advance fires the timers due at wm in (time, key) order, as the test host
// does.
func (n *nativeDetector) advance(wm int64) {
	for _, t := range keyedhost.SortTimers(slices.Collect(maps.Keys(n.timers))) {
		if t.Time > wm {
			break
		}
		delete(n.timers, t)
		if stored, ok := n.state[t.Key]; ok {
			if last, _ := detector.DecodeLast(stored); n.config.Expired(last, t.Time) {
				delete(n.state, t.Key)
			}
		}
	}
}

// checkSame compares the guest's state and timers with the native ones.
func (n *nativeDetector) checkSame(t testing.TB, g *guest, when string) {
	t.Helper()
	h := g.calls.keyed
	if got := h.ValuesOf(detector.StateName); !maps.EqualFunc(got, n.state, bytes.Equal) {
		t.Fatalf("%s: state differs from the native one:\n got  %q\n want %q", when, got, n.state)
	}
	if got, want := h.PendingTimers(), keyedhost.SortTimers(slices.Collect(maps.Keys(n.timers))); !slices.Equal(got, want) {
		t.Fatalf("%s: timers differ from the native ones:\n got  %v\n want %v", when, got, want)
	}
}

var (
	txnCards = []string{"card-0001", "card-0002", "card-0003", "card-0042", "card-\u00e9", "card-7"}
	// A long country makes the SDKs' state reads grow their buffers.
	txnCountries = []string{`"DE"`, `"FR"`, `"NL"`, `"D\u0045"`, `"FR"`, `"DE"`, `"\u00e9\ud800"`, `""`, `"` + strings.Repeat("X", 600) + `"`}
)

// txnValue is a transaction as the operator's documentation shows it.
func txnValue(card, country string, amount float64, ts int64) string {
	return fmt.Sprintf(`{"card": %q, "amount": %g, "country": %s, "merchant": "m-017", "ts": %d}`, card, amount, country, ts)
}

// genTransactions makes a stream of transactions for a few cards: mostly
// in order with gaps around window, some out of order or without a
// timestamp, and some values the operator ignores.
func genTransactions(rng *rand.Rand, n int, window int64) []abi.Record {
	recs := make([]abi.Record, n)
	ts := int64(1767225600000)
	for i := range recs {
		card := pick(rng, txnCards)
		ts += rng.Int64N(window / 2)
		if rng.IntN(8) == 0 {
			ts += window + rng.Int64N(3*window)
		}
		rts := ts
		switch rng.IntN(12) {
		case 0:
			rts = ts - rng.Int64N(2*window) // out of order
		case 1:
			rts = abi.NoTimestamp
		}
		value := txnValue(card, pick(rng, txnCountries), float64(rng.IntN(100000))/100, rts)
		switch rng.IntN(25) {
		case 0:
			value = `{"card": "` + card + `", "amount": 1}` // no country
		case 1:
			value = `{"card": "` + card + `", "country": 49}`
		case 2:
			value = pick(rng, malformed)
		case 3:
			value = `{"card": "` + strings.ReplaceAll(card, "0", `\u0030`) + `", "country": "IT"}`
		}
		recs[i] = abi.Record{Key: []byte(card), Value: []byte(value), Timestamp: rts}
	}
	return recs
}

func TestCountryChange(t *testing.T) {
	for _, config := range []string{`{}`, `{"window_ms": 60000}`, `{"window_ms": 1000}`} {
		c, err := detector.Parse([]byte(config))
		if err != nil {
			t.Fatal(err)
		}
		recs := genTransactions(rand.New(rand.NewPCG(13, uint64(c.WindowMs))), 3000, c.WindowMs)
		for _, lang := range modules {
			t.Run(lang+"/"+config, func(t *testing.T) {
				g := newGuest(t, "country-change-"+lang)
				native := newNativeDetector(t, config)
				if err := g.open([]byte(config)); err != nil {
					t.Fatal(err)
				}
				// Batches of varied sizes; after each the watermark follows
				// the newest time seen, less some lateness, so that timers
				// fire between batches and some records arrive late.
				rng := rand.New(rand.NewPCG(17, 18))
				wm, newest := int64(math.MinInt64), int64(math.MinInt64)
				for rest := recs; len(rest) > 0; {
					n := min(1+rng.IntN(40), len(rest))
					batch := rest[:n]
					rest = rest[n:]
					if err := g.process(batch); err != nil {
						t.Fatal(err)
					}
					native.process(batch)
					for _, r := range batch {
						newest = max(newest, r.Timestamp)
					}
					if next := newest - c.WindowMs/3; next > wm {
						wm = next
						if err := g.advanceWatermark(wm); err != nil {
							t.Fatal(err)
						}
						native.advance(wm)
					}
					native.checkSame(t, g, fmt.Sprintf("watermark %d", wm))
				}
				// The end of the input: every card's state goes.
				if err := g.advanceWatermark(math.MaxInt64); err != nil {
					t.Fatal(err)
				}
				native.advance(math.MaxInt64)
				native.checkSame(t, g, "end")
				if err := g.close(); err != nil {
					t.Fatal(err)
				}
				equalRecords(t, recs, g.calls.records, native.out)
				if len(native.out) < 20 || len(g.calls.fired) < 20 {
					t.Errorf("only %d alerts and %d timers: the data does not exercise the operator", len(native.out), len(g.calls.fired))
				}
				for _, d := range g.calls.keyed.Decls {
					if n := len(g.calls.keyed.ValuesOf(d.Name)); n != 0 {
						t.Errorf("%d values of %s left after the last watermark", n, d.Name)
					}
				}
				t.Logf("%d alerts, %d timers fired, %d reads retried with a larger buffer", len(native.out), len(g.calls.fired), g.calls.keyed.Retries)
			})
		}
	}
}

// A step of a scenario: process a transaction, or move the watermark.
type ccStep struct {
	card, country string
	ts            int64
	watermark     bool // move the watermark to ts instead
}

func txn(card, country string, ts int64) ccStep { return ccStep{card: card, country: country, ts: ts} }
func watermark(ts int64) ccStep                 { return ccStep{ts: ts, watermark: true} }

// TestCountryChangeScenarios spells out the rules, including timer-driven
// cleanup, on a window of 1000 ms.
func TestCountryChangeScenarios(t *testing.T) {
	const config = `{"window_ms": 1000}`
	alert := func(card, from, to string, gap, ts int64) string {
		return fmt.Sprintf(`{"card":%q,"from":%q,"to":%q,"gap_ms":%d,"ts":%d}`, card, from, to, gap, ts)
	}
	tests := []struct {
		name   string
		steps  []ccStep
		alerts []string
		state  map[string]int64 // card: time of the stored transaction
		timers []int64
	}{
		{"within the window", []ccStep{txn("A", `"DE"`, 0), txn("A", `"FR"`, 500)},
			[]string{alert("A", "DE", "FR", 500, 500)}, map[string]int64{"A": 500}, []int64{1500}},
		{"the window is inclusive", []ccStep{txn("A", `"DE"`, 0), txn("A", `"FR"`, 1000)},
			[]string{alert("A", "DE", "FR", 1000, 1000)}, map[string]int64{"A": 1000}, []int64{2000}},
		{"beyond the window", []ccStep{txn("A", `"DE"`, 0), txn("A", `"FR"`, 1001)},
			nil, map[string]int64{"A": 1001}, []int64{2001}},
		{"same country", []ccStep{txn("A", `"DE"`, 0), txn("A", `"D\u0045"`, 10)},
			nil, map[string]int64{"A": 10}, []int64{1010}},
		{"cards are independent", []ccStep{txn("A", `"DE"`, 0), txn("B", `"FR"`, 10)},
			nil, map[string]int64{"A": 0, "B": 10}, []int64{1000, 1010}},
		{"the timer clears the state", []ccStep{txn("A", `"DE"`, 0), watermark(999), txn("B", `"NL"`, 1), watermark(1000), txn("A", `"FR"`, 1000)},
			nil, map[string]int64{"A": 1000, "B": 1}, []int64{1001, 2000}},
		{"a newer transaction moves the timer", []ccStep{txn("A", `"DE"`, 0), txn("A", `"DE"`, 600), watermark(1000), txn("A", `"FR"`, 1500)},
			[]string{alert("A", "DE", "FR", 900, 1500)}, map[string]int64{"A": 1500}, []int64{2500}},
		{"out of order compares but keeps the newer", []ccStep{txn("A", `"DE"`, 1000), txn("A", `"FR"`, 400)},
			[]string{alert("A", "FR", "DE", 600, 400)}, map[string]int64{"A": 1000}, []int64{2000}},
		{"timers fire in order", []ccStep{txn("C", `"DE"`, 30), txn("A", `"DE"`, 10), txn("B", `"DE"`, 20), txn("A", `"DE"`, 40), watermark(1035)},
			nil, map[string]int64{"A": 40}, []int64{1040}},
		{"everything expires", []ccStep{txn("A", `"DE"`, 0), txn("B", `"FR"`, 5), watermark(math.MaxInt64)},
			nil, map[string]int64{}, nil},
	}
	for _, tc := range tests {
		for _, lang := range modules {
			t.Run(lang+"/"+tc.name, func(t *testing.T) {
				g := newGuest(t, "country-change-"+lang)
				native := newNativeDetector(t, config)
				if err := g.open([]byte(config)); err != nil {
					t.Fatal(err)
				}
				for i, s := range tc.steps {
					if s.watermark {
						if err := g.advanceWatermark(s.ts); err != nil {
							t.Fatal(err)
						}
						native.advance(s.ts)
					} else {
						batch := []abi.Record{{Key: []byte(s.card), Value: []byte(txnValue(s.card, s.country, 1, s.ts)), Timestamp: s.ts}}
						if err := g.process(batch); err != nil {
							t.Fatal(err)
						}
						native.process(batch)
					}
					native.checkSame(t, g, fmt.Sprintf("step %d", i))
				}
				var alerts []string
				for _, r := range g.calls.records {
					alerts = append(alerts, string(r.Value))
				}
				if !slices.Equal(alerts, tc.alerts) {
					t.Errorf("alerts\n %q\nwant\n %q", alerts, tc.alerts)
				}
				state := map[string]int64{}
				for card, b := range g.calls.keyed.ValuesOf(detector.StateName) {
					last, _ := detector.DecodeLast(b)
					state[card] = last.Ts
				}
				if !maps.Equal(state, tc.state) {
					t.Errorf("state %v, want %v", state, tc.state)
				}
				var timers []int64
				for _, tm := range g.calls.keyed.PendingTimers() {
					timers = append(timers, tm.Time)
				}
				if !slices.Equal(timers, tc.timers) {
					t.Errorf("timers %v, want %v", timers, tc.timers)
				}
				for i := 1; i < len(g.calls.fired); i++ {
					a, b := g.calls.fired[i-1], g.calls.fired[i]
					if a.Time > b.Time {
						t.Errorf("timers fired out of order: %v before %v", a, b)
					}
				}
			})
		}
	}
}

// TestKeyedFailures checks the stateful operators' configuration errors
// against the native ones, and that a timer batch the SDKs cannot read
// fails the call.
func TestKeyedFailures(t *testing.T) {
	configs := map[string]struct {
		parse func([]byte) error
		list  []string
	}{
		"counter": {counting.Parse, []string{`nope`, `[]`, `{"window_ms": 1}`, `{`, `{"a": }`}},
		"country-change": {func(b []byte) error { _, err := detector.Parse(b); return err }, []string{
			`nope`, `[]`, `{`, `{"window_ms": 0}`, `{"window_ms": -5}`, `{"window_ms": 1.5}`, `{"window_ms": "5"}`,
			`{"window_ms": 1e300}`, `{"window_ms": 9007199254740994}`, `{"window": 5}`, `{"window_ms": 1, "window_ms": 2}`,
		}},
	}
	for udf, c := range configs {
		for _, config := range c.list {
			want := c.parse([]byte(config))
			if want == nil {
				t.Fatalf("%s: native Parse accepts %s", udf, config)
			}
			for _, lang := range modules {
				g := newGuest(t, udf+"-"+lang)
				err := g.open([]byte(config))
				if err == nil || !strings.HasSuffix(err.Error(), ": "+want.Error()) {
					t.Errorf("%s-%s: open(%s) = %v, want the message %q", udf, lang, config, err, want)
				}
			}
		}
	}
	for _, lang := range modules {
		t.Run(lang, func(t *testing.T) {
			g := newGuest(t, "country-change-"+lang)
			if err := g.open([]byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			for _, value := range [][]byte{{2}, {}, {0, 0}} {
				recs := []abi.Record{{Key: []byte("A"), Value: value, Timestamp: 5}}
				batch := abi.AppendBatch(nil, recs)
				ptr := g.write(batch)
				end := g.calls.keyed.Batch(recs)
				err := g.status(abi.ExportOnTimer, g.call(abi.ExportOnTimer, uint64(ptr), uint64(len(batch))))
				end()
				if err == nil || !strings.Contains(err.Error(), "timer batch") {
					t.Errorf("timer value %v: %v", value, err)
				}
			}
			err := g.status(abi.ExportOnTimer, g.call(abi.ExportOnTimer, 8, 64))
			if err == nil || !strings.Contains(err.Error(), "not inside the buffer") {
				t.Errorf("timer batch outside the input buffer: %v", err)
			}
		})
	}
}

// FuzzCountryChange feeds arbitrary transactions and watermarks to both
// country-change modules and the native driver, which must agree on the
// alerts, the state and the timers. The seeds run with plain go test.
func FuzzCountryChange(f *testing.F) {
	const config = `{"window_ms": 60000}`
	rng := rand.New(rand.NewPCG(19, 20))
	wm := int64(1767225600000)
	for _, r := range genTransactions(rng, 60, 60000) {
		wm += rng.Int64N(40000)
		f.Add(r.Key, r.Value, r.Timestamp, wm)
	}
	native := newNativeDetector(f, config)
	var guests []*guest
	for _, lang := range modules {
		// Long-lived instances: instantiating a Go guest per input would
		// dominate the fuzzing time.
		g := newGuest(f, "country-change-"+lang)
		if err := g.open([]byte(config)); err != nil {
			f.Fatal(err)
		}
		guests = append(guests, g)
	}
	watermark := int64(math.MinInt64)
	f.Fuzz(func(t *testing.T, key, value []byte, ts, wm int64) {
		recs := []abi.Record{{Key: key, Value: value, Timestamp: ts}}
		before := len(native.out)
		native.process(recs)
		advance := wm > watermark
		if advance {
			watermark = wm
			native.advance(wm)
		}
		for _, g := range guests {
			g.t = t
			g.calls.records, g.calls.batches = nil, nil
			if err := g.process(recs); err != nil {
				t.Fatal(err)
			}
			if advance {
				if err := g.advanceWatermark(wm); err != nil {
					t.Fatal(err)
				}
			}
			equalRecords(t, recs, g.calls.records, native.out[before:])
			native.checkSame(t, g, "after the input")
		}
	})
}

// BenchmarkCounter runs the counter natively, its counts in a map as the
// test host keeps state, and as each module over the same batch of 256
// records of 16 keys, reporting ns per input record. The guest figures
// include the boundary and the state imports (one get and one put per
// record), which is what a keyed operator costs in a guest.
func BenchmarkCounter(b *testing.B) {
	recs := make([]abi.Record, 256)
	for i := range recs {
		recs[i] = abi.Record{Key: []byte(fmt.Sprintf("card-%02d", i%16)), Value: []byte(`{}`), Timestamp: int64(i)}
	}
	b.Run("native", func(b *testing.B) {
		counts := map[string][]byte{}
		var out []byte
		for b.Loop() {
			for _, r := range recs {
				stored, ok := counts[string(r.Key)]
				c, err := counting.Decode(stored, ok)
				if err != nil {
					b.Fatal(err)
				}
				counts[string(r.Key)] = counting.Append(stored[:0], c+1)
				out = counting.AppendJSON(out[:0], r.Key, c+1)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
	for _, lang := range modules {
		b.Run(lang, func(b *testing.B) {
			g := newGuest(b, "counter-"+lang)
			g.calls.discard = true
			if err := g.open([]byte(`{}`)); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := g.process(recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
		})
	}
}
