// Package keyed gives Eddy operators on a keyed node (one with key_by)
// keyed state, timers and event time, in the style of Flink's keyed state:
// an operator declares typed state handles once, and every access addresses
// the current key, which the SDK sets to the key of the record being
// processed or of the timer firing. It implements the version 2 part of the
// Eddy ABI (abi/ABI.md, "Version 2: keyed state, timers, time").
//
//	type counter struct{ count *keyed.Value }
//
//	func (c *counter) Open(config []byte) error {
//		c.count = keyed.ValueState("count")
//		return nil
//	}
//
//	func (c *counter) Process(r *eddy.Record) error {
//		var n uint64
//		if b, ok := c.count.Get(); ok {
//			n = binary.LittleEndian.Uint64(b)
//		}
//		c.count.Put(binary.LittleEndian.AppendUint64(c.buf[:0], n+1))
//		…
//	}
//
// Importing this package makes the module declare ABI version 2 (its init
// sets the version eddy_abi_version reports) and export eddy_on_timer; a
// module that does not import it stays at version 1. That is why this is a
// package of its own rather than part of package eddy: the Go linker drops
// the imports of functions a module does not call, but nothing in a module
// can tell at run time which functions were linked, and the version must be
// known before eddy_open.
//
// A version 2 module runs only on a keyed node: the host traps the state,
// timer and time imports elsewhere.
//
// Like package eddy, this package only works inside a Wasm guest; on other
// platforms its functions panic.
package keyed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// abiVersion is the ABI version that defines keyed state and timers.
const abiVersion = 2

func init() {
	guest.Version = abiVersion
	guest.OnOpen(declarePending)
}

// The kinds of state, numbered as state_declare numbers them.
type kind int32

const (
	kindValue kind = 0
	kindList  kind = 1
	kindMap   kind = 2
)

func (k kind) String() string {
	switch k {
	case kindValue:
		return "value"
	case kindList:
		return "list"
	case kindMap:
		return "map"
	}
	return fmt.Sprintf("kind %d", int32(k))
}

// Option configures a state declaration.
type Option func(*options)

type options struct {
	ttl    time.Duration
	schema uint32
	// declare2 is hostDeclare2, set by Schema only, so that a module that
	// never calls Schema does not import state_declare2 (which would need
	// ABI version 4).
	declare2 func(kind int32, name string, ttlMs int64, schema uint32) int32
}

// schemaVersion is the ABI version that defines schema versions of state.
const schemaVersion = 4

// Schema says that this module writes the state's values in schema
// version n of its own numbering (0, the default, is what a module that
// does not say writes, and what every older version of it wrote). Reads
// with Value.GetSchema report the version each value was written with, so
// a new version of an operator can convert what an older one stored (see
// abi/ABI.md, "Version 4"). Only value state has schema versions.
//
// It needs ABI version 4: the module must also import package
// github.com/eddy-stream/eddy/sdk/go/keyed/schema (for its effect only,
// with a blank import), which makes it declare that version.
func Schema(n uint32) Option {
	return func(o *options) { o.schema, o.declare2 = n, hostDeclare2 }
}

// TTL makes the state of a key expire d after it was last written; d ≤ 0
// (the default) means no expiry. Expired state reads as absent. The host
// counts in whole milliseconds, so a positive d is rounded up to one.
func TTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// state is one declared state. Handles of the same name share it.
type state struct {
	name     string
	kind     kind
	ttlMs    int64
	schema   uint32
	declare2 func(kind int32, name string, ttlMs int64, schema uint32) int32 // see options
	id       int32                                                           // -1 until declared to the host
}

var (
	// states are the declared states by name: a name has one kind.
	states = map[string]*state{}
	// pending are the states declared before eddy_open (from init
	// functions), which the host learns of at the start of eddy_open: the
	// ABI allows state_declare only there.
	pending []*state
	// opened is true once eddy_open has started: from then on a state is
	// declared at once, and only during eddy_open.
	opened bool
)

func declare(name string, k kind, opts []Option) *state {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ttlMs := int64(0)
	if o.ttl > 0 {
		ttlMs = int64((o.ttl + time.Millisecond - 1) / time.Millisecond)
	}
	if o.schema != 0 && k != kindValue {
		panic(fmt.Sprintf("keyed: state %q: schema version %d on %s state; schema versions are for value state", name, o.schema, k))
	}
	if o.schema != 0 && guest.Version < schemaVersion {
		panic(fmt.Sprintf("keyed: state %q: Schema needs ABI version %d; import _ \"github.com/eddy-stream/eddy/sdk/go/keyed/schema\"", name, schemaVersion))
	}
	if s, ok := states[name]; ok {
		if s.kind != k || s.ttlMs != ttlMs {
			panic(fmt.Sprintf("keyed: state %q declared twice: as %s state with TTL %d ms, and as %s state with TTL %d ms",
				name, s.kind, s.ttlMs, k, ttlMs))
		}
		if s.schema != o.schema {
			panic(fmt.Sprintf("keyed: state %q declared twice: with schema version %d, and with %d", name, s.schema, o.schema))
		}
		return s
	}
	s := &state{name: name, kind: k, ttlMs: ttlMs, id: -1}
	if o.schema != 0 {
		s.schema, s.declare2 = o.schema, o.declare2
	}
	switch {
	case guest.Opening():
		s.declare()
	case !opened:
		pending = append(pending, s)
	default:
		panic(fmt.Sprintf("keyed: state %q declared after Open: declare state in Open or in an init function", name))
	}
	states[name] = s
	return s
}

func (s *state) declare() {
	var id int32
	if s.declare2 != nil {
		id = s.declare2(int32(s.kind), s.name, s.ttlMs, s.schema)
	} else {
		id = hostDeclare(int32(s.kind), s.name, s.ttlMs)
	}
	if id < 0 {
		panic(fmt.Sprintf("keyed: state_declare(%q) returned %d", s.name, id))
	}
	s.id = id
}

func declarePending() {
	opened = true
	for len(pending) > 0 {
		s := pending[0]
		pending = pending[1:]
		s.declare()
	}
	pending = nil
}

// key returns the current key for an access to s, or panics when there is
// none.
func (s *state) key() []byte {
	k, ok := guest.CurrentKey()
	if !ok {
		panic(fmt.Sprintf("keyed: state %q used outside Process and OnTimer, where there is no current key", s.name))
	}
	if s.id < 0 {
		panic(fmt.Sprintf("keyed: state %q used before eddy_open declared it", s.name))
	}
	return k
}

// reader is one of the imports that copy state into a guest buffer
// (hostGet, hostList, hostMapGet, hostMapEntries). Each is a function of
// its own, rather than one function switching on an operation, so that a
// module imports only what it calls.
type reader func(id int32, key, userKey, dst []byte) int32

// initialBuffer is the first capacity of a handle's read buffer: most
// values fit, so most reads take one host call.
const initialBuffer = 256

// read runs op into *buf and returns the bytes read, or false when the
// host reports nothing (-1). A result larger than the buffer means "call
// again with a buffer that large" (ABI.md), which read does after growing
// *buf, at least doubling it so that a list that grows by an element per
// record does not reallocate on every read.
func read(buf *[]byte, op reader, s *state, key, userKey []byte) ([]byte, bool) {
	if *buf == nil {
		*buf = make([]byte, initialBuffer)
	}
	for {
		b := (*buf)[:cap(*buf)]
		n := op(s.id, key, userKey, b)
		switch {
		case n == -1:
			return nil, false
		case n < -1:
			panic(fmt.Sprintf("keyed: the host returned %d reading state %q", n, s.name))
		case int(n) <= len(b):
			return b[:n], true
		}
		*buf = nil // let the collector reuse the old buffer
		*buf = make([]byte, max(int(n), 2*len(b)))
	}
}

// Value is a value state: one byte string per key.
type Value struct {
	s   *state
	buf []byte
}

// ValueState declares a value state called name and returns its handle.
// Call it in Open or in an init function (declaring later panics); the same
// name with the same kind and options gives another handle to the same
// state.
func ValueState(name string, opts ...Option) *Value {
	return &Value{s: declare(name, kindValue, opts)}
}

// Get returns the current key's value and whether there is one. The slice
// is the handle's buffer: it is valid until the next Get on v, which reuses
// it.
func (v *Value) Get() ([]byte, bool) { return read(&v.buf, hostGet, v.s, v.s.key(), nil) }

// GetSchema is Get that also returns the schema version the value was
// written with: the version declared with Schema by the module that wrote
// it, 0 for one that declared none (or wrote before schema versions
// existed), and 0 when there is no value. It needs ABI version 4, as
// Schema does.
func (v *Value) GetSchema() ([]byte, uint32, bool) {
	b, ok := read(&v.buf, hostGetSchema, v.s, v.s.key(), nil)
	if !ok {
		return nil, 0, false
	}
	return b, readSchema, true
}

// readSchema is where state_get2 writes the schema version of the value
// it read: a variable of the package, so that its address stays valid.
var readSchema uint32

func hostGetSchema(id int32, key, _, dst []byte) int32 { return hostGet2(id, key, dst, &readSchema) }

// Put sets the current key's value to b (copied), in the schema version
// declared with Schema (0 by default).
func (v *Value) Put(b []byte) { hostPut(v.s.id, v.s.key(), b) }

// Clear removes the current key's value.
func (v *Value) Clear() { hostClear(v.s.id, v.s.key()) }

// List is a list state: a list of byte strings per key, in insertion order.
type List struct {
	s     *state
	buf   []byte
	elems [][]byte
}

// ListState declares a list state called name; see ValueState.
func ListState(name string, opts ...Option) *List {
	return &List{s: declare(name, kindList, opts)}
}

// Add appends b (copied) to the current key's list.
func (l *List) Add(b []byte) { hostAppend(l.s.id, l.s.key(), b) }

// Get returns the current key's list, oldest first, or nil when it is
// empty. The slices are in the handle's buffer: they are valid until the
// next Get on l, which reuses it.
func (l *List) Get() [][]byte {
	b, ok := read(&l.buf, hostList, l.s, l.s.key(), nil)
	l.elems = l.elems[:0]
	if !ok {
		return nil
	}
	for len(b) > 0 {
		var elem []byte
		if elem, b, ok = frame(b); !ok {
			panic(fmt.Sprintf("keyed: the host returned a malformed list for state %q", l.s.name))
		}
		l.elems = append(l.elems, elem)
	}
	return l.elems
}

// Clear empties the current key's list.
func (l *List) Clear() { hostClear(l.s.id, l.s.key()) }

// frame splits "u32 len, bytes" off the front of b.
func frame(b []byte) (elem, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n : 4+n], b[4+n:], true
}

// Map is a map state: a map from user keys to values per key.
type Map struct {
	s    *state
	buf  []byte // Get
	scan []byte // Entries
}

// MapState declares a map state called name; see ValueState.
func MapState(name string, opts ...Option) *Map {
	return &Map{s: declare(name, kindMap, opts)}
}

// Get returns the value of userKey in the current key's map and whether
// there is one. The slice is valid until the next Get on m.
func (m *Map) Get(userKey []byte) ([]byte, bool) {
	return read(&m.buf, hostMapGet, m.s, m.s.key(), userKey)
}

// Put sets userKey to value (both copied) in the current key's map.
func (m *Map) Put(userKey, value []byte) { hostMapPut(m.s.id, m.s.key(), userKey, value) }

// Delete removes userKey from the current key's map.
func (m *Map) Delete(userKey []byte) { hostMapDelete(m.s.id, m.s.key(), userKey) }

// Entries calls fn for every entry of the current key's map in user-key
// byte order, until fn returns false. The slices are valid during the call
// only. fn may use m, including Put, Delete and a nested Entries: it sees
// the entries as they were when Entries began.
func (m *Map) Entries(fn func(userKey, value []byte) bool) {
	// Take the buffer, so that a nested Entries reads into its own.
	buf := m.scan
	m.scan = nil
	b, ok := read(&buf, hostMapEntries, m.s, m.s.key(), nil)
	defer func() {
		if m.scan == nil {
			m.scan = buf
		}
	}()
	if !ok {
		return
	}
	// Check the whole answer before the first call, so that a bad one
	// fails without partial effects.
	for rest := b; len(rest) > 0; {
		if _, _, rest, ok = entry(rest); !ok {
			panic(fmt.Sprintf("keyed: the host returned malformed map entries for state %q", m.s.name))
		}
	}
	for len(b) > 0 {
		var uk, v []byte
		uk, v, b, _ = entry(b)
		if !fn(uk, v) {
			return
		}
	}
}

// entry splits "u32 uk_len, uk, u32 v_len, v" off the front of b.
func entry(b []byte) (userKey, value, rest []byte, ok bool) {
	if userKey, rest, ok = frame(b); ok {
		value, rest, ok = frame(rest)
	}
	return userKey, value, rest, ok
}

// Clear empties the current key's map.
func (m *Map) Clear() { hostClear(m.s.id, m.s.key()) }

// TimerKind says which clock a timer follows.
type TimerKind int32

// The timer kinds, numbered as the ABI numbers them.
const (
	// EventTimeTimer fires when the task's watermark reaches its time.
	EventTimeTimer TimerKind = 0
	// ProcessingTimeTimer fires when the wall clock reaches its time.
	ProcessingTimeTimer TimerKind = 1
)

func (k TimerKind) String() string {
	switch k {
	case EventTimeTimer:
		return "event time"
	case ProcessingTimeTimer:
		return "processing time"
	}
	return fmt.Sprintf("TimerKind(%d)", int32(k))
}

// Timer is a timer that fired.
type Timer struct {
	Kind      TimerKind
	Timestamp int64 // ms since the Unix epoch
	// Key is the key the timer was set for, which is also the current key
	// during OnTimer. It aliases the host's batch: valid until OnTimer
	// returns.
	Key []byte
}

// TimerHandler is implemented by an operator that sets timers. The SDK
// calls OnTimer once per fired timer, in the order the host hands them over
// (event-time timers in timestamp order), with the current key set to the
// timer's: state accesses and timer calls in OnTimer address that key. It
// may Emit. An error or a panic fails the task, as in Process.
type TimerHandler interface {
	OnTimer(t Timer) error
}

// RegisterEventTimeTimer sets a timer for the current key that fires when
// the watermark reaches ts (ms). The host keeps one timer per kind, key and
// time: setting it again changes nothing.
func RegisterEventTimeTimer(ts int64) { timer(true, EventTimeTimer, ts) }

// DeleteEventTimeTimer removes the current key's event-time timer at ts, if
// it is set.
func DeleteEventTimeTimer(ts int64) { timer(false, EventTimeTimer, ts) }

// RegisterProcessingTimeTimer sets a timer for the current key that fires
// when the wall clock reaches ts (ms since the Unix epoch).
func RegisterProcessingTimeTimer(ts int64) { timer(true, ProcessingTimeTimer, ts) }

// DeleteProcessingTimeTimer removes the current key's processing-time timer
// at ts, if it is set.
func DeleteProcessingTimeTimer(ts int64) { timer(false, ProcessingTimeTimer, ts) }

func timer(register bool, k TimerKind, ts int64) {
	key, ok := guest.CurrentKey()
	if !ok {
		panic("keyed: a timer set or deleted outside Process and OnTimer, where there is no current key")
	}
	if register {
		hostTimerRegister(int32(k), key, ts)
	} else {
		hostTimerDelete(int32(k), key, ts)
	}
}

// NoWatermark is CurrentWatermark before the task's first watermark.
const NoWatermark int64 = math.MinInt64

// CurrentWatermark returns the task's event-time watermark in ms, or
// NoWatermark before the first one.
func CurrentWatermark() int64 { return hostWatermark() }

// ProcessingTime returns the host's wall clock in ms since the Unix epoch.
func ProcessingTime() int64 { return hostProcessingTime() }

// CurrentKey returns the key of the record being processed or of the timer
// firing, or nil outside Process and OnTimer. It aliases the batch: valid
// until that call returns.
func CurrentKey() []byte {
	k, _ := guest.CurrentKey()
	return k
}

// fire is the body of eddy_on_timer for one timer: the SDK's batch loop has
// set the current key to r.Key.
func fire(r *abi.Record) error {
	if len(r.Value) != 1 || r.Value[0] > byte(ProcessingTimeTimer) {
		return fmt.Errorf("keyed: timer batch: a timer's value is %q, want one byte: 0 (event time) or 1 (processing time)", r.Value)
	}
	h, ok := guest.Registered().(TimerHandler)
	if !ok {
		return errNoHandler
	}
	return h.OnTimer(Timer{Kind: TimerKind(r.Value[0]), Timestamp: r.Timestamp, Key: r.Key})
}

var errNoHandler = errors.New("keyed: a timer fired, but the operator does not implement keyed.TimerHandler")

// onTimers implements eddy_on_timer on one batch of fired timers.
func onTimers(batch []byte) int32 { return guest.RunBatch(batch, "timer batch", fire) }
