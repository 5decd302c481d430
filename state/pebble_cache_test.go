package state

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// openCached opens a Pebble backend with the given value cache budget and
// a task owning every key group.
func openCached(t *testing.T, budget int64, clock *fakeClock) (*Pebble, *store, *pebbleEngine) {
	t.Helper()
	cfg := DefaultPebbleConfig(t.TempDir())
	cfg.BlockCacheBytes, cfg.MemTableBytes = 8<<20, 4<<20
	cfg.ValueCacheBytes = budget
	cfg.Now = clock.now
	p, err := OpenPebble(cfg)
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	st, err := p.OpenTask(testScope, testMaxP, Range{0, testMaxP})
	must(t, err)
	t.Cleanup(func() { _ = st.Close() })
	s := st.(*store)
	return p, s, s.eng.(*pebbleEngine)
}

// inDB reads the value state of key straight from the database, past the
// cache, returning its payload.
func inDB(t *testing.T, s *store, e *pebbleEngine, key string) (string, bool) {
	t.Helper()
	g := int(hashKey([]byte(key)) % s.maxP)
	k := appendStateKey(nil, s.prefix, g, KindValue, "v", []byte(key), nil)
	v, ok, err := e.dbGet(k, nil)
	must(t, err)
	if !ok {
		return "", false
	}
	_, _, h, err := readHeaderSchema(v)
	must(t, err)
	return string(v[h:]), true
}

func cachedValue(t *testing.T, s Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.ValueGet("v", []byte(key), nil, nil)
	must(t, err)
	return string(v), ok
}

// TestValueCacheWriteBack: writes are seen by the task's reads at once and
// reach the database only when something needs them there.
func TestValueCacheWriteBack(t *testing.T) {
	clock := newFakeClock()
	_, s, e := openCached(t, 1<<20, clock)

	must(t, s.ValuePut("v", []byte("a"), nil, []byte("1"), 0))
	if v, ok := cachedValue(t, s, "a"); !ok || v != "1" {
		t.Fatalf("read after put = %q, %v; want 1", v, ok)
	}
	if _, ok := inDB(t, s, e, "a"); ok {
		t.Fatal("a put reached the database before any flush")
	}
	// Map and timer operations scan spans without value keys: no flush.
	must(t, s.MapPut("m", []byte("a"), nil, []byte("u"), []byte("x"), 0))
	must(t, s.MapIter("m", []byte("a"), nil, func(_, _ []byte) error { return nil }))
	must(t, s.TimerRegister(EventTime, []byte("a"), nil, 5))
	if _, _, err := s.NextTimer(EventTime); err != nil {
		t.Fatal(err)
	}
	if e.cache.flushes != 0 {
		t.Fatalf("map and timer operations flushed the value cache %d times", e.cache.flushes)
	}
	// A snapshot reads the database: the cache is written first.
	if snap := snapshot(t, s); len(snap) != 3 {
		t.Fatalf("snapshot has %d entries, want value, map entry and timer", len(snap))
	}
	if v, ok := inDB(t, s, e, "a"); !ok || v != "1" {
		t.Fatalf("database after snapshot = %q, %v; want 1", v, ok)
	}

	must(t, s.ValueDelete("v", []byte("a"), nil))
	if _, ok := cachedValue(t, s, "a"); ok {
		t.Fatal("read after delete found a value")
	}
	if _, ok := inDB(t, s, e, "a"); !ok {
		t.Fatal("the delete reached the database before any flush")
	}
	if _, err := s.CleanupExpired(); err != nil {
		t.Fatal(err)
	}
	if _, ok := inDB(t, s, e, "a"); ok {
		t.Fatal("the delete did not reach the database on CleanupExpired")
	}
}

// TestValueCacheInvalidation: every way a cached value stops being current
// is seen by the next read.
func TestValueCacheInvalidation(t *testing.T) {
	cases := []struct {
		name string
		// change acts on a store where key "a" holds "1", cached (read and
		// written), and returns the value "a" must then read as.
		change func(t *testing.T, s *store, clock *fakeClock) (string, bool)
	}{
		{"put", func(t *testing.T, s *store, _ *fakeClock) (string, bool) {
			must(t, s.ValuePut("v", []byte("a"), nil, []byte("2"), 0))
			return "2", true
		}},
		{"delete", func(t *testing.T, s *store, _ *fakeClock) (string, bool) {
			must(t, s.ValueDelete("v", []byte("a"), nil))
			return "", false
		}},
		{"ttl expiry", func(t *testing.T, s *store, clock *fakeClock) (string, bool) {
			must(t, s.ValuePut("v", []byte("a"), nil, []byte("2"), time.Minute))
			clock.advance(time.Minute)
			return "", false
		}},
		{"restore of an older snapshot", func(t *testing.T, s *store, _ *fakeClock) (string, bool) {
			old := snapshot(t, s)
			must(t, s.ValuePut("v", []byte("a"), nil, []byte("2"), 0))
			must(t, s.Restore(entries(old)))
			return "1", true
		}},
		{"clear of the range when the task opens again", func(t *testing.T, s *store, _ *fakeClock) (string, bool) {
			lo, hi := s.rangeSpan()
			must(t, s.eng.delRange(lo, hi))
			return "", false
		}},
		{"map clear of the same key and name", func(t *testing.T, s *store, _ *fakeClock) (string, bool) {
			must(t, s.MapPut("v", []byte("a"), nil, []byte("u"), []byte("x"), 0))
			must(t, s.MapClear("v", []byte("a"), nil))
			return "1", true // a map and a value sharing a name do not collide
		}},
		{"list append of the same key and name", func(t *testing.T, s *store, _ *fakeClock) (string, bool) {
			must(t, s.ListAppend("v", []byte("a"), nil, []byte("x"), 0))
			must(t, s.ListClear("v", []byte("a"), nil))
			return "1", true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			_, s, e := openCached(t, 1<<20, clock)
			must(t, s.ValuePut("v", []byte("a"), nil, []byte("1"), 0))
			if v, ok := cachedValue(t, s, "a"); !ok || v != "1" {
				t.Fatalf("setup read = %q, %v", v, ok)
			}
			want, wantOK := tc.change(t, s, clock)
			if v, ok := cachedValue(t, s, "a"); ok != wantOK || v != want {
				t.Fatalf("read = %q, %v; want %q, %v", v, ok, want, wantOK)
			}
			// The database agrees once written.
			snap := snapshot(t, s)
			if v, ok := inDB(t, s, e, "a"); wantOK && (!ok || v != want) {
				t.Fatalf("database = %q, %v; want %q (snapshot %v)", v, ok, want, flat(snap))
			}
		})
	}
}

// TestValueCacheEviction: a cache much smaller than the state keeps every
// value correct, holds its budget, and writes evicted dirty values.
func TestValueCacheEviction(t *testing.T) {
	const keys = 2000
	clock := newFakeClock()
	_, s, e := openCached(t, 4<<10, clock)
	for round := range 3 {
		for i := range keys {
			must(t, s.ValuePut("v", []byte("k"+strconv.Itoa(i)), nil, []byte(strconv.Itoa(round*keys+i)), 0))
			if e.cache.bytes > e.cache.budget {
				t.Fatalf("cache holds %d bytes over its budget of %d", e.cache.bytes, e.cache.budget)
			}
		}
	}
	for i := range keys {
		want := strconv.Itoa(2*keys + i)
		if v, ok := cachedValue(t, s, "k"+strconv.Itoa(i)); !ok || v != want {
			t.Fatalf("k%d = %q, %v; want %s", i, v, ok, want)
		}
	}
	if e.cache.evictions == 0 || e.cache.flushes == 0 {
		t.Fatalf("%d evictions, %d flushes: the cache was never full", e.cache.evictions, e.cache.flushes)
	}
}

// TestValueCacheCheckpoint: a checkpoint taken while written values are
// only in the cache holds them, and a restore into another backend reads
// them.
func TestValueCacheCheckpoint(t *testing.T) {
	for _, blobs := range blobKinds(t) {
		t.Run(blobs.name, func(t *testing.T) {
			bs := blobs.open(t)
			clock := newFakeClock()
			_, s, _ := openCached(t, 1<<20, clock)
			must(t, s.ValuePut("v", []byte("a"), nil, []byte("1"), 0))
			m, err := SnapshotTo(context.Background(), s, bs, testPrefix)
			must(t, err)
			if m.Kind != SnapshotPebble {
				t.Fatalf("snapshot kind %s, want the incremental pebble one", m.Kind)
			}
			_, other, _ := openCached(t, 1<<20, newFakeClock())
			must(t, RestoreFrom(context.Background(), other, bs, testPrefix, []SnapshotManifest{m}))
			if v, ok := cachedValue(t, other, "a"); !ok || v != "1" {
				t.Fatalf("restored a = %q, %v; want 1", v, ok)
			}
		})
	}
}

// TestValueCacheClose: a closed task's cache is gone, and the range opens
// empty again.
func TestValueCacheClose(t *testing.T) {
	clock := newFakeClock()
	p, s, _ := openCached(t, 1<<20, clock)
	must(t, s.ValuePut("v", []byte("a"), nil, []byte("1"), 0))
	must(t, s.Close())
	if _, _, err := s.ValueGet("v", []byte("a"), nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("get on a closed store = %v, want ErrClosed", err)
	}
	st, err := p.OpenTask(testScope, testMaxP, Range{0, testMaxP})
	must(t, err)
	defer st.Close()
	if _, ok := cachedValue(t, st, "a"); ok {
		t.Fatal("a reopened range still holds a value")
	}
}

// TestValueCacheDisabled: a budget of zero writes through, as before the
// cache; a negative one is refused.
func TestValueCacheDisabled(t *testing.T) {
	_, s, e := openCached(t, 0, newFakeClock())
	if e.cache != nil {
		t.Fatal("a zero budget made a cache")
	}
	must(t, s.ValuePut("v", []byte("a"), nil, []byte("1"), 0))
	if v, ok := inDB(t, s, e, "a"); !ok || v != "1" {
		t.Fatalf("database = %q, %v; want 1 written through", v, ok)
	}
	cfg := DefaultPebbleConfig(t.TempDir())
	cfg.ValueCacheBytes = -1
	if _, err := OpenPebble(cfg); !errors.Is(err, ErrInvalid) {
		t.Fatalf("OpenPebble with a negative value cache = %v, want ErrInvalid", err)
	}
}
