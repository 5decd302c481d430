//go:build !wasip1

// The fake host below replaces the wasm imports, so these tests run
// natively. udfs/ runs the SDK inside real Wasm guests.

package keyed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

type addr struct {
	id  int32
	key string
}

type timerAddr struct {
	kind int32
	key  string
	ts   int64
}

type decl struct {
	kind  int32
	name  string
	ttlMs int64
}

// schemaOf is the fake host's memory of schema versions (ABI version 4).
type schemaOf struct {
	declared map[int32]uint32 // by state id
	stored   map[addr]uint32  // of each value
}

// fakeKeyedHost is a fake host for both halves of the ABI: it keeps keyed
// state in maps, records emitted records and failures, and checks what the
// real host checks (declarations only while opening, state of the right
// kind).
type fakeKeyedHost struct {
	t        *testing.T
	decls    []decl
	values   map[addr][]byte
	lists    map[addr][][]byte
	maps     map[addr]map[string][]byte
	timers   map[timerAddr]bool
	wm, now  int64
	caps     []int // dst_cap of every read
	corrupt  []byte
	records  []abi.Record
	failures []string
	logs     []string
	schemas  schemaOf
}

func (h *fakeKeyedHost) Emit(batch []byte) {
	recs, err := abi.DecodeBatch(batch, nil)
	if err != nil {
		h.t.Fatalf("emitted batch does not decode: %v", err)
	}
	for _, r := range recs {
		h.records = append(h.records, abi.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp})
	}
}
func (h *fakeKeyedHost) Log(level int32, msg string) { h.logs = append(h.logs, msg) }
func (h *fakeKeyedHost) Fail(msg string)             { h.failures = append(h.failures, msg) }

func (h *fakeKeyedHost) declare(kind int32, name string, ttlMs int64) int32 {
	if !guest.Opening() {
		panic(fmt.Sprintf("trap: state_declare(%q) outside eddy_open", name))
	}
	for id, d := range h.decls {
		if d.name == name {
			return int32(id)
		}
	}
	h.decls = append(h.decls, decl{kind, name, ttlMs})
	return int32(len(h.decls) - 1)
}

func (h *fakeKeyedHost) declare2(kind int32, name string, ttlMs int64, schema uint32) int32 {
	id := h.declare(kind, name, ttlMs)
	h.schemas.declared[id] = schema
	return id
}

func (h *fakeKeyedHost) get2(id int32, key, dst []byte, schema *uint32) int32 {
	n := h.get(id, key, dst)
	*schema = 0
	if n >= 0 {
		*schema = h.schemas.stored[addr{id, string(key)}]
	}
	return n
}

func (h *fakeKeyedHost) check(id int32, kind int32) {
	if id < 0 || int(id) >= len(h.decls) || h.decls[id].kind != kind {
		panic(fmt.Sprintf("trap: state %d is not of kind %d", id, kind))
	}
}

func (h *fakeKeyedHost) answer(b []byte, ok bool, dst []byte) int32 {
	h.caps = append(h.caps, len(dst))
	if h.corrupt != nil {
		b, ok = h.corrupt, true
	}
	if !ok {
		return -1
	}
	if len(b) <= len(dst) {
		copy(dst, b)
	}
	return int32(len(b))
}

func (h *fakeKeyedHost) get(id int32, key, dst []byte) int32 {
	h.check(id, int32(kindValue))
	v, ok := h.values[addr{id, string(key)}]
	return h.answer(v, ok, dst)
}

func (h *fakeKeyedHost) list(id int32, key, dst []byte) int32 {
	h.check(id, int32(kindList))
	l := h.lists[addr{id, string(key)}]
	return h.answer(testkit.Frames(l...), len(l) > 0, dst)
}

func (h *fakeKeyedHost) mapGet(id int32, key, userKey, dst []byte) int32 {
	h.check(id, int32(kindMap))
	v, ok := h.maps[addr{id, string(key)}][string(userKey)]
	return h.answer(v, ok, dst)
}

func (h *fakeKeyedHost) mapEntries(id int32, key, dst []byte) int32 {
	h.check(id, int32(kindMap))
	m := h.maps[addr{id, string(key)}]
	var parts [][]byte
	for _, uk := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, []byte(uk), m[uk])
	}
	return h.answer(testkit.Frames(parts...), len(m) > 0, dst)
}

func (h *fakeKeyedHost) put(id int32, key, value []byte) {
	h.check(id, int32(kindValue))
	h.values[addr{id, string(key)}] = bytes.Clone(value)
	h.schemas.stored[addr{id, string(key)}] = h.schemas.declared[id]
}

func (h *fakeKeyedHost) append(id int32, key, value []byte) {
	h.check(id, int32(kindList))
	a := addr{id, string(key)}
	h.lists[a] = append(h.lists[a], bytes.Clone(value))
}

func (h *fakeKeyedHost) mapPut(id int32, key, userKey, value []byte) {
	h.check(id, int32(kindMap))
	a := addr{id, string(key)}
	if h.maps[a] == nil {
		h.maps[a] = map[string][]byte{}
	}
	h.maps[a][string(userKey)] = bytes.Clone(value)
}

func (h *fakeKeyedHost) clear(id int32, key []byte) {
	a := addr{id, string(key)}
	delete(h.values, a)
	delete(h.lists, a)
	delete(h.maps, a)
}

func (h *fakeKeyedHost) mapDelete(id int32, key, userKey []byte) {
	h.check(id, int32(kindMap))
	delete(h.maps[addr{id, string(key)}], string(userKey))
}

func (h *fakeKeyedHost) timer(register bool, kind int32, key []byte, ts int64) {
	t := timerAddr{kind, string(key), ts}
	if register {
		h.timers[t] = true
	} else {
		delete(h.timers, t)
	}
}

func (h *fakeKeyedHost) watermark() int64      { return h.wm }
func (h *fakeKeyedHost) processingTime() int64 { return h.now }

// install makes op the registered operator and a new fake host the host,
// and forgets every declared state.
func install(t *testing.T, op guest.Operator) *fakeKeyedHost {
	h := &fakeKeyedHost{t: t, values: map[addr][]byte{}, lists: map[addr][][]byte{}, maps: map[addr]map[string][]byte{}, timers: map[timerAddr]bool{},
		schemas: schemaOf{declared: map[int32]uint32{}, stored: map[addr]uint32{}}}
	undo := guest.SetTestHost(h, op)
	testHost = h
	states, pending, opened = map[string]*state{}, nil, false
	t.Cleanup(func() {
		undo()
		testHost = nil
	})
	return h
}

// operator is a configurable test operator.
type operator struct {
	open    func() error
	process func(r *abi.Record) error
	onTimer func(t Timer) error
}

func (o *operator) Open([]byte) error {
	if o.open != nil {
		return o.open()
	}
	return nil
}
func (o *operator) Process(r *abi.Record) error { return o.process(r) }
func (o *operator) Close() error                { return nil }

// timerOperator is an operator that handles timers.
type timerOperator struct{ operator }

func (o *timerOperator) OnTimer(t Timer) error { return o.onTimer(t) }

func batchOf(recs ...abi.Record) []byte { return abi.AppendBatch(nil, recs) }

func rec(key, value string) abi.Record {
	return abi.Record{Key: []byte(key), Value: []byte(value), Timestamp: 1}
}

func mustOK(t *testing.T, h *fakeKeyedHost, status int32) {
	t.Helper()
	if status != abi.StatusOK {
		t.Fatalf("status %d: %q", status, h.failures)
	}
}

func TestVersion(t *testing.T) {
	if guest.Version != 2 {
		t.Fatalf("importing keyed leaves the module at version %d", guest.Version)
	}
}

func TestValueState(t *testing.T) {
	var v *Value
	big := strings.Repeat("v", 3*initialBuffer+5)
	op := &operator{
		open: func() error { v = ValueState("v"); return nil },
		process: func(r *abi.Record) error {
			old, ok := v.Get()
			switch string(r.Value) {
			case "clear":
				v.Clear()
			case "big":
				v.Put([]byte(big))
			default:
				v.Put(r.Value)
			}
			emitOld(r.Key, old, ok)
			return nil
		},
	}
	h := install(t, op)
	mustOK(t, h, guest.Open([]byte("{}")))
	mustOK(t, h, guest.Process(batchOf(rec("a", "1"), rec("b", "2"), rec("a", "3"), rec("a", "big"), rec("a", "clear"), rec("a", "4"), rec("a", "5"))))
	want := []string{"a:-", "b:-", "a:1", "a:3", "a:" + big, "a:-", "a:4"}
	if got := emitted(h); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if h.decls[0] != (decl{int32(kindValue), "v", 0}) {
		t.Errorf("declared %+v", h.decls)
	}
	// The big value was read with the retry protocol: a first call with
	// the initial buffer, then one with a buffer at least that large.
	if !slices.Contains(h.caps, initialBuffer) || slices.Max(h.caps) < len(big) {
		t.Errorf("read buffer sizes %v", h.caps)
	}
}

// TestValueSchema: a value state declared with Schema writes its version
// and GetSchema reports the version of what it reads: a value an older
// module wrote (schema 0) is converted, one this module wrote comes back
// with its own.
func TestValueSchema(t *testing.T) {
	defer func(v int32) { guest.Version = v }(guest.Version)
	guest.Version = schemaVersion // what importing keyed/schema does
	var v *Value
	op := &operator{
		open: func() error { v = ValueState("count", Schema(1)); return nil },
		process: func(r *abi.Record) error {
			b, schema, ok := v.GetSchema()
			guest.Emit(&abi.Record{Key: r.Key, Value: fmt.Appendf(nil, "%s:%d:%v", b, schema, ok)})
			v.Put(r.Value)
			return nil
		},
	}
	h := install(t, op)
	mustOK(t, h, guest.Open([]byte("{}")))
	h.values[addr{0, "old"}] = []byte("u64") // written by version 1: schema 0
	mustOK(t, h, guest.Process(batchOf(rec("old", "a"), rec("old", "b"), rec("new", "c"))))
	want := []string{"u64:0:true", "a:1:true", ":0:false"}
	if got := emitted(h); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if h.schemas.declared[0] != 1 {
		t.Errorf("declared schema %d, want 1", h.schemas.declared[0])
	}
}

// TestSchemaMisuse: Schema without ABI version 4, on a list, or changed
// between declarations fails Open with one line.
func TestSchemaMisuse(t *testing.T) {
	cases := []struct {
		name    string
		version int32
		open    func()
		want    string
	}{
		{"without version 4", 2, func() { ValueState("v", Schema(1)) },
			`panic: keyed: state "v": Schema needs ABI version 4; import _ "github.com/eddy-stream/eddy/sdk/go/keyed/schema"`},
		{"on a list", 4, func() { ListState("l", Schema(1)) },
			`panic: keyed: state "l": schema version 1 on list state; schema versions are for value state`},
		{"changed", 4, func() { ValueState("v", Schema(1)); ValueState("v", Schema(2)) },
			`panic: keyed: state "v" declared twice: with schema version 1, and with 2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func(v int32) { guest.Version = v }(guest.Version)
			guest.Version = c.version
			h := install(t, &operator{open: func() error { c.open(); return nil }})
			if st := guest.Open([]byte("{}")); st != abi.StatusError || len(h.failures) != 1 || !strings.HasPrefix(h.failures[0], c.want) {
				t.Fatalf("status %d, failures %q; want one starting %q", st, h.failures, c.want)
			}
		})
	}
}

// emitOld emits "key:old" ("-" when absent).
func emitOld(key, old []byte, ok bool) {
	v := "-"
	if ok {
		v = string(old)
	}
	guest.Emit(&abi.Record{Key: key, Value: []byte(string(key) + ":" + v)})
}

func emitted(h *fakeKeyedHost) []string {
	var out []string
	for _, r := range h.records {
		out = append(out, string(r.Value))
	}
	return out
}

func TestListState(t *testing.T) {
	var l *List
	op := &operator{
		open: func() error { l = ListState("l"); return nil },
		process: func(r *abi.Record) error {
			switch v := string(r.Value); v {
			case "get":
				var parts []string
				for _, e := range l.Get() {
					parts = append(parts, string(e))
				}
				guest.Emit(&abi.Record{Value: []byte(fmt.Sprintf("%s%q", r.Key, parts))})
			case "clear":
				l.Clear()
			default:
				l.Add(r.Value)
			}
			return nil
		},
	}
	h := install(t, op)
	mustOK(t, h, guest.Open(nil))
	long := strings.Repeat("x", 1000)
	mustOK(t, h, guest.Process(batchOf(rec("a", "get"), rec("a", "1"), rec("b", "2"), rec("a", ""), rec("a", long), rec("a", "get"),
		rec("b", "get"), rec("a", "clear"), rec("a", "get"))))
	want := []string{`a[]`, fmt.Sprintf(`a["1" "" %q]`, long), `b["2"]`, `a[]`}
	if got := emitted(h); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestMapState(t *testing.T) {
	var m *Map
	var log []string
	op := &operator{
		open: func() error { m = MapState("m"); return nil },
		process: func(r *abi.Record) error {
			cmd, arg, _ := strings.Cut(string(r.Value), " ")
			switch cmd {
			case "put":
				uk, v, _ := strings.Cut(arg, "=")
				m.Put([]byte(uk), []byte(v))
			case "get":
				v, ok := m.Get([]byte(arg))
				log = append(log, fmt.Sprintf("get %s %s %v", arg, v, ok))
			case "delete":
				m.Delete([]byte(arg))
			case "entries":
				m.Entries(func(uk, v []byte) bool {
					log = append(log, fmt.Sprintf("%s=%s", uk, v))
					return string(uk) != arg // stop after arg
				})
			case "nested":
				// A nested Entries and writes inside Entries do not disturb
				// the outer iteration.
				m.Entries(func(uk, v []byte) bool {
					n := 0
					m.Entries(func([]byte, []byte) bool { n++; return true })
					m.Put([]byte("zz"+string(uk)), v)
					log = append(log, fmt.Sprintf("%s=%s/%d", uk, v, n))
					return true
				})
			case "clear":
				m.Clear()
			}
			return nil
		},
	}
	h := install(t, op)
	mustOK(t, h, guest.Open(nil))
	mustOK(t, h, guest.Process(batchOf(rec("k", "put b=2"), rec("k", "put a=1"), rec("k", "put c=3"), rec("other", "put a=9"),
		rec("k", "get a"), rec("k", "get x"), rec("k", "entries"), rec("k", "entries b"), rec("k", "delete b"), rec("k", "entries"),
		rec("k", "nested"), rec("k", "clear"), rec("k", "entries"), rec("k", "get a"))))
	want := []string{"get a 1 true", "get x  false", "a=1", "b=2", "c=3", "a=1", "b=2", "a=1", "c=3",
		"a=1/2", "c=3/3", "get a  false"}
	if !slices.Equal(log, want) {
		t.Fatalf("got\n %q\nwant\n %q", log, want)
	}
}

func TestDeclare(t *testing.T) {
	t.Run("before Open", func(t *testing.T) {
		h := install(t, &operator{process: func(*abi.Record) error { return nil }})
		// As from an init function: the host learns of it in eddy_open.
		v := ValueState("early", TTL(1500*time.Microsecond))
		if v.s.id != -1 || len(h.decls) != 0 {
			t.Fatalf("declared before eddy_open: %+v", h.decls)
		}
		mustOK(t, h, guest.Open(nil))
		if v.s.id != 0 || h.decls[0] != (decl{int32(kindValue), "early", 2}) {
			t.Fatalf("id %d, declared %+v", v.s.id, h.decls)
		}
	})
	t.Run("in Open", func(t *testing.T) {
		var a, b *Value
		var l *List
		h := install(t, &operator{open: func() error {
			a, b, l = ValueState("a", TTL(time.Hour)), ValueState("a", TTL(time.Hour)), ListState("l", TTL(-time.Second))
			return nil
		}})
		mustOK(t, h, guest.Open(nil))
		if a == b || a.s != b.s || len(h.decls) != 2 || h.decls[0].ttlMs != 3600000 || h.decls[1].ttlMs != 0 || l.s.id != 1 {
			t.Fatalf("declared %+v", h.decls)
		}
	})
	failures := []struct {
		name, want string
		open       func()
		process    func()
	}{
		{"another kind", `panic: keyed: state "x" declared twice: as value state with TTL 0 ms, and as map state with TTL 0 ms`,
			func() { ValueState("x"); MapState("x") }, nil},
		{"another TTL", `panic: keyed: state "x" declared twice: as list state with TTL 0 ms, and as list state with TTL 1000 ms`,
			func() { ListState("x"); ListState("x", TTL(time.Second)) }, nil},
		{"after Open", `panic: keyed: state "late" declared after Open: declare state in Open or in an init function`,
			nil, func() { ValueState("late") }},
		{"use in Open", `panic: keyed: state "v" used outside Process and OnTimer, where there is no current key`,
			func() { ValueState("v").Get() }, nil},
		{"timer in Open", `panic: keyed: a timer set or deleted outside Process and OnTimer, where there is no current key`,
			func() { RegisterEventTimeTimer(5) }, nil},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			op := &operator{process: func(*abi.Record) error { tc.process(); return nil }}
			if tc.open != nil {
				op.open = func() error { tc.open(); return nil }
			}
			h := install(t, op)
			st := guest.Open(nil)
			if tc.process != nil {
				mustOK(t, h, st)
				st = guest.Process(batchOf(rec("k", "v")))
			}
			if st != abi.StatusError || len(h.failures) != 1 || h.failures[0] != tc.want {
				t.Fatalf("status %d, failures %q, want %q", st, h.failures, tc.want)
			}
		})
	}
}

func TestTimers(t *testing.T) {
	var count *Value
	var fired []string
	op := &timerOperator{operator{
		open: func() error { count = ValueState("count"); return nil },
		process: func(r *abi.Record) error {
			count.Put(r.Value)
			RegisterEventTimeTimer(r.Timestamp + 10)
			RegisterProcessingTimeTimer(r.Timestamp + 20)
			RegisterEventTimeTimer(r.Timestamp + 30)
			DeleteEventTimeTimer(r.Timestamp + 30)
			DeleteProcessingTimeTimer(r.Timestamp + 99) // not set: nothing happens
			return nil
		},
	}}
	op.onTimer = func(tm Timer) error {
		v, _ := count.Get() // the timer's key's state
		fired = append(fired, fmt.Sprintf("%s %s@%d %s current %s wm %d now %d", tm.Kind, tm.Key, tm.Timestamp, v, CurrentKey(), CurrentWatermark(), ProcessingTime()))
		if tm.Kind == ProcessingTimeTimer {
			count.Clear()
			guest.Emit(&abi.Record{Key: tm.Key, Value: []byte("expired"), Timestamp: tm.Timestamp})
		}
		return nil
	}
	h := install(t, op)
	h.wm, h.now = 40, 50
	mustOK(t, h, guest.Open(nil))
	mustOK(t, h, guest.Process(batchOf(abi.Record{Key: []byte("a"), Value: []byte("A"), Timestamp: 1}, abi.Record{Key: []byte("b"), Value: []byte("B"), Timestamp: 2})))
	want := map[timerAddr]bool{{0, "a", 11}: true, {1, "a", 21}: true, {0, "b", 12}: true, {1, "b", 22}: true}
	if !maps.Equal(h.timers, want) {
		t.Fatalf("timers %v, want %v", h.timers, want)
	}
	// The host hands over due timers in order, each with its key.
	mustOK(t, h, onTimers(batchOf(
		abi.Record{Key: []byte("a"), Value: []byte{0}, Timestamp: 11},
		abi.Record{Key: []byte("b"), Value: []byte{0}, Timestamp: 12},
		abi.Record{Key: []byte("a"), Value: []byte{1}, Timestamp: 21},
		abi.Record{Key: []byte("a"), Value: []byte{0}, Timestamp: 22},
	)))
	wantFired := []string{
		"event time a@11 A current a wm 40 now 50",
		"event time b@12 B current b wm 40 now 50",
		"processing time a@21 A current a wm 40 now 50",
		"event time a@22  current a wm 40 now 50",
	}
	if !slices.Equal(fired, wantFired) {
		t.Fatalf("fired\n %q\nwant\n %q", fired, wantFired)
	}
	if len(h.records) != 1 || string(h.records[0].Key) != "a" || h.records[0].Timestamp != 21 {
		t.Fatalf("emitted %+v", h.records)
	}
	if CurrentKey() != nil {
		t.Errorf("a current key %q after the call", CurrentKey())
	}
}

func TestTimerFailures(t *testing.T) {
	tests := []struct {
		name  string
		op    guest.Operator
		batch []byte
		want  string
	}{
		{"no handler", &operator{}, batchOf(abi.Record{Key: []byte("k"), Value: []byte{0}}), errNoHandler.Error()},
		{"bad kind", &timerOperator{}, batchOf(abi.Record{Key: []byte("k"), Value: []byte{2}}), "keyed: timer batch: a timer's value is \"\\x02\", want one byte: 0 (event time) or 1 (processing time)"},
		{"no kind", &timerOperator{}, batchOf(abi.Record{Key: []byte("k")}), "keyed: timer batch: a timer's value is \"\", want one byte: 0 (event time) or 1 (processing time)"},
		{"malformed", &timerOperator{}, []byte("EDB1"), "eddy: timer batch: abi: malformed batch: 4 bytes is shorter than the 8-byte header"},
		{"handler error", &timerOperator{operator{onTimer: func(Timer) error { return errors.New("boom") }}}, batchOf(abi.Record{Key: []byte("k"), Value: []byte{1}}), "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if to, ok := tc.op.(*timerOperator); ok && to.onTimer == nil {
				to.onTimer = func(Timer) error { return nil }
			}
			h := install(t, tc.op)
			if st := onTimers(tc.batch); st != abi.StatusError || len(h.failures) != 1 || h.failures[0] != tc.want {
				t.Fatalf("status %d, failures %q, want %q", st, h.failures, tc.want)
			}
		})
	}
}

func TestMalformedAnswers(t *testing.T) {
	tests := []struct {
		name    string
		corrupt []byte
		use     func(l *List, m *Map)
		want    string
	}{
		{"list frame too long", []byte{9, 0, 0, 0, 'x'}, func(l *List, m *Map) { l.Get() }, `panic: keyed: the host returned a malformed list for state "l"`},
		{"list short length", []byte{1, 0}, func(l *List, m *Map) { l.Get() }, `panic: keyed: the host returned a malformed list for state "l"`},
		{"map entry without value", testkit.Frames([]byte("uk")), func(l *List, m *Map) { m.Entries(func(_, _ []byte) bool { panic("called") }) },
			`panic: keyed: the host returned malformed map entries for state "m"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l *List
			var m *Map
			h := install(t, &operator{
				open:    func() error { l, m = ListState("l"), MapState("m"); return nil },
				process: func(*abi.Record) error { tc.use(l, m); return nil },
			})
			mustOK(t, h, guest.Open(nil))
			h.corrupt = tc.corrupt
			if st := guest.Process(batchOf(rec("k", "v"))); st != abi.StatusError || len(h.failures) != 1 || h.failures[0] != tc.want {
				t.Fatalf("status %d, failures %q, want %q", st, h.failures, tc.want)
			}
		})
	}
}

func TestProcessNoAllocations(t *testing.T) {
	var v *Value
	var buf []byte
	h := install(t, &operator{
		open: func() error { v = ValueState("n"); return nil },
		process: func(r *abi.Record) error {
			var n uint64
			if b, ok := v.Get(); ok {
				n = binary.LittleEndian.Uint64(b)
			}
			buf = binary.LittleEndian.AppendUint64(buf[:0], n+1)
			v.Put(buf)
			RegisterEventTimeTimer(r.Timestamp)
			return nil
		},
	})
	mustOK(t, h, guest.Open(nil))
	var in []abi.Record
	for i := range 100 {
		in = append(in, abi.Record{Key: []byte("key"), Value: []byte("x"), Timestamp: int64(i)})
	}
	batch := batchOf(in...)
	testHost = nopHost{}
	guest.Process(batch) // size the decode slice and the read buffer once
	if n := testing.AllocsPerRun(50, func() { guest.Process(batch) }); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
}

// nopHost answers every read with 8 zero bytes and ignores writes, so that
// allocations are the SDK's alone.
type nopHost struct{}

func (nopHost) declare(int32, string, int64) int32 { return 0 }
func (nopHost) get(_ int32, _, dst []byte) int32 {
	clear(dst[:8])
	return 8
}
func (nopHost) declare2(int32, string, int64, uint32) int32 { return 0 }
func (h nopHost) get2(id int32, key, dst []byte, schema *uint32) int32 {
	*schema = 0
	return h.get(id, key, dst)
}
func (nopHost) list(int32, []byte, []byte) int32           { return -1 }
func (nopHost) mapGet(int32, []byte, []byte, []byte) int32 { return -1 }
func (nopHost) mapEntries(int32, []byte, []byte) int32     { return -1 }
func (nopHost) put(int32, []byte, []byte)                  {}
func (nopHost) append(int32, []byte, []byte)               {}
func (nopHost) mapPut(int32, []byte, []byte, []byte)       {}
func (nopHost) clear(int32, []byte)                        {}
func (nopHost) mapDelete(int32, []byte, []byte)            {}
func (nopHost) timer(bool, int32, []byte, int64)           {}
func (nopHost) watermark() int64                           { return 0 }
func (nopHost) processingTime() int64                      { return 0 }
