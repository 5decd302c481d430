package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/storage"
)

// The version 4 imports (schema versions of value state) against the real
// counters of udfs/: counter-c (version 1 of the operator, ABI version 2,
// a u64 per key) and counter-v2-c (ABI version 4, JSON text in schema 1,
// converting a u64 on read), on both backends, across checkpoints.

// schemaBackends open a fresh backend of each kind.
var schemaBackends = []struct {
	name string
	open func(t *testing.T) state.Backend
}{
	{"memory", func(t *testing.T) state.Backend {
		b, err := state.NewMemory(state.DefaultMemoryConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}},
	{"pebble", func(t *testing.T) state.Backend {
		cfg := state.DefaultPebbleConfig(t.TempDir())
		cfg.BlockCacheBytes, cfg.MemTableBytes = 8<<20, 4<<20
		b, err := state.OpenPebble(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}},
}

var counterScope = state.Scope{Tenant: "t", Job: "j", Operator: "count"}

func openTask(t *testing.T, b state.Backend) state.Store {
	t.Helper()
	st, err := b.OpenTask(counterScope, maxP, allGroups)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// countRecords hands the counter one record per key in keys, in one batch,
// and returns its output values in order.
func countRecords(t *testing.T, i *Instance, keys ...string) []string {
	t.Helper()
	recs := make([]abi.Record, len(keys))
	for n, k := range keys {
		recs[n] = abi.Record{Key: []byte(k), Value: []byte("{}"), Timestamp: int64(n)}
	}
	var c collector
	if err := i.Process(recs, c.emit); err != nil {
		t.Fatalf("Process: %v", err)
	}
	return values(c.recs)
}

// checkpoint snapshots st into blobs (the real checkpoint path: entry file
// or Pebble tables) and restores it into a fresh task of the backend to.
func checkpoint(t *testing.T, st state.Store, blobs storage.Store, to state.Backend) state.Store {
	t.Helper()
	ctx := context.Background()
	m, err := state.SnapshotTo(ctx, st, blobs, "cp/")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	restored := openTask(t, to)
	if err := state.RestoreFrom(ctx, restored, blobs, "cp/", []state.SnapshotManifest{m}); err != nil {
		t.Fatal(err)
	}
	return restored
}

func storedCount(t *testing.T, st state.Store, key string) (string, uint32) {
	t.Helper()
	v, schema, ok, err := st.ValueGetSchema("count", []byte(key), nil, nil)
	if err != nil || !ok {
		t.Fatalf("count of %s: %v, %v", key, ok, err)
	}
	return string(v), schema
}

// TestSchemaSwapCounter is the swap of issue 13's state test, at the host:
// version 1 counts a, a, a, b (storing u64s, schema 0); a checkpoint; version
// 2 on the restored state reads them as schema 0, converts them and goes
// on (a: 4, 5; b: 2), storing JSON text in schema 1; after another
// checkpoint version 2 reads its own values as schema 1; and version 1's
// old state_get, handed a value version 2 wrote, gets its bytes alone.
func TestSchemaSwapCounter(t *testing.T) {
	e := newKeyedEngine(t)
	type swap struct{ v1, v2, src, dst int } // indexes of modules and schemaBackends
	modules := []string{"counter-c", "counter-v2-c", "counter-go", "counter-v2-go"}
	var swaps []swap
	for src := range schemaBackends {
		for dst := range schemaBackends {
			swaps = append(swaps, swap{0, 1, src, dst})
		}
	}
	// The Go versions, and across languages: the state is the host's.
	swaps = append(swaps, swap{2, 3, 0, 1}, swap{0, 3, 1, 0}, swap{2, 1, 0, 0})
	loaded := make([]*Module, len(modules))
	for n, name := range modules {
		loaded[n] = loadUDF(t, e, name)
		if want := uint32(2 + 2*(n%2)); loaded[n].ABIVersion() != want {
			t.Fatalf("%s: ABI version %d, want %d", name, loaded[n].ABIVersion(), want)
		}
	}
	for _, sw := range swaps {
		src, dst := schemaBackends[sw.src], schemaBackends[sw.dst]
		v1, v2 := loaded[sw.v1], loaded[sw.v2]
		t.Run(modules[sw.v1]+"-to-"+modules[sw.v2]+"/"+src.name+"-to-"+dst.name, func(t *testing.T) {
			blobs, err := storage.Open(context.Background(), "file://"+t.TempDir(), storage.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer blobs.Close()
			st := openTask(t, src.open(t))

			old := newKeyedInstance(t, v1, "job/count[0]", st, "{}")
			equalLines(t, "version 1", countRecords(t, old, "a", "a", "a", "b"), []string{
				`{"key":"a","count":1}`, `{"key":"a","count":2}`, `{"key":"a","count":3}`, `{"key":"b","count":1}`})
			old.Close()
			if v, schema := storedCount(t, st, "a"); schema != 0 || binary.LittleEndian.Uint64([]byte(v)) != 3 {
				t.Fatalf("version 1 stored %x, schema %d; want u64 3, schema 0", v, schema)
			}

			st = checkpoint(t, st, blobs, dst.open(t))
			swapped := newKeyedInstance(t, v2, "job/count[0]", st, "{}")
			equalLines(t, "version 2 after the swap", countRecords(t, swapped, "a", "b", "a"), []string{
				`{"key":"a","count":4,"v":2}`, `{"key":"b","count":2,"v":2}`, `{"key":"a","count":5,"v":2}`})
			swapped.Close()
			if v, schema := storedCount(t, st, "a"); v != `{"n":5}` || schema != 1 {
				t.Fatalf("version 2 stored %q, schema %d; want {\"n\":5}, schema 1", v, schema)
			}

			st = checkpoint(t, st, blobs, src.open(t))
			again := newKeyedInstance(t, v2, "job/count[0]", st, "{}")
			equalLines(t, "version 2 after a restore", countRecords(t, again, "a", "c"), []string{
				`{"key":"a","count":6,"v":2}`, `{"key":"c","count":1,"v":2}`})
			again.Close()
			if v, schema := storedCount(t, st, "c"); v != `{"n":1}` || schema != 1 {
				t.Fatalf("a new key: stored %q, schema %d", v, schema)
			}

			// The old state_get returns the bytes version 2 wrote, without
			// their schema: version 1 does not know them, and says so.
			back, err := v1.NewInstance(context.Background(), InstanceConfig{Name: "job/count[0]", State: st})
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			if err := back.Open([]byte("{}")); err != nil {
				t.Fatal(err)
			}
			err = back.Process([]abi.Record{{Key: []byte("a"), Value: []byte("{}")}}, nil)
			if err == nil || !strings.Contains(err.Error(), "the stored count has 7 bytes, want 8") {
				t.Fatalf("version 1 on a schema-1 value: %v, want it to see the 7 bytes of {\"n\":6}", err)
			}
		})
	}
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSchemaValidation: a module importing a version 4 function while
// declaring version 3 is refused when it is loaded, with one line.
func TestSchemaValidation(t *testing.T) {
	e := newTestEngine(t, Config{})
	_, err := e.Load(context.Background(), "testdata/schema_v3.wasm")
	want := "module testdata/schema_v3.wasm imports eddy.state_get2, which needs ABI version 4, but declares version 3"
	if !errors.Is(err, ErrInvalidModule) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v, want ErrInvalidModule starting %q", err, want)
	}
	if m := loadFixture(t, e, "schema_hostile"); m.ABIVersion() != 4 {
		t.Fatalf("schema_hostile: version %d, want 4", m.ABIVersion())
	}
}

// TestSchemaHostile: misuses of the version 4 imports trap the task with
// one line naming the import.
func TestSchemaHostile(t *testing.T) {
	e := newTestEngine(t, Config{})
	m := loadFixture(t, e, "schema_hostile")
	cases := []struct {
		name   string
		config string
		mark   error
		words  []string
	}{
		{"schema on a list", "l", ErrTrap, []string{"eddy.state_declare2", `"events"`, "schema version 1 on list state"}},
		{"schema changed", "t", ErrTrap, []string{"eddy.state_declare2", `"count"`, "schema version 1, now with 2"}},
		{"schema_ptr outside memory", "", ErrBadPointer, []string{"eddy.state_get2", "outside the guest memory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t, allGroups, nil)
			i, err := m.NewInstance(context.Background(), InstanceConfig{Name: "job/schema[0]", State: st})
			if err != nil {
				t.Fatal(err)
			}
			defer i.Close()
			err = i.Open([]byte(c.config))
			if c.config == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				err = i.Process([]abi.Record{{Key: []byte("k"), Value: []byte("{}")}}, nil)
			}
			if !errors.Is(err, c.mark) || !strings.HasPrefix(err.Error(), "operator job/schema[0]: ") ||
				!containsAll(err.Error(), c.words...) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line matching %v with %q", err, c.mark, c.words)
			}
		})
	}
	checkEchoWorks(t, e)
}

// TestSchemaGetDoesNotAllocate: state_get2 on the hot path is as cheap as
// state_get.
func TestSchemaGetDoesNotAllocate(t *testing.T) {
	e := newKeyedEngine(t)
	st := newStore(t, allGroups, nil)
	i := newKeyedInstance(t, loadUDF(t, e, "counter-v2-c"), "job/count[0]", st, "{}")
	batch := make([]abi.Record, 64)
	for n := range batch {
		batch[n] = abi.Record{Key: []byte(fmt.Sprintf("k%d", n%8)), Value: []byte("{}")}
	}
	emit := func([]abi.Record) {}
	// Until every count has 3 digits, which it keeps over the runs below:
	// a longer value may need a new buffer in the backend.
	for range 13 {
		if err := i.Process(batch, emit); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(20, func() {
		if err := i.Process(batch, emit); err != nil {
			t.Fatal(err)
		}
	}); n > 0 {
		t.Errorf("%v allocations per batch, want 0", n)
	}
}
