package state

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

func benchBackends(b *testing.B) []struct {
	name string
	open func() Backend
} {
	return []struct {
		name string
		open func() Backend
	}{
		{"memory", func() Backend {
			m, err := NewMemory(DefaultMemoryConfig())
			must(b, err)
			return m
		}},
		{"pebble", func() Backend {
			p, err := OpenPebble(DefaultPebbleConfig(b.TempDir()))
			must(b, err)
			return p
		}},
	}
}

// BenchmarkValueUpdate is the per-record cost of keyed state as a Wasm host
// function sees it: read a counter of a random key among 100k, add one,
// write it back. pebble has its default value cache, which holds all the
// keys; pebble-nocache is Pebble alone, and pebble-smallcache has a cache
// of about a tenth of the keys, so most updates miss and evict.
func BenchmarkValueUpdate(b *testing.B) {
	const keys = 100_000
	pebbleWith := func(cache int64) func() Backend {
		return func() Backend {
			cfg := DefaultPebbleConfig(b.TempDir())
			cfg.ValueCacheBytes = cache
			p, err := OpenPebble(cfg)
			must(b, err)
			return p
		}
	}
	backends := append(benchBackends(b), []struct {
		name string
		open func() Backend
	}{
		{"pebble-nocache", pebbleWith(0)},
		{"pebble-smallcache", pebbleWith(1 << 20)},
	}...)
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			backend := bk.open()
			defer backend.Close()
			s, err := backend.OpenTask(testScope, DefaultMaxParallelism, Range{0, DefaultMaxParallelism})
			must(b, err)
			defer s.Close()
			all := make([][]byte, keys)
			var zero [8]byte
			for i := range all {
				all[i] = []byte("user-" + strconv.Itoa(i))
				must(b, s.ValuePut("count", all[i], nil, zero[:], 0))
			}
			rng := rand.New(rand.NewPCG(1, 2))
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				key := all[rng.IntN(keys)]
				v, _, err := s.ValueGet("count", key, nil, buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				var n uint64
				if len(v) == 8 {
					n = binary.LittleEndian.Uint64(v)
				}
				buf = binary.LittleEndian.AppendUint64(v[:0], n+1)
				if err := s.ValuePut("count", key, nil, buf, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "updates/s")
		})
	}
}

// BenchmarkTimers is the timer work of a tumbling window over 10k keys:
// each record registers its key's end-of-window timer (most already set),
// and at each window end the watermark fires them all. One op is one
// record; there are 10 records per key and window.
func BenchmarkTimers(b *testing.B) {
	const keysPerWindow = 10_000
	for _, bk := range benchBackends(b) {
		b.Run(bk.name, func(b *testing.B) {
			backend := bk.open()
			defer backend.Close()
			s, err := backend.OpenTask(testScope, DefaultMaxParallelism, Range{0, DefaultMaxParallelism})
			must(b, err)
			defer s.Close()
			keys := make([][]byte, keysPerWindow)
			for i := range keys {
				keys[i] = []byte("user-" + strconv.Itoa(i))
			}
			b.ReportAllocs()
			fired := 0
			var popping time.Duration
			for i := 0; b.Loop(); i++ {
				window := int64(i / (10 * keysPerWindow))
				if err := s.TimerRegister(EventTime, keys[i%keysPerWindow], nil, (window+1)*60_000-1); err != nil {
					b.Fatal(err)
				}
				if (i+1)%(10*keysPerWindow) == 0 {
					start := time.Now()
					err := s.PopTimers(EventTime, (window+1)*60_000-1, func(Timer) error { fired++; return nil })
					popping += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			if fired > 0 {
				b.ReportMetric(float64(popping.Nanoseconds())/float64(fired), "ns/fired")
			}
		})
	}
}
