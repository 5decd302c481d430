package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"

	"github.com/eddy-stream/eddy/storage"
	"github.com/eddy-stream/eddy/storage/s3test"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

const testPrefix = "tenants/default/jobs/job"

// blobKind is a kind of checkpoint storage: file:// or s3:// on a
// versitygw server the test starts.
type blobKind struct {
	name string
	open func(t *testing.T) storage.Store
}

var bucketSeq atomic.Int32

// blobKinds returns file:// and, unless EDDY_SKIP_S3=1, s3://. The S3
// server starts once per top-level test, on first use; each store gets a
// bucket of its own.
func blobKinds(top *testing.T) []blobKind {
	var (
		once sync.Once
		srv  *s3test.Server
	)
	kinds := []blobKind{{"file", func(t *testing.T) storage.Store {
		st, err := storage.Open(t.Context(), "file://"+t.TempDir(), storage.Config{})
		must(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}}}
	if os.Getenv("EDDY_SKIP_S3") == "1" {
		return kinds
	}
	return append(kinds, blobKind{"s3", func(t *testing.T) storage.Store {
		once.Do(func() { srv = s3test.Start(top) })
		cfg := storage.DefaultConfig()
		cfg.Endpoint, cfg.UseTLS = srv.Endpoint, false
		cfg.AccessKey, cfg.SecretKey = srv.AccessKey, srv.SecretKey
		cfg.CreateBucket = true
		bucket := fmt.Sprintf("state-%03d", bucketSeq.Add(1))
		st, err := storage.Open(t.Context(), "s3://"+bucket+"/checkpoints", cfg)
		must(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}})
}

func backendNamed(name string) backendKind {
	for _, bk := range backendKinds {
		if bk.name == name {
			return bk
		}
	}
	panic(name)
}

func snapshotTo(t testing.TB, s Store, blobs storage.Store) SnapshotManifest {
	t.Helper()
	m, err := SnapshotTo(context.Background(), s, blobs, testPrefix)
	must(t, err)
	return m
}

func restoreFromAll(t testing.TB, s Store, blobs storage.Store, ms ...SnapshotManifest) {
	t.Helper()
	must(t, RestoreFrom(context.Background(), s, blobs, testPrefix, ms))
}

// flat renders a snapshot for comparison.
func flat(snap [][2][]byte) []string {
	out := make([]string, len(snap))
	for i, e := range snap {
		out[i] = fmt.Sprintf("%x=%x", e[0], e[1])
	}
	return out
}

// versionedSchema is the schema version fillMixed writes key i's
// "versioned" value with.
func versionedSchema(i int) uint32 { return []uint32{0, 1, math.MaxUint32}[i%3] }

// fillMixed writes every kind of entry, with and without TTL, for n keys
// of the store's groups.
func fillMixed(t testing.TB, s Store, groups Range, n int) {
	t.Helper()
	for i := range n {
		k := keyInGroups(groups, i)
		ns := []byte("w" + strconv.Itoa(i%3))
		must(t, s.ValuePut("count", k, nil, []byte("v"+strconv.Itoa(i)), 0))
		must(t, s.ValuePut("short", k, nil, []byte("gone soon"), 10*time.Second))
		must(t, s.ValuePut("long", k, nil, []byte("stays"), time.Hour))
		// Schema versions 0, 1 and 2^32-1, with and without TTL.
		must(t, s.ValuePutSchema("versioned", k, nil, []byte("s"+strconv.Itoa(i)), time.Duration(i%2)*time.Hour, versionedSchema(i)))
		must(t, s.ListAppend("events", k, ns, []byte("a"), 0))
		must(t, s.ListAppend("events", k, ns, []byte("b"), 10*time.Second))
		must(t, s.ListAppend("events", k, ns, []byte("c"), time.Hour))
		must(t, s.MapPut("seen", k, nil, []byte("x"), []byte("1"), 0))
		must(t, s.MapPut("seen", k, nil, []byte("y"), []byte("2"), 10*time.Second))
		must(t, s.TimerRegister(EventTime, k, ns, int64(1000+i)))
		must(t, s.TimerRegister(ProcessingTime, k, nil, int64(5000+i)))
		if i%5 == 0 {
			must(t, s.ValueDelete("count", k, nil))
			must(t, s.TimerDelete(EventTime, k, ns, int64(1000+i)))
		}
	}
}

// TestSnapshotRoundTrip: state written by each backend restores into each
// backend, on each storage: values, lists, maps and timers survive, and TTL
// keeps running on the restored state.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, blobs := range blobKinds(t) {
		for _, src := range backendKinds {
			for _, dst := range backendKinds {
				t.Run(blobs.name+"/"+src.name+"-to-"+dst.name, func(t *testing.T) {
					bs := blobs.open(t)
					clock := newFakeClock()
					all := Range{0, testMaxP}
					orig, err := src.open(t, clock.now).OpenTask(testScope, testMaxP, all)
					must(t, err)
					defer orig.Close()
					fillMixed(t, orig, all, 40)
					must(t, orig.ValuePut("expired", []byte("k"), nil, []byte("x"), time.Second))
					clock.advance(2 * time.Second)

					m := snapshotTo(t, orig, bs)
					clock.advance(time.Minute) // "short" values and elements expire

					restored, err := dst.open(t, clock.now).OpenTask(Scope{"other", "job-2", "op"}, testMaxP, all)
					must(t, err)
					defer restored.Close()
					restoreFromAll(t, restored, bs, m)

					equal(t, "restored snapshot", flat(snapshot(t, restored)), flat(snapshot(t, orig)))
					k := keyInGroups(all, 1)
					if _, ok := getValue(t, restored, "short", string(k), ""); ok {
						t.Error("a value past its TTL survived the restore")
					}
					if _, ok := getValue(t, restored, "expired", "k", ""); ok {
						t.Error("a value expired before the snapshot was restored")
					}
					if v, ok := getValue(t, restored, "long", string(k), ""); !ok || v != "stays" {
						t.Errorf("long-lived value = %q, %v", v, ok)
					}
					for i := range 3 {
						k := keyInGroups(all, i)
						v, schema, ok, err := restored.ValueGetSchema("versioned", k, nil, nil)
						must(t, err)
						if want := "s" + strconv.Itoa(i); !ok || string(v) != want || schema != versionedSchema(i) {
							t.Errorf("versioned value %d = %q, schema %d, %v; want %q, schema %d", i, v, schema, ok, want, versionedSchema(i))
						}
					}
					equal(t, "list", getList(t, restored, "events", string(k), "w1"), []string{"a", "c"})
					equal(t, "map", getMap(t, restored, "seen", string(k), ""), []string{"x=1"})
					for _, kind := range []TimerKind{EventTime, ProcessingTime} {
						equal(t, kind.String()+" timers", popAll(t, restored, kind, 1<<40), popAll(t, orig, kind, 1<<40))
					}
					if n := len(popAll(t, restored, EventTime, 1<<40)); n != 0 {
						t.Errorf("%d timers fired twice", n)
					}
				})
			}
		}
	}
}

// TestRescale: the snapshots of p old tasks restore into q new tasks of
// other key-group ranges; each gets exactly the entries of its groups.
func TestRescale(t *testing.T) {
	cases := []struct{ src, dst string }{
		{"memory", "memory"}, {"pebble", "pebble"}, {"memory", "pebble"}, {"pebble", "memory"},
	}
	blobs := blobKinds(t)[0] // storage does not matter here; TestSnapshotRoundTrip covers both
	for _, tc := range cases {
		for _, par := range [][2]int{{2, 3}, {3, 2}} {
			t.Run(fmt.Sprintf("%s-to-%s/%d-to-%d", tc.src, tc.dst, par[0], par[1]), func(t *testing.T) {
				bs := blobs.open(t)
				clock := newFakeClock()
				old := backendNamed(tc.src).open(t, clock.now)
				var ms []SnapshotManifest
				var everything [][2][]byte
				for i := range par[0] {
					groups := KeyGroupRange(i, par[0], testMaxP)
					s, err := old.OpenTask(testScope, testMaxP, groups)
					must(t, err)
					fillMixed(t, s, groups, 200)
					everything = append(everything, snapshot(t, s)...)
					ms = append(ms, snapshotTo(t, s, bs))
					defer s.Close()
				}
				restoredAll := 0
				fresh := backendNamed(tc.dst).open(t, clock.now)
				for i := range par[1] {
					groups := KeyGroupRange(i, par[1], testMaxP)
					s, err := fresh.OpenTask(testScope, testMaxP, groups)
					must(t, err)
					defer s.Close()
					restoreFromAll(t, s, bs, ms...)
					var want []string
					for _, e := range everything {
						if groups.Contains(int(e[0][0])<<8 | int(e[0][1])) {
							want = append(want, fmt.Sprintf("%x=%x", e[0], e[1]))
						}
					}
					got := flat(snapshot(t, s))
					slices.Sort(want)
					equal(t, fmt.Sprintf("entries of new task %d %s", i, groups), got, want)
					restoredAll += len(got)
				}
				if restoredAll != len(everything) {
					t.Errorf("restored %d entries in all, snapshots held %d", restoredAll, len(everything))
				}
			})
		}
	}
}

// TestPebbleSharedDatabase: the table files of a checkpoint also hold other
// operators' keys, older versions and deletions (point, range, list
// clears); a restore sees exactly the task's state at the snapshot.
func TestPebbleSharedDatabase(t *testing.T) {
	bs := blobKinds(t)[0].open(t)
	clock := newFakeClock()
	b := backendNamed("pebble").open(t, clock.now)
	all := Range{0, testMaxP}
	mine, err := b.OpenTask(testScope, testMaxP, all)
	must(t, err)
	neighbour, err := b.OpenTask(Scope{"other", "job", "op"}, testMaxP, all)
	must(t, err)
	defer neighbour.Close()
	write := func(s Store, tag string) {
		for i := range 100 {
			k := []byte("k" + strconv.Itoa(i))
			must(t, s.ValuePut("v", k, nil, []byte(tag), 0))
			must(t, s.ListAppend("l", k, nil, []byte(tag), 0))
			must(t, s.MapPut("m", k, nil, []byte(tag), []byte(tag), 0))
			for j := range 80 { // more than clearPointLimit: MapClear deletes a range
				must(t, s.MapPut("big", k, nil, []byte(strconv.Itoa(j)), []byte(tag), 0))
			}
		}
	}
	write(mine, "v1")
	write(neighbour, "n1")
	snapshotTo(t, mine, bs) // flushes v1 into table files

	write(mine, "v2")
	write(neighbour, "n2")
	for i := range 100 {
		k := []byte("k" + strconv.Itoa(i))
		switch i % 4 {
		case 0:
			must(t, mine.ValueDelete("v", k, nil))
		case 1:
			must(t, mine.ListClear("l", k, nil))
		case 2:
			must(t, mine.MapClear("big", k, nil))
		}
	}
	m := snapshotTo(t, mine, bs)
	write(mine, "after") // not in the snapshot
	for _, dst := range backendKinds {
		restored, err := dst.open(t, clock.now).OpenTask(testScope, testMaxP, all)
		must(t, err)
		restoreFromAll(t, restored, bs, m)
		got := flat(snapshot(t, restored))
		must(t, restored.Close())
		check, err := dst.open(t, clock.now).OpenTask(testScope, testMaxP, all)
		must(t, err)
		// The expected state, rebuilt by the same writes on a fresh store.
		write(check, "v1")
		write(check, "v2")
		for i := range 100 {
			k := []byte("k" + strconv.Itoa(i))
			switch i % 4 {
			case 0:
				must(t, check.ValueDelete("v", k, nil))
			case 1:
				must(t, check.ListClear("l", k, nil))
			case 2:
				must(t, check.MapClear("big", k, nil))
			}
		}
		equal(t, "restored into "+dst.name, got, flat(snapshot(t, check)))
		must(t, check.Close())
	}

	// A reopened task starts empty (a range deletion in the database); its
	// next snapshot must not resurrect what was there.
	must(t, mine.Close())
	mine, err = b.OpenTask(testScope, testMaxP, all)
	must(t, err)
	defer mine.Close()
	must(t, mine.ValuePut("v", []byte("only"), nil, []byte("this"), 0))
	m = snapshotTo(t, mine, bs)
	restored, err := backendNamed("memory").open(t, clock.now).OpenTask(testScope, testMaxP, all)
	must(t, err)
	defer restored.Close()
	restoreFromAll(t, restored, bs, m)
	equal(t, "after reopening", flat(snapshot(t, restored)), flat(snapshot(t, mine)))
	if n := len(snapshot(t, restored)); n != 1 {
		t.Fatalf("%d entries restored, want 1", n)
	}
}

// TestIncrementalSnapshot: on a 20 MB state, a snapshot after a small
// change uploads a small part of the state, and an unchanged state uploads
// (and re-hashes) about nothing. The memory backend's full snapshot is
// content-addressed too: unchanged, it uploads nothing.
func TestIncrementalSnapshot(t *testing.T) {
	const (
		keys      = 20_000
		valueSize = 1 << 10 // 20 MB in all
	)
	for _, blobs := range blobKinds(t) {
		for _, bk := range []string{"pebble", "memory"} {
			if bk == "memory" && blobs.name != "file" {
				continue // nothing specific to the storage: save the time
			}
			t.Run(blobs.name+"/"+bk, func(t *testing.T) {
				bs := blobs.open(t)
				var backend Backend
				var err error
				if bk == "pebble" {
					// The default memtable: the state is flushed by the
					// checkpoint, not by the writes, as on a real worker.
					cfg := DefaultPebbleConfig(t.TempDir())
					cfg.BlockCacheBytes = 8 << 20
					backend, err = OpenPebble(cfg)
				} else {
					backend, err = NewMemory(DefaultMemoryConfig())
				}
				must(t, err)
				defer backend.Close()
				s, err := backend.OpenTask(testScope, testMaxP, Range{0, testMaxP})
				must(t, err)
				defer s.Close()
				rng := rand.NewChaCha8([32]byte{1})
				val := make([]byte, valueSize)
				put := func(i int) {
					_, _ = rng.Read(val)
					must(t, s.ValuePut("v", []byte("key-"+strconv.Itoa(i)), nil, val, 0))
				}
				for i := range keys {
					put(i)
				}
				first := snapshotTo(t, s, bs)
				settle(t, backend)
				if first.FullSize < keys*valueSize || first.IncrementalSize != first.FullSize {
					t.Fatalf("first snapshot: full %d, incremental %d bytes; want both ≥ %d", first.FullSize, first.IncrementalSize, keys*valueSize)
				}
				for i := range 100 {
					put(i * (keys / 100))
				}
				second := snapshotTo(t, s, bs)
				t.Logf("%s: first snapshot %d bytes, after 100 changes %d of %d uploaded", bk, first.IncrementalSize, second.IncrementalSize, second.FullSize)
				// A compaction the second snapshot's flush set off makes new
				// files, which the next snapshot rightly uploads: let it end
				// and take that snapshot, so that the one measured below has
				// nothing new at all.
				if settle(t, backend) {
					_ = snapshotTo(t, s, bs)
				}

				var hashedBefore int64
				if p, ok := backend.(*Pebble); ok {
					hashedBefore = p.digests.hashed.Load()
				}
				third := snapshotTo(t, s, bs)
				t.Logf("%s: unchanged: %d of %d uploaded", bk, third.IncrementalSize, third.FullSize)
				switch p, ok := backend.(*Pebble); {
				case ok:
					if second.IncrementalSize >= second.FullSize/4 {
						t.Errorf("after 100 changes: %d of %d bytes uploaded, want < 1/4", second.IncrementalSize, second.FullSize)
					}
					if third.IncrementalSize > 64<<10 {
						t.Errorf("unchanged state: %d bytes uploaded, want ≤ 64 KiB", third.IncrementalSize)
					}
					if h := p.digests.hashed.Load() - hashedBefore; h > 64<<10 {
						t.Errorf("unchanged state: %d bytes hashed again, want ≤ 64 KiB", h)
					}
				default:
					if second.IncrementalSize != second.FullSize || third.IncrementalSize != 0 {
						t.Errorf("full snapshots: changed state uploaded %d of %d, unchanged %d; want all, then nothing",
							second.IncrementalSize, second.FullSize, third.IncrementalSize)
					}
				}

				if bk != "pebble" {
					return // a full snapshot restores as in TestSnapshotRoundTrip
				}
				// The last snapshot references files of all three.
				restored, err := backendNamed("memory").open(t, time.Now).OpenTask(testScope, testMaxP, Range{0, testMaxP})
				must(t, err)
				defer restored.Close()
				restoreFromAll(t, restored, bs, third)
				if got, want := snapshot(t, restored), snapshot(t, s); len(got) != len(want) || !slices.EqualFunc(got, want, func(a, b [2][]byte) bool {
					return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1])
				}) {
					t.Fatalf("restored %d entries that differ from the %d of the state", len(got), len(want))
				}
			})
		}
	}
}

// TestRestoreDetectsDamage: a missing or damaged file, or a manifest that
// does not make sense, fails the restore with an error to act on, and
// leaves the Store as it was.
func TestRestoreDetectsDamage(t *testing.T) {
	for _, blobs := range blobKinds(t) {
		for _, bk := range backendKinds {
			t.Run(blobs.name+"/"+bk.name, func(t *testing.T) {
				clock := newFakeClock()
				all := Range{0, testMaxP}
				src, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, all)
				must(t, err)
				defer src.Close()
				fillMixed(t, src, all, 200)
				target, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, all)
				must(t, err)
				defer target.Close()

				type damage struct {
					name  string
					apply func(bs storage.Store, m *SnapshotManifest)
					want  []error
				}
				// The file to damage: the largest (a table file for Pebble).
				largest := func(m SnapshotManifest) File {
					return slices.MaxFunc(m.Files, func(a, b File) int { return int(a.Size - b.Size) })
				}
				overwrite := func(bs storage.Store, key string, b []byte) {
					must(t, bs.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))))
				}
				read := func(bs storage.Store, key string) []byte {
					rc, err := bs.Get(context.Background(), key)
					must(t, err)
					defer rc.Close()
					b, err := io.ReadAll(rc)
					must(t, err)
					return b
				}
				cases := []damage{
					{"missing file", func(bs storage.Store, m *SnapshotManifest) {
						must(t, bs.Delete(context.Background(), largest(*m).StorageKey(testPrefix)))
					}, []error{storage.ErrNotFound}},
					{"missing manifest file", func(bs storage.Store, m *SnapshotManifest) {
						for _, f := range m.Files {
							if strings.HasPrefix(f.Name, "MANIFEST") || m.Kind == SnapshotFull {
								must(t, bs.Delete(context.Background(), f.StorageKey(testPrefix)))
							}
						}
					}, []error{storage.ErrNotFound}},
					{"flipped byte", func(bs storage.Store, m *SnapshotManifest) {
						key := largest(*m).StorageKey(testPrefix)
						b := read(bs, key)
						b[len(b)/2] ^= 0x40
						overwrite(bs, key, b)
					}, []error{ErrCorrupt, storage.ErrCorrupt}},
					{"truncated", func(bs storage.Store, m *SnapshotManifest) {
						key := largest(*m).StorageKey(testPrefix)
						overwrite(bs, key, read(bs, key)[:100])
					}, []error{ErrCorrupt, storage.ErrCorrupt}},
					{"garbage with a matching hash", func(bs storage.Store, m *SnapshotManifest) {
						garbage := bytes.Repeat([]byte("not a state file "), 100)
						sha, err := storage.PutContent(context.Background(), bs, testPrefix+"/"+SharedDir, garbage)
						must(t, err)
						f := largest(*m)
						for i := range m.Files {
							if m.Files[i] == f {
								m.Files[i] = File{Key: sharedKey(sha), SHA256: sha, Size: int64(len(garbage)), Name: f.Name}
							}
						}
					}, []error{ErrCorrupt}},
					{"newer format", func(_ storage.Store, m *SnapshotManifest) { m.Format++ }, []error{ErrCorrupt}},
					{"unknown kind", func(_ storage.Store, m *SnapshotManifest) { m.Kind = "rocksdb" }, []error{ErrCorrupt}},
					{"bad key groups", func(_ storage.Store, m *SnapshotManifest) { m.Groups = Range{5, 3} }, []error{ErrCorrupt}},
					{"bad sha", func(_ storage.Store, m *SnapshotManifest) { m.Files[0].SHA256 = "abc" }, []error{ErrCorrupt}},
					{"other max parallelism", func(_ storage.Store, m *SnapshotManifest) { m.MaxParallelism = 2 * testMaxP }, []error{ErrInvalid}},
					{"escaping file name", func(_ storage.Store, m *SnapshotManifest) {
						m.Files[0].Name = "../../escape"
						if m.Kind == SnapshotFull {
							m.Kind = SnapshotPebble
						}
					}, []error{ErrCorrupt}},
				}
				for _, tc := range cases {
					t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
						bs := blobs.open(t)
						m := snapshotTo(t, src, bs)
						m.Files = slices.Clone(m.Files)
						tc.apply(bs, &m)
						err := RestoreFrom(context.Background(), target, bs, testPrefix, []SnapshotManifest{m})
						if err == nil {
							t.Fatal("restore succeeded")
						}
						for _, want := range tc.want {
							if !errors.Is(err, want) {
								t.Errorf("error %q does not match %q", err, want)
							}
						}
						if strings.Contains(err.Error(), "\n") {
							t.Errorf("error of several lines: %q", err)
						}
						if n := len(snapshot(t, target)); n != 0 && tc.name != "garbage with a matching hash" {
							t.Errorf("the failed restore left %d entries", n)
						}
						t.Log(err)
					})
				}
			})
		}
	}
}

// TestSnapshotWrappedStore: a Store of another package (a wrapper, as
// dataflow's tests use) is snapshotted in full through its methods.
func TestSnapshotWrappedStore(t *testing.T) {
	bs := blobKinds(t)[0].open(t)
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			clock := newFakeClock()
			all := Range{0, testMaxP}
			inner, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, all)
			must(t, err)
			defer inner.Close()
			fillMixed(t, inner, all, 20)
			m := snapshotTo(t, struct{ Store }{inner}, bs)
			if m.Kind != SnapshotFull || m.Groups != (Range{0, MaxKeyGroups}) || m.MaxParallelism != 0 {
				t.Errorf("manifest of a wrapped store: kind %s, groups %s, max parallelism %d", m.Kind, m.Groups, m.MaxParallelism)
			}
			half := Range{0, testMaxP / 2}
			restored, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, half)
			must(t, err)
			defer restored.Close()
			restoreFromAll(t, struct{ Store }{restored}, bs, m)
			var want []string
			for _, e := range snapshot(t, inner) {
				if half.Contains(int(e[0][0])<<8 | int(e[0][1])) {
					want = append(want, fmt.Sprintf("%x=%x", e[0], e[1]))
				}
			}
			equal(t, "restored through a wrapper", flat(snapshot(t, restored)), want)
		})
	}
}

// TestSnapshotCapture: a capture freezes the state; the upload, on another
// goroutine while the task writes on, stores what was captured, and
// nothing is left on local disk.
func TestSnapshotCapture(t *testing.T) {
	bs := blobKinds(t)[0].open(t)
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			clock := newFakeClock()
			all := Range{0, testMaxP}
			s, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, all)
			must(t, err)
			defer s.Close()
			fillMixed(t, s, all, 50)
			want := flat(snapshot(t, s))
			var work []string

			c, err := CaptureSnapshot(context.Background(), s)
			must(t, err)
			work = append(work, c.work)
			uploaded := make(chan SnapshotManifest, 1)
			go func() {
				m, err := c.Upload(context.Background(), bs, testPrefix)
				if err != nil {
					t.Error(err)
				}
				uploaded <- m
			}()
			fillMixed(t, s, Range{0, 2}, 50) // the task goes on
			must(t, s.ValueDelete("count", keyInGroups(all, 1), nil))
			m := <-uploaded
			if _, err := c.Upload(context.Background(), bs, testPrefix); !errors.Is(err, ErrInvalid) {
				t.Errorf("second Upload: %v, want ErrInvalid", err)
			}

			restored, err := backendNamed("memory").open(t, clock.now).OpenTask(testScope, testMaxP, all)
			must(t, err)
			defer restored.Close()
			restoreFromAll(t, restored, bs, m)
			equal(t, "restored capture", flat(snapshot(t, restored)), want)

			c, err = CaptureSnapshot(context.Background(), s)
			must(t, err)
			work = append(work, c.work)
			c.Discard()
			c.Discard()
			for _, w := range work {
				if _, err := os.Stat(w); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("capture directory %s left behind: %v", w, err)
				}
			}
		})
	}
}

func TestSnapshotClosedStore(t *testing.T) {
	bs := blobKinds(t)[0].open(t)
	for _, bk := range backendKinds {
		s, err := bk.open(t, time.Now).OpenTask(testScope, testMaxP, Range{0, testMaxP})
		must(t, err)
		must(t, s.Close())
		if _, err := SnapshotTo(context.Background(), s, bs, testPrefix); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: SnapshotTo on a closed store: %v", bk.name, err)
		}
		if err := RestoreFrom(context.Background(), s, bs, testPrefix, nil); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: RestoreFrom on a closed store: %v", bk.name, err)
		}
	}
}

// TestSnapshotConcurrentTasks: tasks sharing a Pebble database snapshot at
// the same time as the others write and snapshot, and each restores to
// exactly its own state.
func TestSnapshotConcurrentTasks(t *testing.T) {
	bs := blobKinds(t)[0].open(t)
	b := backendNamed("pebble").open(t, time.Now)
	const tasks = 4
	var wg sync.WaitGroup
	errs := make(chan error, tasks)
	for i := range tasks {
		wg.Go(func() {
			errs <- func() error {
				scope := Scope{"default", "job", "op-" + strconv.Itoa(i%2)}
				groups := KeyGroupRange(i/2, tasks/2, testMaxP)
				s, err := b.OpenTask(scope, testMaxP, groups)
				if err != nil {
					return err
				}
				defer s.Close()
				var m SnapshotManifest
				for round := range 3 {
					for n := range 300 {
						k := keyInGroups(groups, n)
						if err := s.ValuePut("v", k, nil, []byte(fmt.Sprintf("%d-%d", i, round)), 0); err != nil {
							return err
						}
					}
					if m, err = SnapshotTo(context.Background(), s, bs, testPrefix); err != nil {
						return err
					}
				}
				mem, err := NewMemory(DefaultMemoryConfig())
				if err != nil {
					return err
				}
				defer mem.Close()
				r, err := mem.OpenTask(scope, testMaxP, groups)
				if err != nil {
					return err
				}
				if err := RestoreFrom(context.Background(), r, bs, testPrefix, []SnapshotManifest{m}); err != nil {
					return err
				}
				got, want := snapshot(t, r), snapshot(t, s)
				if !slices.EqualFunc(got, want, func(a, b [2][]byte) bool { return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1]) }) {
					return fmt.Errorf("task %d: restored %d entries, differing from its %d", i, len(got), len(want))
				}
				return nil
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
}

// TestSnapshotManifestJSON pins the JSON form of a manifest, which task
// manifests embed: run with -update to rewrite it after a deliberate change.
func TestSnapshotManifestJSON(t *testing.T) {
	m := SnapshotManifest{
		Format: FormatVersion,
		Kind:   SnapshotPebble,
		Files: []File{
			{Key: "shared/" + strings.Repeat("ab", 32), SHA256: strings.Repeat("ab", 32), Size: 4096, Name: "000012.sst"},
			{Key: "shared/" + strings.Repeat("cd", 32), SHA256: strings.Repeat("cd", 32), Size: 117, Name: "MANIFEST-000014"},
		},
		Groups:          Range{0, 64},
		MaxParallelism:  128,
		Scope:           Scope{Tenant: "default", Job: "card-activity", Operator: "per_card"},
		FullSize:        4213,
		IncrementalSize: 117,
	}
	got, err := json.MarshalIndent(m, "", "  ")
	must(t, err)
	golden := filepath.Join("testdata", "snapshot_manifest.json")
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(golden, append(got, '\n'), 0o644))
	}
	want, err := os.ReadFile(golden)
	must(t, err)
	if string(got)+"\n" != string(want) {
		t.Fatalf("JSON of a manifest:\n%s\nwant (%s):\n%s", got, golden, want)
	}
	var back SnapshotManifest
	must(t, json.Unmarshal(want, &back))
	if !slices.Equal(back.Files, m.Files) || back.Scope != m.Scope || back.Groups != m.Groups || back.FullSize != m.FullSize {
		t.Fatalf("round trip: %+v, want %+v", back, m)
	}
	if keys := m.StorageKeys("tenants/default/jobs/card-activity/"); keys[0] != "tenants/default/jobs/card-activity/shared/"+strings.Repeat("ab", 32) {
		t.Errorf("StorageKeys = %q", keys)
	}
}

// settle waits (bounded) until a Pebble backend has no compaction running
// or owed, so that a test's next snapshot is not raced by one; it reports
// whether the backend is Pebble.
func settle(t *testing.T, b Backend) bool {
	t.Helper()
	p, ok := b.(*Pebble)
	if !ok {
		return false
	}
	testkit.Eventually(t, 30*time.Second, "pebble compactions done", func() bool {
		m := p.db.Metrics()
		return m.Compact.NumInProgress == 0 && m.Compact.EstimatedDebt == 0
	})
	return true
}
