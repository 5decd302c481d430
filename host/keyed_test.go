package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
	"github.com/eddy-stream/eddy/udfs/countrychange/detector"
)

// The version 2 imports against real modules (the example operators of
// udfs/ in C and Go, and testdata/keyed.c) and real state (state.Memory).

const maxP = 128

// newKeyedEngine shares the compilation cache of the other packages' tests:
// the Go-built operators take seconds to compile cold.
func newKeyedEngine(t *testing.T) *Engine {
	t.Helper()
	return newTestEngine(t, Config{CacheDir: filepath.Join(os.TempDir(), "eddy-test-wasm-cache")})
}

func loadUDF(t *testing.T, e *Engine, name string) *Module {
	t.Helper()
	m, err := e.Load(context.Background(), "../udfs/build/"+name+".wasm")
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return m
}

// newStore opens the state of one task owning groups of maxP key groups;
// now is the TTL clock (nil: the wall clock).
func newStore(t *testing.T, groups state.Range, now func() time.Time) state.Store {
	t.Helper()
	b, err := state.NewMemory(state.MemoryConfig{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.OpenTask(state.Scope{Tenant: "t", Job: "j", Operator: "op"}, maxP, groups)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); b.Close() })
	return st
}

var allGroups = state.Range{Start: 0, End: maxP}

func newKeyedInstance(t *testing.T, m *Module, name string, st state.Store, config string) *Instance {
	t.Helper()
	i, err := m.NewInstance(context.Background(), InstanceConfig{Name: name, State: st})
	if err != nil {
		t.Fatalf("NewInstance: %v", err)
	}
	t.Cleanup(func() { i.Close() })
	if err := i.Open([]byte(config)); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return i
}

// fireTimers pops the timers of kind due at upTo and hands them to the
// instance in batches, until none is due: what dataflow's operator does.
func fireTimers(t *testing.T, i *Instance, st state.Store, kind state.TimerKind, upTo int64, emit func([]abi.Record)) {
	t.Helper()
	if kind == state.EventTime {
		i.SetWatermark(upTo)
	}
	for {
		var batch []abi.Record
		err := st.PopTimers(kind, upTo, func(tm state.Timer) error {
			v := byte(abi.TimerEventTime)
			if tm.Kind == state.ProcessingTime {
				v = abi.TimerProcessingTime
			}
			batch = append(batch, abi.Record{Key: clone(tm.Key), Timestamp: tm.Timestamp, Value: []byte{v}})
			return nil
		})
		if err != nil {
			t.Fatalf("PopTimers: %v", err)
		}
		if len(batch) == 0 {
			return
		}
		if err := i.OnTimers(batch, emit); err != nil {
			t.Fatalf("OnTimers: %v", err)
		}
	}
}

func TestKeyedCounter(t *testing.T) {
	e := newKeyedEngine(t)
	for _, name := range []string{"counter-c", "counter-go"} {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, allGroups, nil)
			i := newKeyedInstance(t, loadUDF(t, e, name), "job/count[0]", st, "{}")
			want := map[string]uint64{}
			var c collector
			for b := range 5 {
				var recs []abi.Record
				for r := range 300 {
					key := fmt.Sprintf("key-%d", (b*300+r)%37)
					recs = append(recs, abi.Record{Key: []byte(key), Value: []byte("{}"), Timestamp: int64(r)})
				}
				if err := i.Process(recs, c.emit); err != nil {
					t.Fatalf("Process: %v", err)
				}
			}
			for n, r := range c.recs {
				want[string(r.Key)]++
				if got, w := string(r.Value), string(counting.AppendJSON(nil, r.Key, want[string(r.Key)])); got != w {
					t.Fatalf("output %d = %s, want %s", n, got, w)
				}
			}
			if len(c.recs) != 1500 || len(want) != 37 {
				t.Fatalf("%d outputs over %d keys, want 1500 over 37", len(c.recs), len(want))
			}
			for key, n := range want {
				v, ok, err := st.ValueGet(counting.StateName, []byte(key), nil, nil)
				if got, _ := counting.Decode(v, ok); err != nil || got != n {
					t.Errorf("stored count of %s = %d (%v), want %d", key, got, err, n)
				}
			}
		})
	}
}

func txn(card, country string, ts int64) abi.Record {
	return abi.Record{Key: []byte(card), Value: fmt.Appendf(nil, `{"card":%q,"country":%q}`, card, country), Timestamp: ts}
}

func TestKeyedCountryChangeTimers(t *testing.T) {
	e := newKeyedEngine(t)
	for _, name := range []string{"country-change-c", "country-change-go"} {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, allGroups, nil)
			i := newKeyedInstance(t, loadUDF(t, e, name), "job/alerts[0]", st, `{"window_ms":1000}`)
			var c collector
			in := []abi.Record{
				txn("a", "DE", 1000), txn("b", "FR", 1000),
				txn("a", "FR", 1500), // alert: DE→FR 500 ms apart
				txn("b", "FR", 2000),
				txn("a", "DE", 1200), // out of order: alert DE→FR, does not replace
			}
			if err := i.Process(in, c.emit); err != nil {
				t.Fatal(err)
			}
			want := []string{
				`{"card":"a","from":"DE","to":"FR","gap_ms":500,"ts":1500}`,
				`{"card":"a","from":"DE","to":"FR","gap_ms":300,"ts":1200}`,
			}
			if got := values(c.recs); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("alerts = %v\nwant %v", got, want)
			}
			// The cleanup timers: a at 2500 (its latest, 1500, + 1000), b at 3000.
			if ts, ok, _ := st.NextTimer(state.EventTime); !ok || ts != 2500 {
				t.Fatalf("next event-time timer = %d %v, want 2500", ts, ok)
			}
			fireTimers(t, i, st, state.EventTime, 2499, nil)
			if _, ok, _ := st.ValueGet(detector.StateName, []byte("a"), nil, nil); !ok {
				t.Fatal("a's state was cleared before its timer")
			}
			fireTimers(t, i, st, state.EventTime, 2500, nil)
			if _, ok, _ := st.ValueGet(detector.StateName, []byte("a"), nil, nil); ok {
				t.Fatal("a's state survived its cleanup timer")
			}
			if _, ok, _ := st.ValueGet(detector.StateName, []byte("b"), nil, nil); !ok {
				t.Fatal("b's state was cleared too early")
			}
			fireTimers(t, i, st, state.EventTime, math.MaxInt64, nil)
			if _, ok, _ := st.ValueGet(detector.StateName, []byte("b"), nil, nil); ok {
				t.Fatal("b's state survived the end of input")
			}
			// With the state gone, a transaction in another country is no alert.
			c.recs = nil
			if err := i.Process([]abi.Record{txn("a", "US", 2600)}, c.emit); err != nil {
				t.Fatal(err)
			}
			if len(c.recs) != 0 {
				t.Fatalf("alert after the state expired: %v", values(c.recs))
			}
		})
	}
}

func values(recs []abi.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// run sends one command record per value to the keyed fixture and returns
// what it emitted.
func run(t *testing.T, i *Instance, key string, cmds ...string) []string {
	t.Helper()
	recs := make([]abi.Record, len(cmds))
	for n, c := range cmds {
		recs[n] = abi.Record{Key: []byte(key), Value: []byte(c), Timestamp: int64(n)}
	}
	var c collector
	if err := i.Process(recs, c.emit); err != nil {
		t.Fatalf("Process %q: %v", cmds, err)
	}
	for _, r := range c.recs {
		if string(r.Key) != key {
			t.Fatalf("output with key %q, want %q", r.Key, key)
		}
	}
	return values(c.recs)
}

func TestKeyedImports(t *testing.T) {
	e := newTestEngine(t, Config{})
	var nowMs atomic.Int64
	nowMs.Store(1_000_000)
	clock := func() time.Time { return time.UnixMilli(nowMs.Load()) }
	st := newStore(t, allGroups, clock)
	i := newKeyedInstance(t, loadFixture(t, e, "keyed"), "job/keyed[0]", st, "")
	long := strings.Repeat("x", 5000)

	steps := []struct {
		name string
		key  string
		cmds []string
		want []string
	}{
		{"value absent", "k1", []string{"g"}, []string{"absent"}},
		{"value put get", "k1", []string{"p ab", "g"}, []string{"ab"}},
		{"value empty", "k1", []string{"p", "g"}, []string{""}},
		{"value larger than the first buffer", "k1", []string{"p " + long, "g"}, []string{long}},
		{"keys are separate", "k2", []string{"g"}, []string{"absent"}},
		{"value clear", "k1", []string{"c v", "g"}, []string{"absent"}},
		{"list empty", "k1", []string{"l"}, []string{"absent"}},
		{"list append", "k1", []string{"a one", "a", "a " + long, "l"}, []string{string(testkit.Frames("one", "", long))}},
		{"list clear", "k1", []string{"c l", "l"}, []string{"absent"}},
		{"map absent", "k1", []string{"G x", "e"}, []string{"absent", "absent"}},
		{"map put get", "k1", []string{"P b=2", "P a=1", "P c=" + long, "G a", "G b", "G zz"},
			[]string{"1", "2", "absent"}},
		{"map entries in user-key order", "k1", []string{"e"}, []string{string(testkit.Frames("a", "1", "b", "2", "c", long))}},
		{"map delete", "k1", []string{"D b", "G b", "e"}, []string{"absent", string(testkit.Frames("a", "1", "c", long))}},
		{"map clear", "k1", []string{"c m", "e"}, []string{"absent"}},
		{"kinds share names without colliding", "k3", []string{"p v", "a l", "P m=m", "c l", "g", "G m"},
			[]string{"v", "m"}},
		{"watermark before the first", "k1", []string{"w"}, []string{strconv.FormatInt(math.MinInt64, 10)}},
	}
	for _, s := range steps {
		if got := run(t, i, s.key, s.cmds...); fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Fatalf("%s: got %q\nwant %q", s.name, got, s.want)
		}
	}

	t.Run("ttl", func(t *testing.T) {
		if got := run(t, i, "k1", "t fresh", "T"); fmt.Sprint(got) != "[fresh]" {
			t.Fatalf("got %q", got)
		}
		nowMs.Add(999)
		if got := run(t, i, "k1", "T"); fmt.Sprint(got) != "[fresh]" {
			t.Fatalf("before the TTL: got %q", got)
		}
		nowMs.Add(1)
		if got := run(t, i, "k1", "T"); fmt.Sprint(got) != "[absent]" {
			t.Fatalf("at the TTL: got %q", got)
		}
	})

	t.Run("watermark and processing time", func(t *testing.T) {
		i.SetWatermark(12345)
		if got := run(t, i, "k1", "w"); fmt.Sprint(got) != "[12345]" {
			t.Fatalf("watermark: got %q", got)
		}
		before := time.Now().UnixMilli()
		got := run(t, i, "k1", "n")
		ms, err := strconv.ParseInt(got[0], 10, 64)
		if err != nil || ms < before || ms > time.Now().UnixMilli() {
			t.Fatalf("processing_time = %q, want the wall clock near %d", got, before)
		}
	})

	t.Run("timers", func(t *testing.T) {
		run(t, i, "k1", "r e 200", "r e 100", "r e 100", "r p 50", "r e 300", "d e 300", "d e 999")
		run(t, i, "k2", "r e 100")
		var c collector
		fireTimers(t, i, st, state.EventTime, 250, c.emit)
		want := []string{"k1:fired e 100", "k2:fired e 100", "k1:fired e 200"}
		if k2first := state.KeyGroup([]byte("k2"), maxP) < state.KeyGroup([]byte("k1"), maxP); k2first {
			want[0], want[1] = want[1], want[0]
		}
		if got := keyed(c.recs); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("event-time timers fired %q, want %q", got, want)
		}
		c.recs = nil
		fireTimers(t, i, st, state.EventTime, 1000, c.emit)
		if len(c.recs) != 0 {
			t.Fatalf("deleted timer fired: %q", keyed(c.recs))
		}
		fireTimers(t, i, st, state.ProcessingTime, 60, c.emit)
		if got := keyed(c.recs); fmt.Sprint(got) != "[k1:fired p 50]" {
			t.Fatalf("processing-time timers fired %q", got)
		}
	})

	t.Run("timers set by timers", func(t *testing.T) {
		// k4's on_timer sets a timer at ts+1 three times: all due at 2000.
		run(t, i, "k4", "p 3", "r e 1990")
		var c collector
		fireTimers(t, i, st, state.EventTime, 2000, c.emit)
		want := []string{"k4:fired e 1990", "k4:fired e 1991", "k4:fired e 1992", "k4:fired e 1993"}
		if got := keyed(c.recs); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("fired %q, want %q", got, want)
		}
	})

	if err := i.Finish(nil); err != nil {
		t.Fatalf("Finish: %v", err)
	}
}

func keyed(recs []abi.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Key) + ":" + string(r.Value)
	}
	return out
}

// keyOutside returns a key whose key group is outside groups.
func keyOutside(groups state.Range) string {
	for n := 0; ; n++ {
		k := fmt.Sprintf("other-%d", n)
		if !groups.Contains(state.KeyGroup([]byte(k), maxP)) {
			return k
		}
	}
}

// keyInside returns a key whose key group is in groups.
func keyInside(groups state.Range) string {
	for n := 0; ; n++ {
		k := fmt.Sprintf("mine-%d", n)
		if groups.Contains(state.KeyGroup([]byte(k), maxP)) {
			return k
		}
	}
}

func TestKeyedHostile(t *testing.T) {
	e := newTestEngine(t, Config{})
	half := state.KeyGroupRange(0, 2, maxP)
	mine, other := keyInside(half), keyOutside(half)
	cases := []struct {
		name   string
		config string
		cmd    string
		marks  []error
		words  []string
	}{
		{"dst outside memory", "", "X", []error{ErrBadPointer}, []string{"eddy.state_get", "outside the guest memory"}},
		{"key outside memory", "", "K", []error{ErrBadPointer}, []string{"eddy.state_get", "outside the guest memory"}},
		{"declare outside eddy_open", "", "Y", []error{ErrTrap}, []string{"eddy.state_declare", "only valid during eddy_open"}},
		{"undeclared id", "", "I", []error{ErrTrap}, []string{"eddy.state_get", "no state with id 99"}},
		{"wrong kind", "", "W", []error{ErrTrap}, []string{"eddy.state_list", `"v"`, "value state, not list state"}},
		{"key of another task", "", "O " + other, []error{ErrTrap, state.ErrNotOwned},
			[]string{"eddy.state_put", "not one this task owns"}},
		{"bad timer kind", "", "Z", []error{ErrTrap}, []string{"eddy.timer_register", "timer kind 5"}},
		{"bad state kind", "badkind", "", []error{ErrTrap}, []string{"eddy.state_declare", "kind 7"}},
		{"name declared with another kind", "rekind", "", []error{ErrTrap}, []string{"declared before as value state, now as list state"}},
	}
	m := loadFixture(t, e, "keyed")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t, half, nil)
			i, err := m.NewInstance(context.Background(), InstanceConfig{Name: "job/keyed[0]", State: st})
			if err != nil {
				t.Fatal(err)
			}
			defer i.Close()
			err = i.Open([]byte(c.config))
			if c.cmd != "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				err = i.Process([]abi.Record{{Key: []byte(mine), Value: []byte(c.cmd)}}, nil)
			}
			for _, mark := range c.marks {
				if !errors.Is(err, mark) {
					t.Errorf("err = %v, want it to match %v", err, mark)
				}
			}
			if err == nil || !strings.HasPrefix(err.Error(), "operator job/keyed[0]: ") || !containsAll(err.Error(), c.words...) ||
				strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line naming the operator and containing %q", err, c.words)
			}
			// The instance is done for; the engine is not.
			if err2 := i.Process(nil, nil); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("after the trap: %v, want the same error", err2)
			}
		})
	}
	checkEchoWorks(t, e)

	t.Run("record key of another task", func(t *testing.T) {
		// A record routed to the wrong task: the real operator's state
		// access fails rather than writing state the task does not own.
		st := newStore(t, half, nil)
		i := newKeyedInstance(t, loadUDF(t, newKeyedEngine(t), "counter-c"), "job/count[0]", st, "{}")
		if err := i.Process([]abi.Record{{Key: []byte(mine), Value: []byte("{}")}}, nil); err != nil {
			t.Fatal(err)
		}
		err := i.Process([]abi.Record{{Key: []byte(other), Value: []byte("{}")}}, nil)
		if !errors.Is(err, state.ErrNotOwned) || !errors.Is(err, ErrTrap) {
			t.Fatalf("err = %v, want a trap matching state.ErrNotOwned", err)
		}
	})
}

func TestKeyedNeedsKeyBy(t *testing.T) {
	e := newKeyedEngine(t)
	for _, name := range []string{"counter-c", "counter-go"} {
		t.Run(name, func(t *testing.T) {
			i, err := loadUDF(t, e, name).NewInstance(context.Background(), InstanceConfig{Name: "job/count[1]"})
			if err != nil {
				t.Fatal(err)
			}
			defer i.Close()
			err = i.Open([]byte("{}"))
			if !errors.Is(err, ErrTrap) || !containsAll(err.Error(), "eddy.state_declare", "keyed state needs key_by on node count") {
				t.Fatalf("Open on a node without key_by: %v", err)
			}
		})
	}
}

func TestKeyedValidation(t *testing.T) {
	e := newTestEngine(t, Config{})
	cases := []struct {
		fixture string
		want    string
	}{
		{"keyed_v1", "module testdata/keyed_v1.wasm imports eddy.state_get, which needs ABI version 2, but declares version 1"},
		{"keyed_no_on_timer", `module testdata/keyed_no_on_timer.wasm: imports "eddy"."timer_register" but does not export "eddy_on_timer"`},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			_, err := e.Load(context.Background(), "testdata/"+c.fixture+".wasm")
			if !errors.Is(err, ErrInvalidModule) || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalidModule starting %q", err, c.want)
			}
		})
	}
	// Version 2 modules are accepted and say so.
	if m := loadFixture(t, e, "keyed"); m.ABIVersion() != 2 || !m.HasOnTimer() {
		t.Fatalf("keyed: version %d, on_timer %v", m.ABIVersion(), m.HasOnTimer())
	}
	if m := loadFixture(t, e, "echo"); m.HasOnTimer() {
		t.Fatal("echo has no eddy_on_timer")
	}
}

func TestOnTimersWithoutExport(t *testing.T) {
	e := newTestEngine(t, Config{})
	i := newTestInstance(t, loadFixture(t, e, "echo"), "job/echo[0]")
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}
	err := i.OnTimers([]abi.Record{{Key: []byte("k"), Value: []byte{0}, Timestamp: 1}}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not export eddy_on_timer") {
		t.Fatalf("err = %v", err)
	}
	checkEchoWorks(t, e) // and the instance is still usable:
	var c collector
	if err := i.Process([]abi.Record{{Value: []byte("v")}}, c.emit); err != nil || len(c.recs) != 1 {
		t.Fatalf("Process after OnTimers failed: %v %v", err, c.recs)
	}
}

// counterBatch is 256 records over 64 keys.
func counterBatch() []abi.Record {
	recs := make([]abi.Record, 256)
	for j := range recs {
		recs[j] = abi.Record{Key: fmt.Appendf(nil, "card-%04d", j%64), Value: []byte(`{}`), Timestamp: int64(j)}
	}
	return recs
}

// TestKeyedStateCallsDoNotAllocate: once the keys exist and the buffers have
// grown, a batch through the counter (a state_get and a state_put per
// record) allocates nothing on the host side.
func TestKeyedStateCallsDoNotAllocate(t *testing.T) {
	e := newTestEngine(t, Config{})
	st := newStore(t, allGroups, nil)
	i := newKeyedInstance(t, loadUDF(t, e, "counter-c"), "job/count[0]", st, "{}")
	recs := counterBatch()
	emitted := 0
	emit := func(out []abi.Record) { emitted += len(out) }
	for range 3 {
		if err := i.Process(recs, emit); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := i.Process(recs, emit); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch of %d state-using records, want 0", allocs, len(recs))
	}
}

// BenchmarkKeyedCounter measures a keyed operator's per-record cost: the
// counter (C) does a state_get, a state_put and emits, per record, on the
// memory backend.
func BenchmarkKeyedCounter(b *testing.B) {
	e := newTestEngine(b, Config{})
	bk, err := state.NewMemory(state.MemoryConfig{})
	if err != nil {
		b.Fatal(err)
	}
	st, err := bk.OpenTask(state.Scope{Tenant: "t", Job: "j", Operator: "op"}, maxP, allGroups)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	m, err := e.Load(context.Background(), "../udfs/build/counter-c.wasm")
	if err != nil {
		b.Fatal(err)
	}
	i, err := m.NewInstance(context.Background(), InstanceConfig{Name: "bench/count[0]", State: st})
	if err != nil {
		b.Fatal(err)
	}
	defer i.Close()
	if err := i.Open(nil); err != nil {
		b.Fatal(err)
	}
	recs := counterBatch()
	emit := func([]abi.Record) {}
	b.ReportAllocs()
	for b.Loop() {
		if err := i.Process(recs, emit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
