package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/localrun"
	"github.com/eddy-stream/eddy/host"
)

func TestParseWindow(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "tumbling 1m", want: "{tumbling: 1m0s}"},
		{in: "sliding 10m 30s", want: "{sliding: {size: 10m0s, slide: 30s}}"},
		{in: "session 30s", want: "{session: {gap: 30s}}"},
		{in: "global 100", want: "{global: {trigger: {count: 100}}}"},
		{in: "", err: "want 'tumbling SIZE'"},
		{in: "tumbling", err: "want 'tumbling SIZE'"},
		{in: "tumbling -1m", err: `"-1m" is not a positive duration`},
		{in: "sliding 1m", err: "want 'tumbling SIZE'"},
		{in: "global x", err: `the count "x" is not a positive integer`},
		{in: "hopping 1m", err: "want 'tumbling SIZE'"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := localrun.ParseWindow(tc.in)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("ParseWindow(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Fatalf("ParseWindow(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func load(t *testing.T, name string) *host.Module {
	t.Helper()
	ctx := context.Background()
	cfg := host.DefaultConfig()
	cfg.CacheDir = ""
	e, err := host.NewEngine(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(ctx) })
	m, err := e.Load(ctx, filepath.Join("..", "..", "udfs", "build", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func txn(card, country string, ts int64) localrun.Event {
	v := fmt.Sprintf(`{"card":%q,"country":%q}`, card, country)
	return localrun.Event{Record: &localrun.Record{Value: []byte(v), Timestamp: ts}}
}

func wm(ts int64) localrun.Event { return localrun.Event{Watermark: &ts} }

// TestWatermarkBetweenRecords: an explicit watermark reaches the module
// exactly between the records around it (stream.WatermarkSource), so the
// event-time timer it fires runs before the record after it.
func TestWatermarkBetweenRecords(t *testing.T) {
	mod := load(t, "country-change-c")
	cfg := localrun.Config{Module: mod, KeyBy: "card", ModuleConfig: json.RawMessage(`{"window_ms":1000}`)}
	for _, tc := range []struct {
		name   string
		events []localrun.Event
		alerts int
	}{
		// The state of c1 is still there: a late FR record alerts.
		{"no watermark", []localrun.Event{txn("c1", "DE", 1000), txn("c1", "FR", 1500)}, 1},
		// The cleanup timer at 2000 fired first: nothing to compare with.
		{"watermark past the timer", []localrun.Event{txn("c1", "DE", 1000), wm(5000), txn("c1", "FR", 1500)}, 0},
		// A watermark before the timer's time fires nothing.
		{"watermark before the timer", []localrun.Event{txn("c1", "DE", 1000), wm(1999), txn("c1", "FR", 1500)}, 1},
		// Watermarks that do not advance change nothing.
		{"watermark going back", []localrun.Event{wm(10), wm(5), txn("c1", "DE", 1000), txn("c1", "FR", 1500)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := localrun.Run(context.Background(), cfg, tc.events)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != tc.alerts {
				t.Fatalf("%d alerts %s, want %d", len(out), values(out), tc.alerts)
			}
		})
	}
}

// TestEventTimeWatermarkPerRecord: with event time from a field, the
// watermark follows each record, so a record behind it is late for its
// window however the input would have been batched.
func TestEventTimeWatermarkPerRecord(t *testing.T) {
	mod := load(t, "card-stats-c")
	var events []localrun.Event
	for _, v := range []string{
		`{"card":"c","amount":1,"country":"DE","ts":1000}`,
		`{"card":"c","amount":2,"country":"DE","ts":61000}`,
		`{"card":"c","amount":4,"country":"DE","ts":2000}`, // late by 59 s
	} {
		events = append(events, localrun.Event{Record: &localrun.Record{Value: []byte(v), Timestamp: abi.NoTimestamp}})
	}
	for _, tc := range []struct {
		ooo   time.Duration
		first string
	}{
		{0, `"n":1,"total":"1.00"`},
		{time.Minute, `"n":2,"total":"5.00"`}, // within the out-of-orderness
	} {
		t.Run(tc.ooo.String(), func(t *testing.T) {
			out, err := localrun.Run(context.Background(), localrun.Config{
				Module: mod, KeyBy: "card", EventTimeField: "ts", MaxOutOfOrderness: tc.ooo, Window: "tumbling 1m",
			}, events)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 2 || !strings.Contains(string(out[0].Value), tc.first) {
				t.Fatalf("output %s, want 2 windows, the first with %s", values(out), tc.first)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	agg := load(t, "card-stats-c")
	op := load(t, "project-c")
	join := load(t, "regular-join-c")
	for _, tc := range []struct {
		name string
		cfg  localrun.Config
		err  string
	}{
		{"no module", localrun.Config{}, "no module"},
		{"window without key", localrun.Config{Module: agg, Window: "tumbling 1m"}, "a window needs a key"},
		{"aggregate without window", localrun.Config{Module: agg, KeyBy: "card"}, "runs only in a window"},
		{"config not an object", localrun.Config{Module: op, ModuleConfig: json.RawMessage(`[1]`)}, "config is not a JSON object"},
		{"negative out-of-orderness", localrun.Config{Module: op, MaxOutOfOrderness: -time.Second}, "negative"},
		{"two-input without a key", localrun.Config{Module: join}, "is a two-input operator: it runs keyed"},
		{"two-input in a window", localrun.Config{Module: join, KeyBy: "card", Window: "tumbling 1m"}, "is a two-input operator: it does not run in a window"},
		{"one-input with two keys", localrun.Config{Module: op, KeyBy: "a", KeyBy2: "b"}, "is a one-input operator: it has one key, not two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := localrun.Run(context.Background(), tc.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Run: %v, want an error with %q", err, tc.err)
			}
		})
	}
}

func values(rs []localrun.Record) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n  %s", r.Value)
	}
	return b.String()
}

// TestTwoInputOrder runs the two-input regular join (Go and C) over a
// script that switches inputs at every event: what it emits depends on
// the order in which it sees the records (each joins what the other
// input had before it) and on the watermark being the lower of the two
// inputs', so the same output on every one of repeated runs, and the
// one the script's order gives, says the harness hands the events over
// in the script's order. An input the module lacks is refused.
func TestTwoInputOrder(t *testing.T) {
	for _, lang := range []string{"c", "go"} {
		t.Run(lang, func(t *testing.T) {
			mod := load(t, "regular-join-"+lang)
			cfg := localrun.Config{Module: mod, KeyBy: jobspec.RecordKey, ModuleConfig: json.RawMessage(`{"report_at":1000}`)}
			rec := func(input int, key, value string) localrun.Event {
				return localrun.Event{Input: input, Record: &localrun.Record{Key: []byte(key), Value: []byte(value), Timestamp: abi.NoTimestamp}}
			}
			wmOf := func(input int, ts int64) localrun.Event { e := wm(ts); e.Input = input; return e }
			var events []localrun.Event
			var want []string
			// Key k<i>: left, right, left, right... A record of input 0
			// joins the right records before it, one of input 1 the left.
			for i := 0; i < 3; i++ {
				key := fmt.Sprintf("k%d", i)
				for j := 0; j < 6; j++ {
					events = append(events, rec(j%2, key, fmt.Sprintf(`{"n":%d}`, j)))
					for o := 1 - j%2; o < j; o += 2 {
						l, r := o, j
						if j%2 == 0 {
							l, r = j, o
						}
						want = append(want, fmt.Sprintf(`%s {"left":{"n":%d},"right":{"n":%d}}`, key, l, r))
					}
				}
				if i == 0 {
					// Input 0 alone past the report time fires nothing;
					// input 1 too fires k0's report, before k1's records.
					events = append(events, wmOf(0, 2000))
					events = append(events, rec(1, "k0", `{"n":6}`))
					want = append(want, `k0 {"left":{"n":0},"right":{"n":6}}`, `k0 {"left":{"n":2},"right":{"n":6}}`, `k0 {"left":{"n":4},"right":{"n":6}}`)
					events = append(events, wmOf(1, 2000))
					want = append(want, `k0 {"key":"k0","left":3,"right":4}`)
				}
			}
			// The end of input fires the other reports (at the same time:
			// in the store's order, by key group, where k2 comes first).
			want = append(want, `k2 {"key":"k2","left":3,"right":3}`, `k1 {"key":"k1","left":3,"right":3}`)
			for run := 0; run < 10; run++ {
				out, err := localrun.Run(context.Background(), cfg, events)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, r := range out {
					got = append(got, string(r.Key)+" "+string(r.Value))
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("run %d emitted\n%s\nwant\n%s", run, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			if _, err := localrun.Run(context.Background(), localrun.Config{Module: load(t, "project-c")}, []localrun.Event{rec(1, "", "{}")}); err == nil || !strings.Contains(err.Error(), "event 1: input 1: module ") || !strings.Contains(err.Error(), "project-c.wasm has one input, 0") {
				t.Fatalf("input 1 of a one-input module: %v", err)
			}
		})
	}
}
