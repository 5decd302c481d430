package host

// The version 2 imports (abi/ABI.md, "Version 2: keyed state, timers,
// time"): keyed state and timers over the task's state.Store, the
// watermark and the wall clock, and the eddy_on_timer export; and those of
// version 4 ("Version 4: schema versions"), which add the schema version
// of value state.
//
// A state call costs one host-function call and one Store call. None
// allocates once its buffers have grown: keys and values are handed to the
// Store as views of guest memory (the Store copies what it keeps, and no
// host function grows the memory, so a view stays valid for the call), and
// reads go through one host buffer that is copied into the guest.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/state"
)

// maxStates bounds the states one instance may declare, so that a guest
// declaring names in a loop cannot make the host allocate without limit.
const maxStates = 1024

// maxReadBuffer is the largest read buffer an instance keeps between calls;
// a bigger one, for an unusually large value, is dropped after the call.
const maxReadBuffer = 1 << 20

// stateDecl is a state declared with state_declare; its id is its index.
type stateDecl struct {
	name string
	kind int32 // abi.StateValue, StateList or StateMap
	ttl  time.Duration
	// schema is the schema version of the values this instance writes
	// (state_declare2, version 4); 0 for state_declare.
	schema uint32
}

// keyedState is an instance's part of version 2.
type keyedState struct {
	// keyed: the node is keyed (InstanceConfig.State or Keyed). store is
	// its state, nil until BindState for an instance created with Keyed.
	keyed bool
	store state.Store
	node  string // names the node in "needs key_by" errors
	decls []stateDecl

	watermark int64
	// now is InstanceConfig.Now (nil: the wall clock).
	now func() int64

	// buf holds what a read returns until it is copied into the guest.
	buf []byte
	// appendElem and appendEntry are bound once, so that state_list and
	// state_map_entries do not allocate a closure per call.
	appendElem  func(v []byte) error
	appendEntry func(userKey, v []byte) error

	onTimer       api.Function
	onTimerLooked bool
}

func (k *keyedState) init(store state.Store, keyed bool, instanceName string) {
	k.store = store
	k.keyed = keyed || store != nil
	k.node = nodeName(instanceName)
	k.watermark = abi.NoWatermark
	k.appendElem = func(v []byte) error {
		k.buf = appendFrame(k.buf, v)
		return nil
	}
	k.appendEntry = func(userKey, v []byte) error {
		k.buf = appendFrame(appendFrame(k.buf, userKey), v)
		return nil
	}
}

// nodeName extracts the node from an instance name of the usual form
// "job/node[subtask]"; any other name is returned as it is.
func nodeName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.LastIndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	return name
}

func appendFrame(dst, b []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// SetWatermark sets the event-time watermark the guest reads with
// current_watermark. The caller moves it forward before handing the guest
// the event-time timers it makes due (OnTimers).
func (i *Instance) SetWatermark(wm int64) { i.keyed.watermark = wm }

// OnTimers hands fired timers to the guest's eddy_on_timer as one batch,
// written into the guest's input buffer as Process writes records: one
// record per timer, key = the timer's key, timestamp = its time, value =
// one byte, the kind (abi.TimerEventTime or abi.TimerProcessingTime). What
// the guest emits goes to emit, as with Process. It fails, leaving the
// instance usable, if the module does not export eddy_on_timer.
func (i *Instance) OnTimers(timers []abi.Record, emit func([]abi.Record)) error {
	if err := i.ready(abi.ExportOnTimer); err != nil {
		return err
	}
	fn := i.onTimerFunc()
	if fn == nil {
		return fmt.Errorf("%s: the module does not export %s, so it cannot receive timers", i.who, abi.ExportOnTimer)
	}
	if len(timers) == 0 {
		return nil
	}
	size := abi.EncodedSize(timers)
	ptr, err := i.buffer(size, "timer batch")
	if err != nil {
		return err
	}
	view, _ := i.mem.Read(ptr, uint32(size)) // in bounds: buffer checked it
	abi.EncodeBatch(view, timers)
	i.stack[0], i.stack[1] = uint64(ptr), uint64(size)
	if err := i.call(abi.ExportOnTimer, fn, emit); err != nil {
		return err
	}
	return i.status(abi.ExportOnTimer)
}

func (i *Instance) onTimerFunc() api.Function {
	if !i.keyed.onTimerLooked {
		i.keyed.onTimer = i.wmod.ExportedFunction(abi.ExportOnTimer)
		i.keyed.onTimerLooked = true
	}
	return i.keyed.onTimer
}

// HasOnTimer reports whether the module exports eddy_on_timer, i.e. can be
// handed timers: a caller with no timers to fire need not look for any.
func (m *Module) HasOnTimer() bool {
	_, ok := m.compiled.ExportedFunctions()[abi.ExportOnTimer]
	return ok
}

// checkTimerExport is the shape rule of version 2: a module that sets
// timers must be able to receive them.
func (m *Module) checkTimerExport() []string {
	for _, def := range m.compiled.ImportedFunctions() {
		if mod, name, _ := def.Import(); mod == abi.ImportModule && name == abi.ImportTimerRegister {
			if !m.HasOnTimer() {
				return []string{fmt.Sprintf("imports %q.%q but does not export %q, which receives the timers",
					abi.ImportModule, abi.ImportTimerRegister, abi.ExportOnTimer)}
			}
		}
	}
	return nil
}

// checkImportVersions refuses a module that imports functions of a newer
// ABI version than it declares (known once the probe has read it).
func (m *Module) checkImportVersions() error {
	var names []string
	var need uint32
	for _, def := range m.compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		if mod != abi.ImportModule {
			continue
		}
		if v := abi.ImportVersion(name); v > m.abiVersion {
			names = append(names, abi.ImportModule+"."+name)
			need = max(need, v)
		}
	}
	switch len(names) {
	case 0:
		return nil
	case 1:
		return markf([]error{ErrInvalidModule}, "module %s imports %s, which needs ABI version %d, but declares version %d",
			m.name, names[0], need, m.abiVersion)
	default:
		return markf([]error{ErrInvalidModule}, "module %s imports %s, which need ABI version %d, but declares version %d",
			m.name, strings.Join(names, ", "), need, m.abiVersion)
	}
}

// keyedImports are the Go functions of the version 2 imports.
func keyedImports() map[string]api.GoModuleFunc {
	return map[string]api.GoModuleFunc{
		abi.ImportStateDeclare:    hostStateDeclare,
		abi.ImportStateGet:        hostStateGet,
		abi.ImportStatePut:        hostStatePut,
		abi.ImportStateClear:      hostStateClear,
		abi.ImportStateAppend:     hostStateAppend,
		abi.ImportStateList:       hostStateList,
		abi.ImportStateMapGet:     hostStateMapGet,
		abi.ImportStateMapPut:     hostStateMapPut,
		abi.ImportStateMapDelete:  hostStateMapDelete,
		abi.ImportStateMapEntries: hostStateMapEntries,
		abi.ImportTimerRegister:   hostTimerRegister,
		abi.ImportTimerDelete:     hostTimerDelete,
		abi.ImportWatermark:       hostWatermark,
		abi.ImportProcessingTime:  hostProcessingTime,
		abi.ImportStateDeclare2:   hostStateDeclare2,
		abi.ImportStateGet2:       hostStateGet2,
	}
}

// isKeyedImport reports whether the host import name needs keyed state
// (versions 2 and 4), which an aggregate module may not import.
func isKeyedImport(name string) bool {
	v := abi.ImportVersion(name)
	return v == 2 || v == 4
}

// state_declare(kind i32, name_ptr i32, name_len i32, ttl_ms i64) -> i32
func hostStateDeclare(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	stack[0] = api.EncodeI32(i.stateDeclare(mod, abi.ImportStateDeclare, int32(uint32(stack[0])), uint32(stack[1]), uint32(stack[2]), int64(stack[3]), 0))
}

// state_declare2(kind i32, name_ptr i32, name_len i32, ttl_ms i64, schema i32) -> i32
func hostStateDeclare2(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	stack[0] = api.EncodeI32(i.stateDeclare(mod, abi.ImportStateDeclare2, int32(uint32(stack[0])), uint32(stack[1]), uint32(stack[2]), int64(stack[3]), uint32(stack[4])))
}

// state_get(id, key_ptr, key_len, dst_ptr, dst_cap i32) -> i32
func hostStateGet(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateGet
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateValue)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	dst, dstCap := uint32(stack[3]), uint32(stack[4])
	i.guestBytes(mod, name, dst, dstCap)
	v, ok, err := st.ValueGet(decl.name, key, nil, i.keyed.buf[:0])
	i.keyed.buf = v
	if err != nil {
		i.stateFailed(name, decl, err)
	}
	stack[0] = i.answer(mod, name, ok, dst, dstCap)
}

// state_get2(id, key_ptr, key_len, dst_ptr, dst_cap, schema_ptr i32) -> i32:
// state_get that also writes the value's schema version, a u32 LE, at
// schema_ptr (0 when absent).
func hostStateGet2(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateGet2
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateValue)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	dst, dstCap := uint32(stack[3]), uint32(stack[4])
	i.guestBytes(mod, name, dst, dstCap)
	schemaOut := i.guestBytes(mod, name, uint32(stack[5]), 4)
	v, schema, ok, err := st.ValueGetSchema(decl.name, key, nil, i.keyed.buf[:0])
	i.keyed.buf = v
	if err != nil {
		i.stateFailed(name, decl, err)
	}
	// schemaOut is still a valid view: no host function grows the memory.
	binary.LittleEndian.PutUint32(schemaOut, schema)
	stack[0] = i.answer(mod, name, ok, dst, dstCap)
}

// state_put(id, key_ptr, key_len, val_ptr, val_len i32)
func hostStatePut(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStatePut
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateValue)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	val := i.guestBytes(mod, name, uint32(stack[3]), uint32(stack[4]))
	if err := st.ValuePutSchema(decl.name, key, nil, val, decl.ttl, decl.schema); err != nil {
		i.stateFailed(name, decl, err)
	}
}

// state_clear(id, key_ptr, key_len i32)
func hostStateClear(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateClear
	st, decl := i.stateOf(name, uint32(stack[0]), -1)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	var err error
	switch decl.kind {
	case abi.StateValue:
		err = st.ValueDelete(decl.name, key, nil)
	case abi.StateList:
		err = st.ListClear(decl.name, key, nil)
	default:
		err = st.MapClear(decl.name, key, nil)
	}
	if err != nil {
		i.stateFailed(name, decl, err)
	}
}

// state_append(id, key_ptr, key_len, val_ptr, val_len i32)
func hostStateAppend(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateAppend
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateList)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	val := i.guestBytes(mod, name, uint32(stack[3]), uint32(stack[4]))
	if err := st.ListAppend(decl.name, key, nil, val, decl.ttl); err != nil {
		i.stateFailed(name, decl, err)
	}
}

// state_list(id, key_ptr, key_len, dst_ptr, dst_cap i32) -> i32
func hostStateList(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateList
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateList)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	dst, dstCap := uint32(stack[3]), uint32(stack[4])
	i.guestBytes(mod, name, dst, dstCap)
	i.keyed.buf = i.keyed.buf[:0]
	if err := st.ListGet(decl.name, key, nil, i.keyed.appendElem); err != nil {
		i.stateFailed(name, decl, err)
	}
	stack[0] = i.answer(mod, name, len(i.keyed.buf) > 0, dst, dstCap)
}

// state_map_get(id, key_ptr, key_len, uk_ptr, uk_len, dst_ptr, dst_cap i32) -> i32
func hostStateMapGet(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateMapGet
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateMap)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	userKey := i.guestBytes(mod, name, uint32(stack[3]), uint32(stack[4]))
	dst, dstCap := uint32(stack[5]), uint32(stack[6])
	i.guestBytes(mod, name, dst, dstCap)
	v, ok, err := st.MapGet(decl.name, key, nil, userKey, i.keyed.buf[:0])
	i.keyed.buf = v
	if err != nil {
		i.stateFailed(name, decl, err)
	}
	stack[0] = i.answer(mod, name, ok, dst, dstCap)
}

// state_map_put(id, key_ptr, key_len, uk_ptr, uk_len, val_ptr, val_len i32)
func hostStateMapPut(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateMapPut
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateMap)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	userKey := i.guestBytes(mod, name, uint32(stack[3]), uint32(stack[4]))
	val := i.guestBytes(mod, name, uint32(stack[5]), uint32(stack[6]))
	if err := st.MapPut(decl.name, key, nil, userKey, val, decl.ttl); err != nil {
		i.stateFailed(name, decl, err)
	}
}

// state_map_delete(id, key_ptr, key_len, uk_ptr, uk_len i32)
func hostStateMapDelete(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateMapDelete
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateMap)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	userKey := i.guestBytes(mod, name, uint32(stack[3]), uint32(stack[4]))
	if err := st.MapDelete(decl.name, key, nil, userKey); err != nil {
		i.stateFailed(name, decl, err)
	}
}

// state_map_entries(id, key_ptr, key_len, dst_ptr, dst_cap i32) -> i32
func hostStateMapEntries(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportStateMapEntries
	st, decl := i.stateOf(name, uint32(stack[0]), abi.StateMap)
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	dst, dstCap := uint32(stack[3]), uint32(stack[4])
	i.guestBytes(mod, name, dst, dstCap)
	i.keyed.buf = i.keyed.buf[:0]
	if err := st.MapIter(decl.name, key, nil, i.keyed.appendEntry); err != nil {
		i.stateFailed(name, decl, err)
	}
	stack[0] = i.answer(mod, name, len(i.keyed.buf) > 0, dst, dstCap)
}

// timer_register(kind i32, key_ptr i32, key_len i32, ts i64)
func hostTimerRegister(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportTimerRegister
	st, kind := i.timerOf(name, uint32(stack[0]))
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	if err := st.TimerRegister(kind, key, nil, int64(stack[3])); err != nil {
		i.timerFailed(name, err)
	}
}

// timer_delete(kind i32, key_ptr i32, key_len i32, ts i64)
func hostTimerDelete(ctx context.Context, mod api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	const name = abi.ImportTimerDelete
	st, kind := i.timerOf(name, uint32(stack[0]))
	key := i.guestBytes(mod, name, uint32(stack[1]), uint32(stack[2]))
	if err := st.TimerDelete(kind, key, nil, int64(stack[3])); err != nil {
		i.timerFailed(name, err)
	}
}

// current_watermark() -> i64. Like every version 2 import it needs a keyed
// node (ABI.md): only there does the task keep the instance's watermark.
func hostWatermark(ctx context.Context, _ api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	i.requireKeyed(abi.ImportWatermark)
	stack[0] = uint64(i.keyed.watermark)
}

// processing_time() -> i64
func hostProcessingTime(ctx context.Context, _ api.Module, stack []uint64) {
	i := instanceFrom(ctx)
	i.requireKeyed(abi.ImportProcessingTime)
	if i.keyed.now != nil {
		stack[0] = uint64(i.keyed.now())
		return
	}
	stack[0] = uint64(time.Now().UnixMilli())
}

func (i *Instance) stateDeclare(mod api.Module, imp string, kind int32, ptr, n uint32, ttlMs int64, schema uint32) int32 {
	i.requireKeyed(imp)
	if i.phase != abi.ExportOpen {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s called during %s; it is only valid during %s",
			i.who, imp, i.phaseName(), abi.ExportOpen))
	}
	name := i.guestBytes(mod, imp, ptr, n)
	if kind != abi.StateValue && kind != abi.StateList && kind != abi.StateMap {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s(%q): kind %d is not 0 (value), 1 (list) or 2 (map)",
			i.who, imp, oneLine(string(name), 64), kind))
	}
	if schema != 0 && kind != abi.StateValue {
		// Only state_get2 reports a version, so a list or map written
		// with one could never be read back as such.
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s(%q): schema version %d on %s state; schema versions are for value state",
			i.who, imp, oneLine(string(name), 64), schema, kindName(kind)))
	}
	for id, d := range i.keyed.decls {
		if d.name != string(name) {
			continue
		}
		if d.kind != kind {
			i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s(%q): declared before as %s state, now as %s state",
				i.who, imp, d.name, kindName(d.kind), kindName(kind)))
		}
		if d.schema != schema {
			i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s(%q): declared before with schema version %d, now with %d",
				i.who, imp, d.name, d.schema, schema))
		}
		return int32(id)
	}
	if len(i.keyed.decls) >= maxStates {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s(%q): more than %d states declared",
			i.who, imp, oneLine(string(name), 64), maxStates))
	}
	var ttl time.Duration
	if ttlMs > 0 {
		ttl = time.Duration(min(ttlMs, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
	}
	i.keyed.decls = append(i.keyed.decls, stateDecl{name: string(name), kind: kind, ttl: ttl, schema: schema})
	return int32(len(i.keyed.decls) - 1)
}

// requireKeyed traps the guest if the node is not keyed: every version 2
// import needs key_by (ABI.md).
func (i *Instance) requireKeyed(imp string) {
	if !i.keyed.keyed {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: keyed state needs key_by on node %s",
			i.who, imp, i.keyed.node))
	}
}

// keyedStore returns the task's state store, trapping the guest if the node
// is not keyed. An instance not bound yet (BindState) never gets here:
// ready refuses its calls, and eddy_open cannot use state.
func (i *Instance) keyedStore(imp string) state.Store {
	i.requireKeyed(imp)
	if i.keyed.store == nil {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: the instance has no state store bound yet", i.who, imp))
	}
	return i.keyed.store
}

// stateOf checks the state id an import was given and that its kind suits
// the import (kind -1: any), and returns the store and the declaration.
func (i *Instance) stateOf(imp string, id uint32, kind int32) (state.Store, *stateDecl) {
	st := i.keyedStore(imp)
	i.checkKeyedPhase(imp)
	if int64(id) >= int64(len(i.keyed.decls)) {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: no state with id %d (%d declared)",
			i.who, imp, int32(id), len(i.keyed.decls)))
	}
	d := &i.keyed.decls[id]
	if kind >= 0 && d.kind != kind {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s on %q, which is %s state, not %s state",
			i.who, imp, d.name, kindName(d.kind), kindName(kind)))
	}
	return st, d
}

func (i *Instance) timerOf(imp string, kind uint32) (state.Store, state.TimerKind) {
	st := i.keyedStore(imp)
	i.checkKeyedPhase(imp)
	switch kind {
	case abi.TimerEventTime:
		return st, state.EventTime
	case abi.TimerProcessingTime:
		return st, state.ProcessingTime
	}
	i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: timer kind %d is not 0 (event time) or 1 (processing time)",
		i.who, imp, int32(kind)))
	return nil, 0
}

// checkKeyedPhase: state and timers address the key being handled, so they
// are used while records, timers or the end of input are: during
// eddy_process, eddy_on_timer or eddy_close.
func (i *Instance) checkKeyedPhase(imp string) {
	switch i.phase {
	case abi.ExportProcess, abi.ExportProcess2, abi.ExportOnTimer, abi.ExportClose:
		return
	}
	i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s called during %s; it is only valid during %s, %s and %s",
		i.who, imp, i.phaseName(), abi.ExportProcess, abi.ExportOnTimer, abi.ExportClose))
}

func (i *Instance) phaseName() string {
	if i.phase == "" {
		return "no call"
	}
	return i.phase
}

// answer finishes a read: it returns the full length of what is in
// i.keyed.buf (abi.StateAbsent if !found), copying it to [dst, dst+dstCap)
// only if it fits. The range was checked before the read.
func (i *Instance) answer(mod api.Module, imp string, found bool, dst, dstCap uint32) uint64 {
	b := i.keyed.buf
	if cap(b) > maxReadBuffer {
		i.keyed.buf = nil
	}
	if !found {
		return api.EncodeI32(abi.StateAbsent)
	}
	if len(b) > math.MaxInt32 {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: the result of %d bytes is too large for an i32 length", i.who, imp, len(b)))
	}
	if uint32(len(b)) <= dstCap {
		mod.Memory().Write(dst, b)
	}
	return api.EncodeI32(int32(len(b)))
}

// stateFailed traps the guest with a Store error. A key outside the task's
// key groups is the guest's fault (it used a key that is not the one being
// handled); any other error is the backend's, and fails the task too.
func (i *Instance) stateFailed(imp string, d *stateDecl, err error) {
	if errors.Is(err, state.ErrNotOwned) {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s on %q: the key is not one this task owns (only the key of the record or timer being handled may be used): %w",
			i.who, imp, d.name, err))
	}
	i.trapGuest(markf(nil, "%s: eddy.%s on %q: %w", i.who, imp, d.name, err))
}

func (i *Instance) timerFailed(imp string, err error) {
	if errors.Is(err, state.ErrNotOwned) {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: the key is not one this task owns (only the key of the record or timer being handled may be used): %w",
			i.who, imp, err))
	}
	i.trapGuest(markf(nil, "%s: eddy.%s: %w", i.who, imp, err))
}

func kindName(kind int32) string {
	switch kind {
	case abi.StateValue:
		return "value"
	case abi.StateList:
		return "list"
	case abi.StateMap:
		return "map"
	}
	return fmt.Sprintf("kind %d", kind)
}
