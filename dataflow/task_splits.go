package dataflow

import (
	"math"
	"time"
)

// splitClock is the event time of a source subtask that reads several
// splits (SplitSource), as Flink keeps it per split: each split has its
// own largest timestamp, and the subtask's watermark is the lowest over
// the splits that are not idle. It does no I/O and reads no clock: the
// task hands it the time.
type splitClock struct {
	ooo  int64         // max_out_of_orderness, ms
	idle time.Duration // idle_timeout; 0: splits never go idle
	// maxTs is the largest timestamp of each split, math.MinInt64 before
	// its first record; last is when it last produced (when the clock
	// learned of it, before that).
	maxTs []int64
	last  []time.Time
}

func newSplitClock(ooo int64, idle time.Duration) *splitClock {
	return &splitClock{ooo: ooo, idle: idle}
}

// splits is the number of splits the clock knows.
func (c *splitClock) splits() int { return len(c.maxTs) }

// grow makes the clock know n splits; new ones start at now, without
// records.
func (c *splitClock) grow(n int, now time.Time) {
	for len(c.maxTs) < n {
		c.maxTs = append(c.maxTs, math.MinInt64)
		c.last = append(c.last, now)
	}
}

// observe records that split s produced a record of event time ts at now.
func (c *splitClock) observe(s int, ts int64, now time.Time) {
	c.maxTs[s] = max(c.maxTs[s], ts)
	c.last[s] = now
}

// watermark returns, at now, the lowest watermark of the splits that are
// not idle — math.MinInt64 while one of them has no record yet — or
// allIdle when every split is idle (and there is at least one). The
// caller keeps the task's watermark from going backwards.
func (c *splitClock) watermark(now time.Time) (wm int64, allIdle bool) {
	wm, active := int64(math.MaxInt64), false
	for s, ts := range c.maxTs {
		if c.idle > 0 && now.Sub(c.last[s]) >= c.idle {
			continue
		}
		active = true
		if ts == math.MinInt64 {
			wm = math.MinInt64
			continue
		}
		wm = min(wm, ts-c.ooo-1)
	}
	if !active {
		return math.MinInt64, len(c.maxTs) > 0
	}
	return wm, false
}
