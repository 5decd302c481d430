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
