// Package seeded is the random streams and clamped event-time arithmetic
// of the generator sources: every record draws from a stream seeded by
// (seed, record number) alone, which is what makes a generated record a
// pure function of its number — the same for any parallelism and after
// any restore.
package seeded

import (
	"math"
	"math/bits"
)

// golden is 2⁶⁴/φ, SplitMix64's increment: consecutive record numbers get
// well separated streams.
const golden = 0x9e3779b97f4a7c15

// Rand is SplitMix64: tiny, fast and good enough for test data, and
// trivially seekable. Not safe for concurrent use.
type Rand struct{ state uint64 }

// New is the stream that starts at state.
func New(state uint64) Rand { return Rand{state: state} }

// At is the stream of record n of a generator whose mixed seed is seed.
func At(seed, n uint64) Rand { return Rand{state: Mix64(seed + n*golden)} }

// Next is the next 64 random bits.
func (r *Rand) Next() uint64 {
	r.state += golden
	return Mix64(r.state)
}

// Intn is uniform in [0, n) by Lemire's multiply-shift (its bias is below
// n/2⁶⁴, far below what test data cares about); n must be > 0.
func (r *Rand) Intn(n uint64) uint64 {
	hi, _ := bits.Mul64(r.Next(), n)
	return hi
}

// Float is uniform in [0, 1).
func (r *Rand) Float() float64 { return float64(r.Next()>>11) / (1 << 53) }

// Mix64 is SplitMix64's finaliser: it scatters nearby inputs (seeds,
// record numbers) over unrelated outputs.
func Mix64(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// MulDivClamped is a×b/c without intermediate overflow, clamped to
// MaxInt64: an unbounded generator must not wrap around to negative times.
func MulDivClamped(a, b, c uint64) int64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, c)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// AddClamped is a+b, clamped to MaxInt64 for b > 0.
func AddClamped(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
