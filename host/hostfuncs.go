package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
)

// maxFailMessage bounds what the fail import keeps: the message ends up in
// a one-line task status.
const maxFailMessage = 1 << 10

// instantiateEddyModule registers the "eddy" import module once per
// runtime. Its functions are shared by every instance, so each finds the
// calling Instance in the call's context. They are Go module functions
// (api.GoModuleFunc), not reflective WithFunc ones, which cost several
// times more per call.
func instantiateEddyModule(ctx context.Context, r wazero.Runtime) error {
	impls := map[string]api.GoModuleFunc{
		abi.ImportEmit: hostEmit,
		abi.ImportLog:  hostLog,
		abi.ImportFail: hostFail,

		abi.ImportFields: hostFields,
	}
	maps.Copy(impls, keyedImports())
	b := r.NewHostModuleBuilder(abi.ImportModule)
	for _, name := range sortedKeys(abi.HostImports) {
		fn, ok := impls[name]
		if !ok {
			// abi gained an import this host does not implement yet.
			return fmt.Errorf("no implementation of import %q", name)
		}
		sig := abiSig(abi.HostImports[name])
		b.NewFunctionBuilder().WithGoModuleFunction(fn, sig.params, sig.results).WithName(name).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func instanceFrom(ctx context.Context) *Instance {
	i, _ := ctx.Value(instanceKey{}).(*Instance)
	if i == nil {
		// Only reachable if a guest call bypassed Instance; trap that guest.
		panic(errors.New("host: eddy import called outside an Eddy instance"))
	}
	return i
}

// emit(batch_ptr i32, batch_len i32)
func hostEmit(ctx context.Context, mod api.Module, stack []uint64) {
	instanceFrom(ctx).hostEmit(mod, uint32(stack[0]), uint32(stack[1]))
}

// log(level i32, ptr i32, len i32)
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	instanceFrom(ctx).hostLog(mod, int32(uint32(stack[0])), uint32(stack[1]), uint32(stack[2]))
}

// fail(ptr i32, len i32)
func hostFail(ctx context.Context, mod api.Module, stack []uint64) {
	instanceFrom(ctx).hostFail(mod, uint32(stack[0]), uint32(stack[1]))
}

func (i *Instance) hostEmit(mod api.Module, ptr, n uint32) {
	switch i.phase {
	case abi.ExportProcess, abi.ExportProcess2, abi.ExportOnTimer, abi.ExportClose,
		abi.ExportAggCreate, abi.ExportAggAdd, abi.ExportAggMerge, abi.ExportAggResult:
	default:
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.emit called during %s; it is only valid during %s, %s, %s and the eddy_agg_* calls",
			i.who, i.phase, abi.ExportProcess, abi.ExportOnTimer, abi.ExportClose))
	}
	// Decode straight from guest memory: the records alias it and are handed
	// to emit, which copies what it keeps before the guest runs again.
	view := i.guestBytes(mod, abi.ImportEmit, ptr, n)
	if size := mod.Memory().Size(); size != i.outMem {
		// Memory grew, so it moved: drop the stale records that still point
		// into the old buffer, or they would keep it from being collected.
		clear(i.out[:cap(i.out)])
		i.outMem = size
	}
	// The record count is checked before decoding, which costs an
	// abi.Record per record, and the bytes before the records are handed
	// on, which is where the caller copies them.
	count, err := abi.BatchCount(view)
	if err != nil {
		i.trapGuest(markf([]error{ErrBadPointer}, "%s: eddy.emit: batch at [%#x, %#x) does not decode: %w",
			i.who, ptr, uint64(ptr)+uint64(n), err))
	}
	if i.emitted.records += uint64(count); i.emitted.records > i.limits.records {
		i.trapGuest(markf([]error{ErrEmitLimit}, "%s: %s emitted more than %d records in one call (limit max_emit_records=%d; this eddy.emit of %d brought it to %d)",
			i.who, i.phase, i.limits.records, i.limits.records, count, i.emitted.records))
	}
	var recs []abi.Record
	if i.module.abiVersion >= abi.PartsVersion {
		// Values may be part lists (version 7), anywhere in the memory;
		// what they gather is bounded before it is gathered, by what the
		// call may still emit.
		mem, _ := mod.Memory().Read(0, mod.Memory().Size())
		recs, err = i.gather.Decode(view, mem, i.out[:0], i.limits.bytes-min(i.emitted.bytes, i.limits.bytes))
		if big := (*abi.GatherLimitError)(nil); errors.As(err, &big) {
			i.trapGuest(markf([]error{ErrEmitLimit}, "%s: %s emitted more than %s in one call (limit max_emit_bytes=%d; the part lists of this eddy.emit gather more than the %d bytes left)",
				i.who, i.phase, sizeString(i.limits.bytes), i.limits.bytes, big.Limit))
		}
	} else {
		recs, err = abi.DecodeBatch(view, i.out[:0])
	}
	if err != nil {
		i.trapGuest(markf([]error{ErrBadPointer}, "%s: eddy.emit: batch at [%#x, %#x) does not decode: %w",
			i.who, ptr, uint64(ptr)+uint64(n), err))
	}
	i.out = recs
	// Records may share their bytes (every value of a batch may span all
	// of it), so the batch's length bounds nothing: what counts is what
	// the records would take encoded on their own, which is what the
	// caller copies.
	size := uint64(0)
	for k := range recs {
		size += uint64(abi.RecordSize(&recs[k]))
	}
	if i.emitted.bytes += size; i.emitted.bytes > i.limits.bytes {
		i.trapGuest(markf([]error{ErrEmitLimit}, "%s: %s emitted more than %s in one call (limit max_emit_bytes=%d; this eddy.emit of %d bytes brought it to %d)",
			i.who, i.phase, sizeString(i.limits.bytes), i.limits.bytes, size, i.emitted.bytes))
	}
	if i.emit != nil && len(recs) > 0 {
		i.deliver(recs)
	}
}

// deliver calls the caller's emit callback. A panic in it must not be
// mistaken for a guest trap, so it is recorded, the guest is unwound, and
// Instance.call raises the panic again.
func (i *Instance) deliver(recs []abi.Record) {
	defer func() {
		if r := recover(); r != nil {
			i.cbPanic = r
			i.trapGuest(fmt.Errorf("%s: emit callback panicked: %v", i.who, r))
		}
	}()
	i.emit(recs)
}

func (i *Instance) hostLog(mod api.Module, level int32, ptr, n uint32) {
	msg := i.guestBytes(mod, abi.ImportLog, ptr, n)
	i.log.line(guestLevel(level), streamLog, msg)
}

func (i *Instance) hostFail(mod api.Module, ptr, n uint32) {
	msg := i.guestBytes(mod, abi.ImportFail, ptr, n)
	if len(msg) > maxFailMessage {
		msg = msg[:maxFailMessage]
	}
	i.failMsg = oneLine(string(msg), maxFailMessage)
}

// guestBytes returns the view of [ptr, ptr+n) in the caller's memory, or
// traps the guest if the range is not inside it.
func (i *Instance) guestBytes(mod api.Module, importName string, ptr, n uint32) []byte {
	mem := mod.Memory()
	if mem == nil {
		i.trapGuest(markf([]error{ErrBadPointer}, "%s: eddy.%s: the module has no memory", i.who, importName))
	}
	view, ok := mem.Read(ptr, n)
	if !ok {
		i.trapGuest(markf([]error{ErrBadPointer}, "%s: eddy.%s: range [%#x, %#x) is outside the guest memory of %d bytes",
			i.who, importName, ptr, uint64(ptr)+uint64(n), mem.Size()))
	}
	return view
}

// trapGuest ends the current guest call with err. wazero turns a panic in a
// host function into an error from the guest call; err is also kept on the
// instance so the caller gets exactly this error, whatever wazero adds.
func (i *Instance) trapGuest(err error) {
	i.hostErr = err
	panic(err)
}

// guestLevel maps the ABI log levels to slog's; unknown levels log as info
// rather than being lost.
func guestLevel(level int32) slog.Level {
	switch level {
	case abi.LogDebug:
		return slog.LevelDebug
	case abi.LogWarn:
		return slog.LevelWarn
	case abi.LogError:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
