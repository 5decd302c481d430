package connectors

import (
	"context"
	"math"
	"time"

	"github.com/eddy-stream/eddy/connectors/internal/seeded"
)

// pacer limits a source to a rate with a token bucket. It hands out tokens
// a batch at a time: a source sleeps at most once per Next call, never once
// per record, so pacing costs nothing measurable at high rates.
//
// Not safe for concurrent use: one pacer per subtask.
type pacer struct {
	rate float64 // records per second; 0 means unpaced
	// burst caps the bucket, so that a source held back by backpressure
	// does not catch up with a flood afterwards.
	burst float64
	// chunk is the fewest tokens worth waking up for: enough that a batch
	// is not a single record at high rates, few enough that low rates
	// still deliver records promptly.
	chunk  float64
	tokens float64
	last   time.Time

	// now and sleep are the clock; tests replace them with a fake one.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

const (
	pacerBurst = 100 * time.Millisecond // of records at the rate
	pacerChunk = 10 * time.Millisecond
	// pacerMinSleep stops the loop in take from spinning on rounding
	// errors when the bucket is a hair short of what it needs.
	pacerMinSleep = 50 * time.Microsecond
)

func newPacer(rate float64) *pacer {
	p := &pacer{rate: rate, now: time.Now, sleep: sleepCtx}
	if rate > 0 {
		p.burst = max(1, rate*pacerBurst.Seconds())
		p.chunk = min(p.burst, max(1, rate*pacerChunk.Seconds()))
	}
	return p
}

// take returns how many of want records may be produced now, between 1 and
// want, waiting for tokens if the bucket holds too few. It returns ctx's
// error if ctx is done while waiting.
func (p *pacer) take(ctx context.Context, want int) (int, error) {
	if p.rate == 0 || want <= 0 {
		return want, nil
	}
	if p.last.IsZero() {
		// Start with one chunk so that the first records come at once.
		p.last = p.now()
		p.tokens = p.chunk
	}
	need := min(float64(want), p.chunk)
	for {
		now := p.now()
		p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
		p.last = now
		if p.tokens >= need {
			break
		}
		// Capped so that a tiny rate cannot overflow a Duration; the loop
		// simply sleeps again.
		secs := min((need-p.tokens)/p.rate, time.Hour.Seconds())
		d := time.Duration(secs * float64(time.Second))
		if err := p.sleep(ctx, max(d, pacerMinSleep)); err != nil {
			return 0, err
		}
	}
	n := int(min(float64(want), p.tokens))
	p.tokens -= float64(n)
	return n, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// schedule paces a source by its records' event times instead of a rate
// (a generator's realtime): record n is due on the wall clock at start +
// n×interval, its event time before disorder, and is not produced
// earlier. Unlike the pacer it keeps no bucket: a source held back
// catches up on everything that fell due meanwhile, as a backlog in a
// log would be read, so a record's event time stays its due time and a
// pipeline that falls behind shows as latency rather than as event time
// drifting from the wall clock. This is how Nexmark's generator paces.
//
// Not safe for concurrent use: one schedule per subtask.
type schedule struct {
	startNs    int64  // wall time of record 0, Unix ns
	intervalNs uint64 // between consecutive record numbers
	step       uint64 // this subtask produces every step-th record
	chunk      uint64 // fewest due records worth waking up for

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

func newSchedule(startMs int64, intervalNs, step uint64) *schedule {
	perChunk := uint64(pacerChunk) / max(1, intervalNs*step)
	return &schedule{startNs: startMs * int64(time.Millisecond), intervalNs: max(1, intervalNs), step: max(1, step),
		chunk: max(1, perChunk), now: time.Now, sleep: sleepCtx}
}

// dueAt is when record n falls due, in Unix ns (clamped far in the
// future rather than overflowing).
func (s *schedule) dueAt(n uint64) int64 {
	off := seeded.MulDivClamped(n, s.intervalNs, 1)
	if off > math.MaxInt64-max(s.startNs, 0) {
		return math.MaxInt64
	}
	return s.startNs + off
}

// take returns how many of want records, numbered next, next+step, …,
// may be produced now: between 1 and want, all of them due. It waits
// until at least min(want, chunk) are due, and returns ctx's error if
// ctx is done while waiting.
func (s *schedule) take(ctx context.Context, next uint64, want int) (int, error) {
	if want <= 0 {
		return want, nil
	}
	need := min(uint64(want), s.chunk)
	for {
		now := s.now().UnixNano()
		if at := s.dueAt(next + (need-1)*s.step); at > now {
			// Capped so that a start far ahead cannot overflow a
			// Duration; the loop simply sleeps again.
			d := min(time.Duration(at-now), time.Hour)
			if err := s.sleep(ctx, max(d, pacerMinSleep)); err != nil {
				return 0, err
			}
			continue
		}
		// Records next … last are due; last is the newest due record of
		// this subtask.
		last := uint64(now-s.startNs) / s.intervalNs
		due := (last-next)/s.step + 1
		return int(min(uint64(want), due)), nil
	}
}
