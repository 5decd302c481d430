package state

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/storage"
)

// benchStateBytes is the keyed state of the snapshot benchmarks: 100 MB,
// or EDDY_BENCH_STATE_MB (say 1024 for the 1 GB figure).
func benchStateBytes(b *testing.B) int {
	mb := 100
	if s := os.Getenv("EDDY_BENCH_STATE_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("EDDY_BENCH_STATE_MB=%q: want a positive number", s)
		}
		mb = n
	}
	return mb << 20
}

const benchValueSize = 1 << 10

// benchState opens a task owning every key group on a fresh backend of the
// given kind and fills it with random 1 KiB values (incompressible, so
// file sizes are state sizes). It returns the store and a function that
// rewrites a fraction of the keys, as a stream of updates between two
// checkpoints would.
func benchState(b *testing.B, kind string, size int) (Store, func(fraction float64)) {
	var backend Backend
	var err error
	switch kind {
	case "memory":
		backend, err = NewMemory(DefaultMemoryConfig())
	default:
		backend, err = OpenPebble(DefaultPebbleConfig(b.TempDir()))
	}
	must(b, err)
	b.Cleanup(func() { backend.Close() })
	s, err := backend.OpenTask(testScope, DefaultMaxParallelism, Range{0, DefaultMaxParallelism})
	must(b, err)
	b.Cleanup(func() { s.Close() })
	keys := size / benchValueSize
	src := rand.NewChaCha8([32]byte{7})
	rng := rand.New(src)
	val := make([]byte, benchValueSize)
	put := func(i int) {
		_, _ = src.Read(val)
		must(b, s.ValuePut("v", []byte("key-"+strconv.Itoa(i)), nil, val, 0))
	}
	for i := range keys {
		put(i)
	}
	return s, func(fraction float64) {
		for range int(float64(keys) * fraction) {
			put(rng.IntN(keys))
		}
	}
}

func benchBlobs(b *testing.B) storage.Store {
	st, err := storage.Open(context.Background(), "file://"+b.TempDir(), storage.Config{})
	must(b, err)
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkSnapshot is the cost of one checkpoint of a task's 100 MB state
// to file:// storage after 1% of its keys changed: the duration (ns/op),
// of which the synchronous capture (capture-ms/op) is what holds up the
// task when the upload runs asynchronously, the bytes uploaded
// (upload-MB/op) and the bytes referenced (state-MB).
//
//   - memory/full: the memory backend writes all of it each time.
//   - pebble/full: a Pebble snapshot into an empty prefix (nothing to
//     share), as a first checkpoint is.
//   - pebble/incremental: the next checkpoints, sharing the unchanged
//     table files with the previous ones.
func BenchmarkSnapshot(b *testing.B) {
	size := benchStateBytes(b)
	cases := []struct {
		name, backend string
		freshPrefix   bool
	}{
		{"memory/full", "memory", false},
		{"pebble/full", "pebble", true},
		{"pebble/incremental", "pebble", false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s, change := benchState(b, tc.backend, size)
			blobs := benchBlobs(b)
			prefix := testPrefix
			m, err := SnapshotTo(context.Background(), s, blobs, prefix) // the first one: not timed
			must(b, err)
			var uploaded, referenced int64
			var snapshots int
			var capturing time.Duration
			for b.Loop() {
				b.StopTimer()
				change(0.01)
				if tc.freshPrefix {
					prefix = testPrefix + "-" + strconv.Itoa(snapshots)
				}
				b.StartTimer()
				start := time.Now()
				c, err := CaptureSnapshot(context.Background(), s)
				if err != nil {
					b.Fatal(err)
				}
				capturing += time.Since(start)
				if m, err = c.Upload(context.Background(), blobs, prefix); err != nil {
					b.Fatal(err)
				}
				uploaded += m.IncrementalSize
				referenced += m.FullSize
				snapshots++
			}
			b.ReportMetric(float64(uploaded)/float64(snapshots)/(1<<20), "upload-MB/op")
			b.ReportMetric(capturing.Seconds()*1000/float64(snapshots), "capture-ms/op")
			b.ReportMetric(float64(referenced)/float64(snapshots)/(1<<20), "state-MB")
			b.ReportMetric(float64(referenced)/(1<<20)/b.Elapsed().Seconds(), "MB/s")
		})
	}
}

// BenchmarkRestore is the recovery of a task's 100 MB state from file://
// storage into an empty Store of the same backend: download, check, and
// load.
func BenchmarkRestore(b *testing.B) {
	size := benchStateBytes(b)
	for _, kind := range []string{"memory", "pebble"} {
		b.Run(kind, func(b *testing.B) {
			s, _ := benchState(b, kind, size)
			blobs := benchBlobs(b)
			m, err := SnapshotTo(context.Background(), s, blobs, testPrefix)
			must(b, err)
			must(b, s.Close())
			restores := 0
			for b.Loop() {
				b.StopTimer()
				var backend Backend
				if kind == "memory" {
					backend, err = NewMemory(DefaultMemoryConfig())
				} else {
					backend, err = OpenPebble(DefaultPebbleConfig(b.TempDir()))
				}
				must(b, err)
				fresh, err := backend.OpenTask(testScope, DefaultMaxParallelism, Range{0, DefaultMaxParallelism})
				must(b, err)
				b.StartTimer()
				if err := RestoreFrom(context.Background(), fresh, blobs, testPrefix, []SnapshotManifest{m}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				must(b, fresh.Close())
				must(b, backend.Close())
				restores++
				b.StartTimer()
			}
			b.ReportMetric(float64(m.FullSize)/(1<<20), "state-MB")
			b.ReportMetric(float64(m.FullSize)/(1<<20)/(b.Elapsed().Seconds()/float64(restores)), "MB/s")
		})
	}
}
