package dataflow_test

import (
	"context"
	"math"
	"testing"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// TestTaskStatsMetrics: the per-task values the workers' metrics export —
// bytes, idle and busy time, input watermark, late records dropped, source
// pending records — after a bounded job with late records ran.
func TestTaskStatsMetrics(t *testing.T) {
	spec := parse(t, `name: metered
nodes:
  - name: src
    source: {generator: {kind: transactions, count: 3000, cards: 20, seed: 1, disorder: 2s, late_fraction: 0.2, interval: 10ms}}
    event_time: {max_out_of_orderness: 1s}
  - name: per_card
    input: src
    key_by: card
    window: {tumbling: 1s}
    aggregate: [count]
  - name: out
    input: per_card
    sink: {discard: {}}
`)
	b := openBackend(t, "memory")
	job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{
		Connectors:     connectors.Registry{},
		Engine:         newEngine(t, host.DefaultConfig()),
		StateBackends:  func(string) (state.Backend, error) { return b, nil },
		WindowOperator: window.New,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	stats := map[string]dataflow.TaskStat{}
	for _, s := range job.TaskStats() {
		stats[s.Node] = s
	}
	src, win := stats["src"], stats["per_card"]
	if src.RecordsIn != 3000 || src.BytesIn <= 3000 || src.BytesOut != src.BytesIn || src.Subtask != 0 {
		t.Errorf("source: %d records, %d bytes in, %d out, subtask %d", src.RecordsIn, src.BytesIn, src.BytesOut, src.Subtask)
	}
	if src.PendingRecords != 0 {
		t.Errorf("source pending %d at its end, want 0", src.PendingRecords)
	}
	if src.Idle != 0 || src.InputWatermark != src.Watermark {
		t.Errorf("source: idle %s, input watermark %d, watermark %d", src.Idle, src.InputWatermark, src.Watermark)
	}
	if win.RecordsIn != 3000 || win.BytesIn != src.BytesOut {
		t.Errorf("window: %d records, %d bytes in; the source sent %d bytes", win.RecordsIn, win.BytesIn, src.BytesOut)
	}
	if win.LateDropped == 0 || win.LateDropped >= 3000 {
		t.Errorf("window dropped %d late records, want some of 3000", win.LateDropped)
	}
	if win.InputWatermark != math.MaxInt64 {
		t.Errorf("window input watermark %d after the end, want +inf", win.InputWatermark)
	}
	if win.Idle <= 0 || win.Busy <= 0 {
		t.Errorf("window idle %s busy %s, want both > 0", win.Idle, win.Busy)
	}
}
