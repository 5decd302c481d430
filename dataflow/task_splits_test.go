package dataflow

import (
	"math"
	"testing"
	"time"
)

func TestSplitClock(t *testing.T) {
	t0 := time.UnixMilli(1_000_000)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type rec struct {
		split int
		ts    int64
	}
	type step struct {
		at      int   // ms after t0
		splits  int   // grow to
		records []rec // produced at `at`
		wm      int64
		allIdle bool
	}
	const none = math.MinInt64
	tests := []struct {
		name  string
		ooo   int64
		idle  time.Duration
		steps []step
	}{
		{name: "lagging split holds the watermark", ooo: 10, steps: []step{
			{at: 0, splits: 2, records: []rec{{0, 1000}}, wm: none},
			{at: 5, records: []rec{{1, 400}}, wm: 389},
			{at: 9, records: []rec{{0, 2000}}, wm: 389},
			{at: 10, records: []rec{{1, 3000}}, wm: 1989},
		}},
		{name: "without idle_timeout a silent split holds forever", steps: []step{
			{at: 0, splits: 2, records: []rec{{0, 1000}}, wm: none},
			{at: 100_000, records: []rec{{0, 5000}}, wm: none},
		}},
		{name: "idle split released", idle: 100 * time.Millisecond, steps: []step{
			{at: 0, splits: 2, records: []rec{{0, 1000}, {1, 500}}, wm: 499},
			{at: 60, records: []rec{{0, 1100}}, wm: 499},
			{at: 99, wm: 499},
			{at: 100, wm: 1099}, // split 1 idle since 0
			{at: 150, records: []rec{{0, 1200}}, wm: 1199},
		}},
		{name: "a split that never produced holds until idle", idle: 100 * time.Millisecond, steps: []step{
			{at: 0, splits: 2, wm: none},
			{at: 50, records: []rec{{0, 1000}}, wm: none},
			{at: 100, wm: 999},
		}},
		{name: "all idle", idle: 100 * time.Millisecond, steps: []step{
			{at: 0, splits: 2, records: []rec{{0, 1000}, {1, 500}}, wm: 499},
			{at: 100, wm: none, allIdle: true},
			{at: 500, wm: none, allIdle: true},
		}},
		{name: "reactivation", idle: 100 * time.Millisecond, steps: []step{
			{at: 0, splits: 2, records: []rec{{0, 1000}, {1, 500}}, wm: 499},
			{at: 200, allIdle: true, wm: none},
			{at: 250, records: []rec{{1, 3000}}, wm: 2999}, // split 0 stays idle
			{at: 260, records: []rec{{0, 1500}}, wm: 1499}, // the task keeps its watermark from going back
		}},
		{name: "a new split starts at the time it is learnt", idle: 100 * time.Millisecond, steps: []step{
			{at: 0, splits: 1, records: []rec{{0, 1000}}, wm: 999},
			{at: 50, splits: 2, records: []rec{{0, 1100}}, wm: none},
			{at: 149, records: []rec{{0, 1200}}, wm: none},
			{at: 150, wm: 1199},
		}},
		{name: "no splits is not idle", idle: 100 * time.Millisecond, steps: []step{
			{at: 1000, wm: none},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newSplitClock(tc.ooo, tc.idle)
			for i, s := range tc.steps {
				now := at(s.at)
				c.grow(s.splits, now)
				for _, r := range s.records {
					c.observe(r.split, r.ts, now)
				}
				wm, allIdle := c.watermark(now)
				if wm != s.wm || allIdle != s.allIdle {
					t.Fatalf("step %d (at %d ms): watermark %d, all idle %v; want %d, %v", i, s.at, wm, allIdle, s.wm, s.allIdle)
				}
			}
		})
	}
}
