package connectors

import (
	"context"
	"time"
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
