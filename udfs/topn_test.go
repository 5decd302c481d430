package udfs_test

// The top-n window function: its Go and C modules, handed whole windows as
// the window operator hands them (record 0 the descriptor, then the
// elements), must emit exactly what package ranking selects.

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/udfs/topn/ranking"
)

// windowBatch is a window function's batch: the descriptor, then elems.
func windowBatch(key []byte, start, end int64, elems []abi.Record) []abi.Record {
	v := binary.LittleEndian.AppendUint64(nil, uint64(start))
	v = binary.LittleEndian.AppendUint64(v, uint64(end))
	return append([]abi.Record{{Key: key, Value: v, Timestamp: end - 1}}, elems...)
}

func nativeTopN(t *testing.T, config string, key []byte, start, end int64, elems []abi.Record) []abi.Record {
	t.Helper()
	c, err := ranking.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	var want []abi.Record
	for rank, i := range ranking.New(c).Top(elems) {
		v := ranking.AppendOutput(nil, key, start, end, rank+1, elems[i].Value)
		want = append(want, abi.Record{Key: key, Value: v, Timestamp: end - 1})
	}
	return want
}

var topNConfigs = []string{
	`{"n": 3, "field": "amount"}`,
	`{}`,
	`{"n": 1}`,
	`{"field": "amount", "n": 50}`,
	`{"n": 10000, "field": "n1"}`,
	`{"field": "\u0061mount", "n": 2.0}`,
	`{"field": "card"}`,
	`{"field": "missing"}`,
}

// genWindowElems makes a window's elements: generated records (numbers at
// the edges of float64, duplicates, non-numbers, malformed values), and
// ties on purpose.
func genWindowElems(rng *rand.Rand, n int) []abi.Record {
	elems := genRecords(rng, n)
	for i := range elems {
		if rng.IntN(4) == 0 {
			elems[i].Value = []byte(fmt.Sprintf(` {"card": "c%d", "amount": %d, "n1": %d}`+"\n", i, rng.IntN(5), rng.IntN(3)))
		}
	}
	return elems
}

func TestTopN(t *testing.T) {
	for ci, config := range topNConfigs {
		for _, lang := range modules {
			t.Run(fmt.Sprintf("%s/config%d", lang, ci), func(t *testing.T) {
				g := newGuest(t, "top-n-"+lang)
				if err := g.open([]byte(config)); err != nil {
					t.Fatal(err)
				}
				total := 0
				// Windows of every size, the empty one too, with keys that
				// need escaping, one after another on the same instance.
				for w, size := range []int{0, 1, 2, 5, 40, 300, 3000, 7} {
					rng := rand.New(rand.NewPCG(uint64(ci), uint64(w)))
					elems := genWindowElems(rng, size)
					key := []byte(pick(rng, []string{"card-0042", `a"b\`, "", "é\n"}))
					start := rng.Int64N(2e12) - 1e12
					end := start + 1 + rng.Int64N(1e6)
					want := nativeTopN(t, config, key, start, end, elems)
					g.calls.records = nil
					if err := g.process(windowBatch(key, start, end, elems)); err != nil {
						t.Fatal(err)
					}
					equalRecords(t, elems, g.calls.records, want)
					total += len(want)
				}
				t.Logf("%d records emitted", total)
				if err := g.close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestTopNPinned pins the ranking on a small window: ties keep the
// window's order, and the output is the documented JSON.
func TestTopNPinned(t *testing.T) {
	values := []string{
		`{"card":"a","amount":12.5}`, `{"card":"b","amount":99}`, `{"card":"c"}`, `  {"card":"d","amount":99}  `,
		`{"card":"e","amount":"100"}`, `{"card":"f","amount":1e2}`, `not json`, `{"card":"g","amount":-1}`,
	}
	var elems []abi.Record
	for i, v := range values {
		elems = append(elems, abi.Record{Key: []byte("k"), Value: []byte(v), Timestamp: int64(i)})
	}
	want := []string{
		`{"key":"k","window_start":0,"window_end":60000,"rank":1,"value":{"card":"f","amount":1e2}}`,
		`{"key":"k","window_start":0,"window_end":60000,"rank":2,"value":{"card":"b","amount":99}}`,
		`{"key":"k","window_start":0,"window_end":60000,"rank":3,"value":{"card":"d","amount":99}}`,
		`{"key":"k","window_start":0,"window_end":60000,"rank":4,"value":{"card":"a","amount":12.5}}`,
	}
	native := nativeTopN(t, `{"n":4}`, []byte("k"), 0, 60000, elems)
	for _, lang := range modules {
		g := newGuest(t, "top-n-"+lang)
		got := g.run([]byte(`{"n":4}`), windowBatch([]byte("k"), 0, 60000, elems), len(elems)+1)
		for _, recs := range [][]abi.Record{got, native} {
			if len(recs) != len(want) {
				t.Fatalf("%s: %d records, want %d", lang, len(recs), len(want))
			}
			for i := range want {
				if string(recs[i].Value) != want[i] || string(recs[i].Key) != "k" || recs[i].Timestamp != 59999 {
					t.Errorf("%s: record %d = %q %s @%d, want %s", lang, i, recs[i].Key, recs[i].Value, recs[i].Timestamp, want[i])
				}
			}
		}
	}
}

// TestWindowSDKs checks config errors and the batches a window function
// refuses: an empty one, and one whose record 0 is not a descriptor.
func TestWindowSDKs(t *testing.T) {
	for _, config := range []string{`nope`, `[]`, `{"n": 0}`, `{"n": 1.5}`, `{"n": 10001}`, `{"n": "3"}`, `{"field": 1}`,
		`{"n": 1, "n": 2}`, `{"x": 1}`, `{"n": 1,`, `{"field": "a"} x`} {
		_, want := ranking.Parse([]byte(config))
		if want == nil {
			t.Fatalf("ranking.Parse accepts %s", config)
		}
		for _, lang := range modules {
			g := newGuest(t, "top-n-"+lang)
			if err := g.open([]byte(config)); err == nil || !strings.HasSuffix(err.Error(), ": "+want.Error()) {
				t.Errorf("%s: open(%s) = %v, want %q", lang, config, err, want)
			}
		}
	}
	for _, lang := range modules {
		g := newGuest(t, "top-n-"+lang)
		if err := g.open([]byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if err := g.process(nil); err == nil || !strings.Contains(err.Error(), "window: an empty batch") {
			t.Errorf("%s: empty batch: %v", lang, err)
		}
		err := g.process([]abi.Record{{Key: []byte("k"), Value: []byte(`{"amount":1}`)}})
		if want := "window: record 0 is not a window descriptor: its value has 12 bytes, want 16"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: no descriptor: %v, want %q", lang, err, want)
		}
		if len(g.calls.records) != 0 {
			t.Errorf("%s: failed calls emitted %d records", lang, len(g.calls.records))
		}
	}
}

// FuzzTopN hands arbitrary elements (the lines of the input) to the Go and
// C modules, which must emit exactly what package ranking selects.
func FuzzTopN(f *testing.F) {
	for _, r := range genWindowElems(rand.New(rand.NewPCG(9, 9)), 30) {
		f.Add(uint8(len(r.Value)), append(append([]byte(nil), r.Value...), "\n{\"amount\": 1}"...))
	}
	type target struct {
		config string
		guests []*guest
	}
	var targets []*target
	for _, config := range topNConfigs {
		tg := &target{config: config}
		for _, lang := range modules {
			g := newGuest(f, "top-n-"+lang)
			if err := g.open([]byte(config)); err != nil {
				f.Fatal(err)
			}
			tg.guests = append(tg.guests, g)
		}
		targets = append(targets, tg)
	}
	f.Fuzz(func(t *testing.T, which uint8, lines []byte) {
		tg := targets[int(which)%len(targets)]
		var elems []abi.Record
		for i, line := range strings.Split(string(lines), "\n") {
			elems = append(elems, abi.Record{Key: []byte("k"), Value: []byte(line), Timestamp: int64(i)})
		}
		want := nativeTopN(t, tg.config, []byte("key"), 0, 10, elems)
		for _, g := range tg.guests {
			g.t = t
			g.calls.records, g.calls.batches = nil, nil
			if err := g.process(windowBatch([]byte("key"), 0, 10, elems)); err != nil {
				t.Fatal(err)
			}
			equalRecords(t, elems, g.calls.records, want)
		}
	})
}
