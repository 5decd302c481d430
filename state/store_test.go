package state

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the TTL clock of the tests: time moves only when told.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(1_700_000_000_000)
	return c
}

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

type backendKind struct {
	name string
	open func(t testing.TB, now func() time.Time) Backend
}

var backendKinds = []backendKind{
	{"memory", func(t testing.TB, now func() time.Time) Backend {
		b, err := NewMemory(MemoryConfig{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
	{"pebble", func(t testing.TB, now func() time.Time) Backend {
		cfg := DefaultPebbleConfig(t.TempDir())
		cfg.BlockCacheBytes = 8 << 20
		cfg.MemTableBytes = 4 << 20
		cfg.Now = now
		b, err := OpenPebble(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
	// A value cache of a few entries, so that every case also runs through
	// its evictions and flushes.
	{"pebble-tinycache", func(t testing.TB, now func() time.Time) Backend {
		cfg := DefaultPebbleConfig(t.TempDir())
		cfg.BlockCacheBytes = 8 << 20
		cfg.MemTableBytes = 4 << 20
		cfg.ValueCacheBytes = 1 << 10
		cfg.Now = now
		b, err := OpenPebble(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
}

// env is what one behavioural case gets: a fresh backend with a fake clock.
type env struct {
	t       *testing.T
	kind    backendKind
	backend Backend
	clock   *fakeClock
}

var testScope = Scope{Tenant: "default", Job: "job", Operator: "op"}

const testMaxP = 16

// open opens a Store owning all key groups unless told otherwise.
func (e *env) open(scope Scope, groups Range) Store {
	e.t.Helper()
	s, err := e.backend.OpenTask(scope, testMaxP, groups)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *env) openAll() Store { return e.open(testScope, Range{0, testMaxP}) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func getValue(t testing.TB, s Store, name, key, ns string) (string, bool) {
	t.Helper()
	v, ok, err := s.ValueGet(name, []byte(key), []byte(ns), nil)
	must(t, err)
	return string(v), ok
}

func getList(t testing.TB, s Store, name, key, ns string) []string {
	t.Helper()
	var out []string
	must(t, s.ListGet(name, []byte(key), []byte(ns), func(v []byte) error {
		out = append(out, string(v))
		return nil
	}))
	return out
}

func getMap(t testing.TB, s Store, name, key, ns string) []string {
	t.Helper()
	var out []string
	must(t, s.MapIter(name, []byte(key), []byte(ns), func(uk, v []byte) error {
		out = append(out, string(uk)+"="+string(v))
		return nil
	}))
	return out
}

func popAll(t testing.TB, s Store, kind TimerKind, upTo int64) []string {
	t.Helper()
	var out []string
	must(t, s.PopTimers(kind, upTo, func(tm Timer) error {
		out = append(out, fmt.Sprintf("%d/%d/%s/%s", tm.Timestamp, tm.KeyGroup, tm.Key, tm.Namespace))
		return nil
	}))
	return out
}

func snapshot(t testing.TB, s Store) [][2][]byte {
	t.Helper()
	var out [][2][]byte
	must(t, s.Snapshot(func(k, v []byte) error {
		out = append(out, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		return nil
	}))
	return out
}

func entries(snaps ...[][2][]byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for _, snap := range snaps {
			for _, e := range snap {
				if !yield(e[0], e[1]) {
					return
				}
			}
		}
	}
}

func equal[T comparable](t testing.TB, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

var behaviour = []struct {
	name string
	run  func(e *env)
}{
	{"value put get delete", func(e *env) {
		s := e.openAll()
		if _, ok := getValue(e.t, s, "count", "k", ""); ok {
			e.t.Fatal("value before put")
		}
		must(e.t, s.ValuePut("count", []byte("k"), nil, []byte("1"), 0))
		must(e.t, s.ValuePut("count", []byte("k"), nil, []byte("22"), 0))
		if v, ok := getValue(e.t, s, "count", "k", ""); !ok || v != "22" {
			e.t.Fatalf("value = %q, %v", v, ok)
		}
		must(e.t, s.ValueDelete("count", []byte("k"), nil))
		if _, ok := getValue(e.t, s, "count", "k", ""); ok {
			e.t.Fatal("value after delete")
		}
		must(e.t, s.ValueDelete("count", []byte("never"), nil))
	}},
	{"value scan", func(e *env) {
		half := Range{0, testMaxP / 2}
		s := e.open(testScope, half)
		other := e.open(testScope, Range{testMaxP / 2, testMaxP})
		want := map[string]string{}
		for i := range 40 {
			k := []byte(fmt.Sprintf("key-%d", i))
			st := s
			if !half.Contains(KeyGroup(k, testMaxP)) {
				st = other
			}
			must(e.t, st.ValuePut("panes", k, nil, []byte(strconv.Itoa(i)), 0))
			must(e.t, st.ValuePut("panes", k, []byte("ns"), []byte("n"), 0))
			must(e.t, st.ValuePut("panesx", k, nil, []byte("other name"), 0))
			must(e.t, st.MapPut("panes", k, nil, []byte("u"), []byte("a map"), 0))
			if st == s {
				want[string(k)+"/"] = strconv.Itoa(i)
				want[string(k)+"/ns"] = "n"
			}
		}
		for i := 0; ; i++ {
			if k := []byte(fmt.Sprintf("key-%d", i)); half.Contains(KeyGroup(k, testMaxP)) {
				must(e.t, s.ValuePut("panes", k, []byte("ttl"), []byte("gone"), time.Second))
				break
			}
		}
		e.clock.advance(2 * time.Second)
		got := map[string]string{}
		lastGroup := -1
		must(e.t, s.ValueScan("panes", func(key, ns, v []byte) error {
			g := KeyGroup(key, testMaxP)
			if g < lastGroup {
				e.t.Errorf("key %q of group %d after group %d", key, g, lastGroup)
			}
			lastGroup = g
			got[string(key)+"/"+string(ns)] = string(v)
			return nil
		}))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			e.t.Fatalf("ValueScan saw %v, want %v", got, want)
		}
	}},
	{"value get appends to dst", func(e *env) {
		s := e.openAll()
		must(e.t, s.ValuePut("v", []byte("k"), nil, []byte("abc"), time.Hour))
		dst := []byte("prefix:")
		got, ok, err := s.ValueGet("v", []byte("k"), nil, dst)
		must(e.t, err)
		if !ok || string(got) != "prefix:abc" {
			e.t.Fatalf("ValueGet = %q, %v", got, ok)
		}
		got, ok, err = s.ValueGet("v", []byte("missing"), nil, dst)
		must(e.t, err)
		if ok || string(got) != "prefix:" {
			e.t.Fatalf("missing ValueGet = %q, %v", got, ok)
		}
	}},
	{"empty value is a value", func(e *env) {
		s := e.openAll()
		must(e.t, s.ValuePut("v", []byte("k"), nil, nil, 0))
		if v, ok := getValue(e.t, s, "v", "k", ""); !ok || v != "" {
			e.t.Fatalf("value = %q, %v", v, ok)
		}
	}},
	{"list append get clear", func(e *env) {
		s := e.openAll()
		equal(e.t, "empty list", getList(e.t, s, "buf", "k", ""), nil)
		for _, v := range []string{"a", "", "ccc"} {
			must(e.t, s.ListAppend("buf", []byte("k"), nil, []byte(v), 0))
		}
		equal(e.t, "list", getList(e.t, s, "buf", "k", ""), []string{"a", "", "ccc"})
		must(e.t, s.ListClear("buf", []byte("k"), nil))
		equal(e.t, "cleared list", getList(e.t, s, "buf", "k", ""), nil)
		must(e.t, s.ListAppend("buf", []byte("k"), nil, []byte("d"), 0))
		equal(e.t, "list after clear", getList(e.t, s, "buf", "k", ""), []string{"d"})
	}},
	{"list of many elements", func(e *env) {
		s := e.openAll()
		var want []string
		for i := range 2000 {
			v := strconv.Itoa(i)
			want = append(want, v)
			must(e.t, s.ListAppend("buf", []byte("k"), nil, []byte(v), 0))
		}
		equal(e.t, "list", getList(e.t, s, "buf", "k", ""), want)
	}},
	{"map put get delete iterate clear", func(e *env) {
		s := e.openAll()
		for _, uk := range []string{"m", "a", "", "z", "b"} {
			must(e.t, s.MapPut("seen", []byte("k"), nil, []byte(uk), []byte("v"+uk), 0))
		}
		must(e.t, s.MapPut("seen", []byte("k"), nil, []byte("a"), []byte("A"), 0))
		equal(e.t, "map", getMap(e.t, s, "seen", "k", ""), []string{"=v", "a=A", "b=vb", "m=vm", "z=vz"})
		v, ok, err := s.MapGet("seen", []byte("k"), nil, []byte("m"), nil)
		must(e.t, err)
		if !ok || string(v) != "vm" {
			e.t.Fatalf("MapGet = %q, %v", v, ok)
		}
		must(e.t, s.MapDelete("seen", []byte("k"), nil, []byte("m")))
		if _, ok, _ := s.MapGet("seen", []byte("k"), nil, []byte("m"), nil); ok {
			e.t.Fatal("entry after delete")
		}
		must(e.t, s.MapClear("seen", []byte("k"), nil))
		equal(e.t, "cleared map", getMap(e.t, s, "seen", "k", ""), nil)
	}},
	{"map clear of a big map", func(e *env) {
		s := e.openAll()
		for i := range 3 * clearPointLimit {
			must(e.t, s.MapPut("big", []byte("k"), nil, []byte(strconv.Itoa(i)), []byte("v"), 0))
		}
		must(e.t, s.MapPut("big", []byte("k2"), nil, []byte("x"), []byte("y"), 0))
		must(e.t, s.MapClear("big", []byte("k"), nil))
		equal(e.t, "cleared map", getMap(e.t, s, "big", "k", ""), nil)
		equal(e.t, "other key's map", getMap(e.t, s, "big", "k2", ""), []string{"x=y"})
		must(e.t, s.MapPut("big", []byte("k"), nil, []byte("again"), []byte("1"), 0))
		equal(e.t, "map after clear", getMap(e.t, s, "big", "k", ""), []string{"again=1"})
	}},
	{"map entries deleted while iterating", func(e *env) {
		s := e.openAll()
		for i := range 1000 {
			must(e.t, s.MapPut("m", []byte("k"), nil, []byte(fmt.Sprintf("%04d", i)), []byte("v"), 0))
		}
		n := 0
		must(e.t, s.MapIter("m", []byte("k"), nil, func(uk, _ []byte) error {
			n++
			return s.MapDelete("m", []byte("k"), nil, uk)
		}))
		if n != 1000 {
			e.t.Fatalf("iterated %d entries, want 1000", n)
		}
		equal(e.t, "map after deleting all", getMap(e.t, s, "m", "k", ""), nil)
	}},
	{"callback error stops and is wrapped", func(e *env) {
		s := e.openAll()
		boom := errors.New("boom")
		must(e.t, s.ListAppend("l", []byte("k"), nil, []byte("a"), 0))
		must(e.t, s.ListAppend("l", []byte("k"), nil, []byte("b"), 0))
		n := 0
		err := s.ListGet("l", []byte("k"), nil, func([]byte) error { n++; return boom })
		if !errors.Is(err, boom) || n != 1 {
			e.t.Fatalf("ListGet = %v after %d calls", err, n)
		}
		must(e.t, s.MapPut("m", []byte("k"), nil, []byte("u"), nil, 0))
		if err := s.MapIter("m", []byte("k"), nil, func(_, _ []byte) error { return boom }); !errors.Is(err, boom) {
			e.t.Fatalf("MapIter = %v", err)
		}
	}},
	{"kinds with the same name are separate", func(e *env) {
		s := e.openAll()
		must(e.t, s.ValuePut("x", []byte("k"), nil, []byte("value"), 0))
		must(e.t, s.ListAppend("x", []byte("k"), nil, []byte("elem"), 0))
		must(e.t, s.MapPut("x", []byte("k"), nil, nil, []byte("entry"), 0))
		if v, _ := getValue(e.t, s, "x", "k", ""); v != "value" {
			e.t.Fatalf("value = %q", v)
		}
		equal(e.t, "list", getList(e.t, s, "x", "k", ""), []string{"elem"})
		equal(e.t, "map", getMap(e.t, s, "x", "k", ""), []string{"=entry"})
	}},
	{"names keys and namespaces are isolated", func(e *env) {
		s := e.openAll()
		// Pairs whose concatenations are equal: length prefixes keep them apart.
		must(e.t, s.ValuePut("ab", []byte("c"), []byte("d"), []byte("1"), 0))
		must(e.t, s.ValuePut("a", []byte("bc"), []byte("d"), []byte("2"), 0))
		must(e.t, s.ValuePut("a", []byte("b"), []byte("cd"), []byte("3"), 0))
		must(e.t, s.ValuePut("a", []byte("b"), nil, []byte("4"), 0))
		for _, c := range []struct{ name, key, ns, want string }{
			{"ab", "c", "d", "1"}, {"a", "bc", "d", "2"}, {"a", "b", "cd", "3"}, {"a", "b", "", "4"},
		} {
			if v, _ := getValue(e.t, s, c.name, c.key, c.ns); v != c.want {
				e.t.Fatalf("%s/%s/%s = %q, want %q", c.name, c.key, c.ns, v, c.want)
			}
		}
		must(e.t, s.MapPut("m", []byte("k"), []byte("w1"), []byte("u"), []byte("in w1"), 0))
		must(e.t, s.MapPut("m", []byte("k"), []byte("w2"), []byte("u"), []byte("in w2"), 0))
		must(e.t, s.MapClear("m", []byte("k"), []byte("w1")))
		equal(e.t, "w1", getMap(e.t, s, "m", "k", "w1"), nil)
		equal(e.t, "w2", getMap(e.t, s, "m", "k", "w2"), []string{"u=in w2"})
		must(e.t, s.ListAppend("l", []byte("k"), []byte("w1"), []byte("a"), 0))
		equal(e.t, "other namespace's list", getList(e.t, s, "l", "k", "w2"), nil)
	}},
	{"tenants jobs and operators are isolated", func(e *env) {
		scopes := []Scope{
			{"default", "job", "op"},
			{"other", "job", "op"},
			{"default", "job2", "op"},
			{"default", "job", "op2"},
			{"defaultj", "ob", "op"}, // same concatenation as the first
		}
		stores := make([]Store, len(scopes))
		for i, sc := range scopes {
			stores[i] = e.open(sc, Range{0, testMaxP})
			must(e.t, stores[i].ValuePut("v", []byte("k"), nil, []byte(sc.String()), 0))
			must(e.t, stores[i].MapPut("m", []byte("k"), nil, []byte(sc.String()), nil, 0))
			must(e.t, stores[i].TimerRegister(EventTime, []byte("k"), nil, int64(i)))
		}
		for i, sc := range scopes {
			s := stores[i]
			if v, _ := getValue(e.t, s, "v", "k", ""); v != sc.String() {
				e.t.Fatalf("%s sees %q", sc, v)
			}
			equal(e.t, sc.String()+" map", getMap(e.t, s, "m", "k", ""), []string{sc.String() + "="})
			if snap := snapshot(e.t, s); len(snap) != 3 {
				e.t.Fatalf("%s snapshot has %d entries, want 3", sc, len(snap))
			}
			equal(e.t, sc.String()+" timers", popAll(e.t, s, EventTime, 100), []string{fmt.Sprintf("%d/%d/k/", i, KeyGroup([]byte("k"), testMaxP))})
		}
	}},
	{"key of another task is refused", func(e *env) {
		r := KeyGroupRange(0, 2, testMaxP)
		s := e.open(testScope, r)
		key := keyInGroups(Range{r.End, testMaxP}, 0)
		if err := s.ValuePut("v", key, nil, nil, 0); !errors.Is(err, ErrNotOwned) {
			e.t.Fatalf("ValuePut of a foreign key = %v", err)
		}
		if _, _, err := s.ValueGet("v", key, nil, nil); !errors.Is(err, ErrNotOwned) {
			e.t.Fatalf("ValueGet of a foreign key = %v", err)
		}
		if err := s.TimerRegister(EventTime, key, nil, 1); !errors.Is(err, ErrNotOwned) {
			e.t.Fatalf("TimerRegister of a foreign key = %v", err)
		}
	}},
	{"overlapping ranges are refused", func(e *env) {
		s, err := e.backend.OpenTask(testScope, testMaxP, Range{0, 8})
		must(e.t, err)
		if _, err := e.backend.OpenTask(testScope, testMaxP, Range{7, 9}); !errors.Is(err, ErrRangeInUse) {
			e.t.Fatalf("overlapping OpenTask = %v", err)
		}
		other := e.open(testScope, Range{8, 16}) // adjacent is fine
		_ = other
		must(e.t, s.Close())
		e.open(testScope, Range{0, 8})
	}},
	{"invalid arguments", func(e *env) {
		for _, c := range []struct {
			name   string
			scope  Scope
			maxP   int
			groups Range
		}{
			{"empty operator", Scope{"t", "j", ""}, 16, Range{0, 16}},
			{"empty range", testScope, 16, Range{3, 3}},
			{"range past max", testScope, 16, Range{0, 17}},
			{"max parallelism zero", testScope, 0, Range{0, 1}},
		} {
			if _, err := e.backend.OpenTask(c.scope, c.maxP, c.groups); !errors.Is(err, ErrInvalid) {
				e.t.Fatalf("%s: OpenTask = %v", c.name, err)
			}
		}
		s := e.openAll()
		if err := s.TimerRegister(0, []byte("k"), nil, 1); !errors.Is(err, ErrInvalid) {
			e.t.Fatalf("timer kind 0: %v", err)
		}
	}},
	{"open starts empty", func(e *env) {
		s := e.openAll()
		must(e.t, s.ValuePut("v", []byte("k"), nil, []byte("left over"), 0))
		must(e.t, s.TimerRegister(EventTime, []byte("k"), nil, 5))
		must(e.t, s.Close())
		s = e.openAll()
		if _, ok := getValue(e.t, s, "v", "k", ""); ok {
			e.t.Fatal("a reopened range still holds the previous attempt's value")
		}
		if _, ok, err := s.NextTimer(EventTime); err != nil || ok {
			e.t.Fatalf("NextTimer after reopen = %v, %v", ok, err)
		}
	}},
	{"closed store", func(e *env) {
		s := e.openAll()
		must(e.t, s.Close())
		if err := s.ValuePut("v", []byte("k"), nil, nil, 0); !errors.Is(err, ErrClosed) {
			e.t.Fatalf("ValuePut after Close = %v", err)
		}
		if err := s.PopTimers(EventTime, 0, func(Timer) error { return nil }); !errors.Is(err, ErrClosed) {
			e.t.Fatalf("PopTimers after Close = %v", err)
		}
		must(e.t, s.Close())
	}},
	{"value ttl", func(e *env) {
		s := e.openAll()
		must(e.t, s.ValuePut("v", []byte("k"), nil, []byte("short"), time.Second))
		must(e.t, s.ValuePut("v", []byte("k2"), nil, []byte("forever"), 0))
		e.clock.advance(999 * time.Millisecond)
		if v, ok := getValue(e.t, s, "v", "k", ""); !ok || v != "short" {
			e.t.Fatalf("before expiry: %q, %v", v, ok)
		}
		// A write renews the TTL.
		must(e.t, s.ValuePut("v", []byte("k"), nil, []byte("renewed"), time.Second))
		e.clock.advance(999 * time.Millisecond)
		if v, ok := getValue(e.t, s, "v", "k", ""); !ok || v != "renewed" {
			e.t.Fatalf("after renewal: %q, %v", v, ok)
		}
		e.clock.advance(time.Millisecond)
		if v, ok := getValue(e.t, s, "v", "k", ""); ok {
			e.t.Fatalf("expired value read as %q", v)
		}
		if _, ok := getValue(e.t, s, "v", "k2", ""); !ok {
			e.t.Fatal("value without TTL expired")
		}
		// A sub-millisecond TTL still lasts until the clock moves.
		must(e.t, s.ValuePut("v", []byte("k3"), nil, []byte("x"), time.Nanosecond))
		if _, ok := getValue(e.t, s, "v", "k3", ""); !ok {
			e.t.Fatal("1ns TTL expired at once")
		}
	}},
	{"list and map ttl", func(e *env) {
		s := e.openAll()
		must(e.t, s.ListAppend("l", []byte("k"), nil, []byte("old"), time.Minute))
		must(e.t, s.ListAppend("l", []byte("k"), nil, []byte("keep"), 0))
		must(e.t, s.ListAppend("l", []byte("k"), nil, []byte("new"), time.Hour))
		must(e.t, s.MapPut("m", []byte("k"), nil, []byte("a"), []byte("1"), time.Minute))
		must(e.t, s.MapPut("m", []byte("k"), nil, []byte("b"), []byte("2"), time.Hour))
		e.clock.advance(time.Minute)
		equal(e.t, "list", getList(e.t, s, "l", "k", ""), []string{"keep", "new"})
		equal(e.t, "map", getMap(e.t, s, "m", "k", ""), []string{"b=2"})
		if _, ok, _ := s.MapGet("m", []byte("k"), nil, []byte("a"), nil); ok {
			e.t.Fatal("expired map entry read")
		}
		e.clock.advance(time.Hour)
		equal(e.t, "list", getList(e.t, s, "l", "k", ""), []string{"keep"})
		equal(e.t, "map", getMap(e.t, s, "m", "k", ""), nil)
	}},
	{"cleanup and snapshot drop expired", func(e *env) {
		s := e.openAll()
		for i := range 10 {
			k := []byte(strconv.Itoa(i))
			ttl := time.Duration(0)
			if i%2 == 0 {
				ttl = time.Second
			}
			must(e.t, s.ValuePut("v", k, nil, k, ttl))
			must(e.t, s.MapPut("m", k, nil, k, k, ttl))
			must(e.t, s.ListAppend("l", k, nil, k, ttl))
			must(e.t, s.ListAppend("l", k, nil, k, time.Second))
		}
		before := len(snapshot(e.t, s))
		e.clock.advance(time.Second)
		// Every list keeps an element only when i is odd.
		if got := len(snapshot(e.t, s)); got != before-15 {
			e.t.Fatalf("snapshot after expiry has %d entries, want %d", got, before-15)
		}
		n, err := s.CleanupExpired()
		must(e.t, err)
		if n != 5+5+15 {
			e.t.Fatalf("CleanupExpired removed %d, want 25", n)
		}
		if n, _ := s.CleanupExpired(); n != 0 {
			e.t.Fatalf("second CleanupExpired removed %d", n)
		}
		equal(e.t, "list 1", getList(e.t, s, "l", "1", ""), []string{"1"})
	}},
	{"timers fire once in timestamp order across key groups", func(e *env) {
		s := e.openAll()
		rng := rand.New(rand.NewPCG(1, 2))
		type tm struct {
			ts  int64
			key string
		}
		var all []tm
		groups := map[int]bool{}
		for i := range 500 {
			t := tm{ts: rng.Int64N(1000) - 200, key: "key-" + strconv.Itoa(i)}
			all = append(all, t)
			groups[KeyGroup([]byte(t.key), testMaxP)] = true
			must(e.t, s.TimerRegister(EventTime, []byte(t.key), []byte("ns"), t.ts))
			must(e.t, s.TimerRegister(EventTime, []byte(t.key), []byte("ns"), t.ts)) // idempotent
		}
		if len(groups) != testMaxP {
			e.t.Fatalf("keys cover %d groups", len(groups))
		}
		sort.Slice(all, func(i, j int) bool { return all[i].ts < all[j].ts })
		next, ok, err := s.NextTimer(EventTime)
		must(e.t, err)
		if !ok || next != all[0].ts {
			e.t.Fatalf("NextTimer = %d, %v; want %d", next, ok, all[0].ts)
		}
		seen := map[string]bool{}
		last := int64(math.MinInt64)
		count := 0
		for _, upTo := range []int64{-300, -5, 100, 100, 499, 2000} {
			must(e.t, s.PopTimers(EventTime, upTo, func(t Timer) error {
				if t.Timestamp > upTo || t.Timestamp < last {
					e.t.Fatalf("timer %d fired with upTo %d after %d", t.Timestamp, upTo, last)
				}
				if string(t.Namespace) != "ns" || t.Kind != EventTime || t.KeyGroup != KeyGroup(t.Key, testMaxP) {
					e.t.Fatalf("bad timer %+v", t)
				}
				id := fmt.Sprint(t.Timestamp, string(t.Key))
				if seen[id] {
					e.t.Fatalf("timer %s fired twice", id)
				}
				seen[id] = true
				last = t.Timestamp
				count++
				return nil
			}))
		}
		if count != len(all) {
			e.t.Fatalf("%d timers fired, want %d", count, len(all))
		}
		if _, ok, _ := s.NextTimer(EventTime); ok {
			e.t.Fatal("timers left after popping all")
		}
	}},
	{"timers with equal timestamps fire in a fixed order", func(e *env) {
		var orders [][]string
		for round, scope := range []Scope{{"t", "j", "a"}, {"t", "j", "b"}} {
			s := e.open(scope, Range{0, testMaxP})
			keys := make([]int, 200)
			for i := range keys {
				keys[i] = i
			}
			rand.New(rand.NewPCG(uint64(round), 9)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			for _, i := range keys {
				must(e.t, s.TimerRegister(ProcessingTime, []byte("k"+strconv.Itoa(i)), []byte{byte(i % 3)}, int64(i%2)))
			}
			orders = append(orders, popAll(e.t, s, ProcessingTime, 10))
		}
		equal(e.t, "second order", orders[1], orders[0])
		want := slices.Clone(orders[0])
		slices.SortFunc(want, compareTimerIDs)
		equal(e.t, "order by (ts, group, key, ns)", orders[0], want)
		equalTimerOrders.record(e.t, orders[0])
	}},
	{"timer kinds delete and re-entrant registration", func(e *env) {
		s := e.openAll()
		must(e.t, s.TimerRegister(EventTime, []byte("a"), nil, 10))
		must(e.t, s.TimerRegister(ProcessingTime, []byte("a"), nil, 5))
		must(e.t, s.TimerRegister(EventTime, []byte("b"), nil, 20))
		must(e.t, s.TimerRegister(EventTime, []byte("c"), nil, 30))
		must(e.t, s.TimerDelete(EventTime, []byte("b"), nil, 20))
		must(e.t, s.TimerDelete(EventTime, []byte("b"), nil, 20))
		must(e.t, s.TimerDelete(EventTime, []byte("nope"), nil, 1))
		var fired []string
		must(e.t, s.PopTimers(EventTime, 25, func(t Timer) error {
			fired = append(fired, fmt.Sprintf("%s@%d", t.Key, t.Timestamp))
			if t.Timestamp == 10 {
				// Due within this call: fires in it, after its earlier peers.
				must(e.t, s.TimerRegister(EventTime, []byte("d"), nil, 15))
				// Not due: stays.
				must(e.t, s.TimerRegister(EventTime, []byte("e"), nil, 26))
				// Deleting a pending one works from inside too.
				must(e.t, s.TimerDelete(EventTime, []byte("c"), nil, 30))
			}
			return nil
		}))
		equal(e.t, "fired", fired, []string{"a@10", "d@15"})
		next, ok, err := s.NextTimer(EventTime)
		must(e.t, err)
		if !ok || next != 26 {
			e.t.Fatalf("NextTimer = %d, %v", next, ok)
		}
		equal(e.t, "processing", popAll(e.t, s, ProcessingTime, 5), []string{fmt.Sprintf("5/%d/a/", KeyGroup([]byte("a"), testMaxP))})
	}},
	{"timers set again after firing or deletion", func(e *env) {
		s := e.openAll()
		g := KeyGroup([]byte("k"), testMaxP)
		fire := fmt.Sprintf("5/%d/k/", g)
		must(e.t, s.TimerRegister(EventTime, []byte("k"), nil, 5))
		equal(e.t, "first firing", popAll(e.t, s, EventTime, 10), []string{fire})
		must(e.t, s.TimerRegister(EventTime, []byte("k"), nil, 5))
		equal(e.t, "second firing", popAll(e.t, s, EventTime, 10), []string{fire})
		must(e.t, s.TimerRegister(EventTime, []byte("k"), nil, 5))
		must(e.t, s.TimerDelete(EventTime, []byte("k"), nil, 5))
		equal(e.t, "after delete", popAll(e.t, s, EventTime, 10), nil)
		must(e.t, s.TimerRegister(EventTime, []byte("k"), nil, 5))
		equal(e.t, "after delete and register", popAll(e.t, s, EventTime, 10), []string{fire})
	}},
	{"timer deleted by an earlier timer of its group does not fire", func(e *env) {
		s := e.openAll()
		for ts := int64(1); ts <= 3; ts++ {
			must(e.t, s.TimerRegister(EventTime, []byte("k"), nil, ts))
		}
		var fired []int64
		must(e.t, s.PopTimers(EventTime, 10, func(t Timer) error {
			fired = append(fired, t.Timestamp)
			if t.Timestamp == 1 {
				return s.TimerDelete(EventTime, []byte("k"), nil, 2)
			}
			return nil
		}))
		equal(e.t, "fired", fired, []int64{1, 3})
	}},
	{"timer registered below fired ones", func(e *env) {
		s := e.openAll()
		// Many timers in one key group, so the group's search starts after
		// the last one popped; a later timer set in the past must still fire.
		k := []byte("k")
		for ts := range int64(100) {
			must(e.t, s.TimerRegister(EventTime, k, []byte(strconv.Itoa(int(ts))), ts))
		}
		if got := len(popAll(e.t, s, EventTime, 49)); got != 50 {
			e.t.Fatalf("fired %d, want 50", got)
		}
		must(e.t, s.TimerRegister(EventTime, k, []byte("late"), 10))
		must(e.t, s.TimerRegister(EventTime, k, []byte("\x00"), 49))
		next, ok, err := s.NextTimer(EventTime)
		must(e.t, err)
		if !ok || next != 10 {
			e.t.Fatalf("NextTimer = %d, %v; want 10", next, ok)
		}
		got := popAll(e.t, s, EventTime, 51)
		g := KeyGroup(k, testMaxP)
		equal(e.t, "fired", got, []string{
			fmt.Sprintf("10/%d/k/late", g), fmt.Sprintf("49/%d/k/\x00", g),
			fmt.Sprintf("50/%d/k/50", g), fmt.Sprintf("51/%d/k/51", g),
		})
	}},
	{"snapshot and restore with rescale 2 to 3", func(e *env) {
		old := make([]Store, 2)
		var snaps [][][2][]byte
		const keys = 300
		for i := range old {
			old[i] = e.open(testScope, KeyGroupRange(i, 2, testMaxP))
		}
		owner := func(stores []Store, key []byte) Store {
			return stores[SubtaskFor(KeyGroup(key, testMaxP), len(stores), testMaxP)]
		}
		for i := range keys {
			k := []byte("key-" + strconv.Itoa(i))
			s := owner(old, k)
			must(e.t, s.ValuePut("v", k, nil, k, 0))
			must(e.t, s.ListAppend("l", k, []byte("w"), []byte("a"), 0))
			must(e.t, s.ListAppend("l", k, []byte("w"), k, 0))
			must(e.t, s.MapPut("m", k, nil, []byte("u"), k, 0))
			must(e.t, s.TimerRegister(EventTime, k, []byte("w"), int64(i)))
		}
		for _, s := range old {
			snaps = append(snaps, snapshot(e.t, s))
		}
		if n := len(snaps[0]) + len(snaps[1]); n != 4*keys {
			e.t.Fatalf("snapshots hold %d entries, want %d", n, 4*keys)
		}
		for _, snap := range snaps {
			if !slices.IsSortedFunc(snap, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) }) {
				e.t.Fatal("snapshot not in key order")
			}
		}
		// The new job is another backend: a different worker.
		restored := &env{t: e.t, kind: e.kind, backend: e.reopen(), clock: e.clock}
		next := make([]Store, 3)
		total := 0
		for i := range next {
			r := KeyGroupRange(i, 3, testMaxP)
			next[i] = restored.open(testScope, r)
			must(e.t, next[i].Restore(entries(snaps...)))
			snap := snapshot(e.t, next[i])
			for _, kv := range snap {
				if g := int(kv[0][0])<<8 | int(kv[0][1]); !r.Contains(g) {
					e.t.Fatalf("subtask %d (%s) restored key group %d", i, r, g)
				}
			}
			total += len(snap)
		}
		if total != 4*keys {
			e.t.Fatalf("restored %d entries, want %d", total, 4*keys)
		}
		for i := range keys {
			k := []byte("key-" + strconv.Itoa(i))
			s := owner(next, k)
			if v, ok := getValue(e.t, s, "v", string(k), ""); !ok || v != string(k) {
				e.t.Fatalf("%s: value %q, %v", k, v, ok)
			}
			equal(e.t, string(k)+" list", getList(e.t, s, "l", string(k), "w"), []string{"a", string(k)})
			equal(e.t, string(k)+" map", getMap(e.t, s, "m", string(k), ""), []string{"u=" + string(k)})
			// Appends after a restore go after the restored elements.
			must(e.t, s.ListAppend("l", k, []byte("w"), []byte("z"), 0))
			equal(e.t, string(k)+" list", getList(e.t, s, "l", string(k), "w"), []string{"a", string(k), "z"})
		}
		fired := 0
		for _, s := range next {
			last := int64(-1)
			must(e.t, s.PopTimers(EventTime, keys, func(t Timer) error {
				if t.Timestamp < last {
					e.t.Fatalf("restored timers out of order")
				}
				last = t.Timestamp
				fired++
				return nil
			}))
		}
		if fired != keys {
			e.t.Fatalf("%d restored timers fired, want %d", fired, keys)
		}
	}},
	{"restore refuses corrupt entries", func(e *env) {
		s := e.openAll()
		good := snapshotOf(e.t, e, func(s Store) { must(e.t, s.ValuePut("v", []byte("k"), nil, []byte("x"), 0)) })
		for _, c := range []struct {
			name string
			k, v []byte
		}{
			{"short key", []byte{0}, nil},
			{"unknown kind", []byte{0, 1, 9, 0, 0, 0}, []byte{0}},
			{"bad value header", good[0][0], []byte{7, 'x'}},
			{"empty value", good[0][0], nil},
			{"timer with value", mustKey(e.t, Key{Scope: testScope, Kind: KindTimer, Timer: EventTime, Key: []byte("k")}), []byte{1}},
		} {
			err := s.Restore(entries([][2][]byte{{c.k, c.v}}))
			if !errors.Is(err, ErrCorrupt) {
				e.t.Fatalf("%s: Restore = %v", c.name, err)
			}
		}
	}},
	{"restore skips expired entries", func(e *env) {
		snap := snapshotOf(e.t, e, func(s Store) {
			must(e.t, s.ValuePut("v", []byte("k"), nil, []byte("x"), time.Second))
			must(e.t, s.ValuePut("v", []byte("k2"), nil, []byte("y"), time.Hour))
		})
		e.clock.advance(2 * time.Second)
		s := e.openAll()
		must(e.t, s.Restore(entries(snap)))
		if n := len(snapshot(e.t, s)); n != 1 {
			e.t.Fatalf("restored %d entries, want 1", n)
		}
	}},
	{"snapshot format is the same on every backend", func(e *env) {
		snap := snapshotOf(e.t, e, func(s Store) {
			for i := range 50 {
				k := []byte(strconv.Itoa(i))
				must(e.t, s.ValuePut("v", k, k, k, time.Duration(i)*time.Second))
				must(e.t, s.ListAppend("l", k, nil, k, 0))
				must(e.t, s.ListAppend("l", k, nil, k, time.Minute))
				must(e.t, s.MapPut("m", k, nil, k, k, 0))
				must(e.t, s.TimerRegister(ProcessingTime, k, k, int64(-i)))
			}
		})
		var flat []string
		for _, kv := range snap {
			flat = append(flat, fmt.Sprintf("%x=%x", kv[0], kv[1]))
		}
		equalSnapshots.record(e.t, flat)
	}},
}

// snapshotOf runs fill on a scratch store of another operator and returns
// its snapshot (which Restore into testScope accepts: keys are scope-free).
func snapshotOf(t *testing.T, e *env, fill func(Store)) [][2][]byte {
	s := e.open(Scope{"scratch", "scratch", "scratch"}, Range{0, testMaxP})
	fill(s)
	snap := snapshot(t, s)
	must(t, s.Close())
	return snap
}

func mustKey(t testing.TB, k Key) []byte {
	b, err := EncodeKey(nil, k)
	must(t, err)
	return b[len(appendScope(nil, k.Scope)):]
}

// crossBackend checks that a result is the same on every backend.
type crossBackend struct{ first []string }

var (
	equalTimerOrders crossBackend
	equalSnapshots   crossBackend
)

func (c *crossBackend) record(t *testing.T, got []string) {
	t.Helper()
	if c.first == nil {
		c.first = got
		return
	}
	equal(t, "result compared with the first backend's", got, c.first)
}

func compareTimerIDs(a, b string) int {
	pa, pb := splitID(a), splitID(b)
	for i := range 2 {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	// Keys and namespaces compare as their length-prefixed encodings.
	return bytes.Compare(appendLP(appendLP(nil, []byte(pa[2])), []byte(pa[3])), appendLP(appendLP(nil, []byte(pb[2])), []byte(pb[3])))
}

func splitID(s string) []string {
	out := make([]string, 0, 4)
	for range 3 {
		i := bytes.IndexByte([]byte(s), '/')
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return append(out, s)
}

// keyInGroups returns the n-th key of the form "key-i" in groups.
func keyInGroups(groups Range, n int) []byte {
	for i := 0; ; i++ {
		k := []byte("key-" + strconv.Itoa(i))
		if groups.Contains(KeyGroup(k, testMaxP)) {
			if n == 0 {
				return k
			}
			n--
		}
	}
}

// reopen returns a second, empty backend of the same kind: another worker.
func (e *env) reopen() Backend { return e.kind.open(e.t, e.clock.now) }

func writeFile(path string) error { return os.WriteFile(path, []byte("x"), 0o644) }

func TestBehaviour(t *testing.T) {
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			for _, c := range behaviour {
				t.Run(c.name, func(t *testing.T) {
					clock := newFakeClock()
					c.run(&env{t: t, kind: bk, backend: bk.open(t, clock.now), clock: clock})
				})
			}
		})
	}
}

func TestPebbleDirectory(t *testing.T) {
	t.Run("refuses a directory it does not own", func(t *testing.T) {
		dir := t.TempDir()
		must(t, writeFile(dir+"/precious.txt"))
		if _, err := OpenPebble(DefaultPebbleConfig(dir)); !errors.Is(err, ErrDirNotOwned) {
			t.Fatalf("OpenPebble = %v", err)
		}
	})
	t.Run("wipes its own directory", func(t *testing.T) {
		dir := t.TempDir()
		p, err := OpenPebble(DefaultPebbleConfig(dir))
		must(t, err)
		s, err := p.OpenTask(testScope, testMaxP, Range{0, testMaxP})
		must(t, err)
		must(t, s.ValuePut("v", []byte("k"), nil, []byte("x"), 0))
		must(t, s.Close())
		must(t, p.Close())
		p, err = OpenPebble(DefaultPebbleConfig(dir))
		must(t, err)
		defer p.Close()
		if _, err := OpenPebble(DefaultPebbleConfig(dir)); err == nil {
			t.Fatal("a second OpenPebble on a directory in use succeeded")
		}
		s, err = p.OpenTask(testScope, testMaxP, Range{0, testMaxP})
		must(t, err)
		if _, ok := getValue(t, s, "v", "k", ""); ok {
			t.Fatal("state survived a restart of the backend")
		}
	})
	t.Run("closed backend", func(t *testing.T) {
		p, err := OpenPebble(DefaultPebbleConfig(t.TempDir()))
		must(t, err)
		s, err := p.OpenTask(testScope, testMaxP, Range{0, testMaxP})
		must(t, err)
		must(t, p.Close())
		if _, _, err := s.ValueGet("v", []byte("k"), nil, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("ValueGet after backend Close = %v", err)
		}
		if _, err := p.OpenTask(testScope, testMaxP, Range{0, 1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("OpenTask after Close = %v", err)
		}
	})
}

// TestStateSurvivesManyKeys writes far more state than the block cache holds and reads
// it all back: state larger than memory is what the Pebble backend is for.
func TestStateSurvivesManyKeys(t *testing.T) {
	n := 300_000
	if testing.Short() {
		n = 20_000
	}
	cfg := DefaultPebbleConfig(t.TempDir())
	cfg.BlockCacheBytes = 1 << 20
	p, err := OpenPebble(cfg)
	must(t, err)
	defer p.Close()
	s, err := p.OpenTask(testScope, 128, Range{0, 128})
	must(t, err)
	defer s.Close()
	val := make([]byte, 1024)
	fill := func(i int) {
		r := rand.New(rand.NewPCG(uint64(i), 0))
		for j := 0; j < len(val); j += 8 {
			x := r.Uint64()
			for b := range 8 {
				val[j+b] = byte(x >> (8 * b))
			}
		}
	}
	key := make([]byte, 0, 16)
	for i := range n {
		fill(i)
		key = strconv.AppendInt(key[:0], int64(i), 10)
		must(t, s.ValuePut("v", key, nil, val, 0))
	}
	var got []byte
	for i := range n {
		fill(i)
		key = strconv.AppendInt(key[:0], int64(i), 10)
		var ok bool
		got, ok, err = s.ValueGet("v", key, nil, got[:0])
		must(t, err)
		if !ok || !bytes.Equal(got, val) {
			t.Fatalf("key %d: found %v, %d bytes, mismatch", i, ok, len(got))
		}
	}
}

func TestValueGetDoesNotAllocate(t *testing.T) {
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			s, err := bk.open(t, time.Now).OpenTask(testScope, testMaxP, Range{0, testMaxP})
			must(t, err)
			defer s.Close()
			key, val := []byte("counter"), []byte("12345678")
			must(t, s.ValuePut("v", key, nil, val, time.Hour))
			dst := make([]byte, 0, 64)
			allocs := testing.AllocsPerRun(1000, func() {
				v, ok, err := s.ValueGet("v", key, nil, dst[:0])
				if err != nil || !ok || len(v) != len(val) {
					t.Fatalf("ValueGet = %q, %v, %v", v, ok, err)
				}
			})
			if allocs > 0 {
				t.Errorf("ValueGet allocates %.1f times per call", allocs)
			}
		})
	}
}
