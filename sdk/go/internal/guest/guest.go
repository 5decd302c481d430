// Package guest is the runtime of the Go guest SDK: the registered
// operator, the eddy_alloc input buffer, the output buffer behind Emit, the
// batch loop with its error and panic handling, the current key, and the
// ABI version the module reports.
//
// It is shared by the public packages: eddy (the operator API, ABI version
// 1), keyed (keyed state and timers, ABI version 2), aggregate (aggregate
// modules, ABI version 3), window (window functions, on top of
// eddy_process) and fields (fields the host extracts, ABI version 6). It exists so that they can reuse the batch loop and the
// output buffer without eddy exporting them; operator authors never import
// it.
package guest

import (
	"bytes"
	"fmt"
	"runtime/debug"

	"github.com/eddy-stream/eddy/abi"
)

// Operator is what package eddy registers; it mirrors eddy.Operator.
type Operator interface {
	Open(config []byte) error
	Process(r *abi.Record) error
	Close() error
}

// Version is what eddy_abi_version returns: 1, unless package keyed is
// linked into the module, whose init sets 2, or package aggregate, whose
// init sets 3 (the host calls eddy_abi_version after _initialize, which
// runs every package's init). A module therefore declares version 2
// exactly when it can use the version 2 imports, and 3 exactly when it
// exports the aggregate functions. It does not use abi.Version, which
// names the newest version the host knows, not the one this module needs.
var Version int32 = 1

// leastVersion is a version the module needs whatever Version says; see
// NeedVersion.
var leastVersion int32

// NeedVersion makes eddy_abi_version report at least v. It is for a
// package whose version is compatible with every other package's (fields:
// 6 includes 2, 4 and 5), so it must only raise the version, while keyed,
// schema, co and aggregate set Version outright, in an init whose order
// relative to the caller's follows import paths (aggregate relies on
// keyed's overwriting its 3 to tell that both are linked).
func NeedVersion(v int32) { leastVersion = max(leastVersion, v) }

// ABIVersion is what eddy_abi_version reports.
func ABIVersion() int32 { return max(Version, leastVersion) }

// OutputBufferSize is the size of the buffer Emit collects records in.
const OutputBufferSize = 64 << 10

// The guest's state. Everything handed to the host lives in package-level
// variables so that the garbage collector never frees memory the host is
// about to read; the host calls the module from one goroutine, so nothing
// here needs locking.
var (
	registered Operator

	// outBuf is the output batch: entries from the front, data from the
	// back (abi.Writer), handed to the host as a whole.
	outBuf [OutputBufferSize]byte
	out    = newOutput()
	// spill holds a record larger than outBuf while the host reads it.
	spill []byte

	// records is reused across batches to decode without allocating.
	records []abi.Record

	// emitting is true while Emit may hand batches to the host: the ABI
	// allows emit only during eddy_process, eddy_on_timer and eddy_close.
	emitting bool

	// opening is true during eddy_open, the only call in which state may
	// be declared.
	opening bool
	// beforeOpen runs at the start of eddy_open (package keyed declares
	// the states created by init functions there).
	beforeOpen func()

	// key is the key of the record being processed or of the timer
	// firing; hasKey is false outside those calls.
	key    []byte
	hasKey bool

	// fieldPaths is how many paths the module declared (package fields,
	// ABI version 6), 0 before it does: then input batches carry a field
	// table, whose rows are fieldRowSize bytes.
	fieldPaths   int
	fieldRowSize int
	// fieldBatch is the input batch being processed when it carries a
	// field table, and fieldRow the offset in it of the current record's
	// row; -1 outside Process and ProcessLeft/Right.
	fieldBatch []byte
	fieldRow   = -1
)

func newOutput() abi.Writer {
	var w abi.Writer
	w.Reset(outBuf[:])
	return w
}

// Register makes op the module's operator; see eddy.Register.
func Register(op Operator) {
	if op == nil {
		panic("eddy: Register(nil)")
	}
	if registered != nil {
		panic("eddy: Register called more than once")
	}
	registered = op
}

// Registered returns the registered operator, or nil.
func Registered() Operator { return registered }

// OnOpen makes fn run at the start of every eddy_open call, before the
// operator's Open.
func OnOpen(fn func()) { beforeOpen = fn }

// Opening reports whether eddy_open is in progress.
func Opening() bool { return opening }

// CurrentKey returns the key of the record being processed or of the timer
// firing, and false outside Process and OnTimer. The key aliases the batch:
// it is valid until that call returns.
func CurrentKey() ([]byte, bool) { return key, hasKey }

// SetFieldPaths records that the module declared n paths (package
// fields), so that the input batches from now on are read with a field
// table.
func SetFieldPaths(n int) { fieldPaths, fieldRowSize = n, abi.FieldRowSize(n) }

// FieldPaths is the number of paths the module declared, 0 if none.
func FieldPaths() int { return fieldPaths }

// FieldRow returns the batch being processed and the offset in it of the
// current record's row of the field table, or -1 when there is none
// (outside Process, in OnTimer, in a module that declared no fields).
// RunInput has checked that the whole table lies inside the batch.
func FieldRow() ([]byte, int) { return fieldBatch, fieldRow }

// Row is FieldRow's offset alone.
func Row() int { return fieldRow }

// RowWord returns the little-endian word at offset at of the batch being
// processed, which must lie inside the current record's row (RunInput has
// checked that the whole field table lies inside the batch).
func RowWord(at int) uint64 { return rowWord(fieldBatch, at) }

// Emit sends r downstream; see eddy.Emit.
func Emit(r *abi.Record) {
	if !emitting {
		panic("eddy: Emit called outside Process and Close")
	}
	if out.Append(r) {
		return
	}
	flush()
	if out.Append(r) {
		return
	}
	// Larger than the whole output buffer: hand it over alone, after the
	// records before it so that order is kept.
	spill = make([]byte, abi.HeaderSize+abi.RecordSize(r))
	var w abi.Writer
	w.Reset(spill)
	w.Append(r)
	hostEmit(w.Bytes())
	spill = nil // a rare giant record should not pin its memory
}

// EmitParts sends downstream a record like r whose value is the
// concatenation of parts (version 7's values in parts; r.Value is not
// used): the output batch names each part by its address and length, and
// the host gathers them when it takes the batch. So each part must stay
// unchanged, and reachable, until the call in progress returns.
func EmitParts(r *abi.Record, parts [][]byte) {
	if !emitting {
		panic("eddy: EmitParts called outside Process and Close")
	}
	if partsByAddress {
		list, ok := out.AppendPartList(r, len(parts))
		if !ok {
			flush()
			list, ok = out.AppendPartList(r, len(parts))
		}
		if ok {
			putParts(list, parts)
			return
		}
	}
	// Outside Wasm, or a list larger than the whole output buffer: gather
	// here and emit the value whole.
	whole := *r
	whole.Value = bytes.Join(parts, nil)
	Emit(&whole)
}

// PartOf returns b as a part for EmitPartList (see fields.Part).
func PartOf(b []byte) uint64 { return partOf(b) }

// SpanParts sets dst[j] to the part of the current record's span path j,
// 0 when absent, and reports whether the row's validity word says the
// value is one valid JSON object; ok is false, and nothing is set, when
// there is no current row or dst is longer than paths (the span paths
// declared).
func SpanParts(paths int, dst []uint64) (valid, ok bool) {
	if fieldRow < 0 || len(dst) > paths {
		return false, false
	}
	return spanParts(fieldBatch, fieldRow, dst), true
}

// EmitPartList is EmitParts for parts made by PartOf and SpanParts: in
// Wasm, a part is already the (address, length) the list holds, so the
// list is a copy of parts.
func EmitPartList(r *abi.Record, parts []uint64) {
	if !emitting {
		panic("eddy: EmitPartList called outside Process and Close")
	}
	if !partsByAddress {
		whole := *r
		whole.Value = nil
		for _, p := range parts {
			whole.Value = append(whole.Value, partBytes(p)...)
		}
		Emit(&whole)
		return
	}
	if out.AppendWords(r, parts) {
		return
	}
	flush()
	if out.AppendWords(r, parts) {
		return
	}
	// A list larger than the whole output buffer goes alone, in a batch
	// of its own, after the records before it (as Emit's giant records).
	head := *r
	head.Value = nil
	spill = make([]byte, abi.HeaderSize+abi.RecordSize(&head)+abi.PartSize*len(parts))
	var w abi.Writer
	w.Reset(spill)
	if !w.AppendWords(r, parts) {
		panic("eddy: EmitPartList: a part list that fits no batch")
	}
	hostEmit(w.Bytes())
	spill = nil
}

// Log writes msg to the task log.
func Log(level int32, msg string) { hostLog(level, msg) }

func flush() {
	if out.Len() == 0 {
		return
	}
	hostEmit(out.Bytes())
	out.Reset(outBuf[:])
}

// fail reports msg to the host as the reason of the current call's failure
// and returns the status that goes with it. Output not yet handed over is
// dropped: the task is failing, and it must not leak into a later call.
func fail(msg string) int32 {
	out.Reset(outBuf[:])
	hostFail(msg)
	return abi.StatusError
}

// recovered turns a panic in operator code into a failed call, with the
// stack in the task log and one line as the error.
func recovered(p any) int32 {
	hostLog(abi.LogError, fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
	return fail(fmt.Sprintf("panic: %v", p))
}

// ErrNoOperator is the failure of every call when no operator is registered.
const ErrNoOperator = "eddy: no operator registered: call eddy.Register from an init function (main never runs in a c-shared module)"

// Open implements eddy_open on the configuration bytes.
func Open(config []byte) (status int32) {
	if registered == nil {
		return fail(ErrNoOperator)
	}
	opening = true
	defer func() {
		opening = false
		if p := recover(); p != nil {
			status = recovered(p)
		}
	}()
	if beforeOpen != nil {
		beforeOpen()
	}
	// The host overwrites the configuration with the first batch.
	own := append([]byte(nil), config...)
	if err := registered.Open(own); err != nil {
		return fail(err.Error())
	}
	keepParts()
	return abi.StatusOK
}

// BatchOperator is implemented by a registered operator that takes each
// input batch whole instead of record by record: package window's (a
// window function needs the window's descriptor and all its elements at
// once) and package aggregate's (which refuses eddy_process, even for an
// empty batch).
type BatchOperator interface {
	ProcessBatch(recs []abi.Record) error
}

// Process implements eddy_process on one input batch.
func Process(batch []byte) int32 {
	if b, ok := registered.(BatchOperator); ok {
		return RunWhole(batch, "input batch", b.ProcessBatch)
	}
	// nil: runBatch calls registered.Process itself, one call a record
	// fewer than through a func value (Go's Wasm backend pays for each).
	return RunInput(batch, nil)
}

// RunWhole decodes batch and hands all its records to fn at once, as Call
// does: with Emit allowed, no current key, errors and panics failing the
// call, and the output flushed at the end. The records alias batch and
// live in a slice reused by the next batch. It implements eddy_process for
// a BatchOperator and, for package aggregate, eddy_agg_add, eddy_agg_merge
// and eddy_agg_result.
func RunWhole(batch []byte, what string, fn func(recs []abi.Record) error) int32 {
	if registered == nil {
		return fail(ErrNoOperator)
	}
	dropParts()
	recs, err := abi.DecodeBatch(batch, records[:0])
	records = recs[:0]
	if err != nil {
		return fail("eddy: " + what + ": " + err.Error())
	}
	return Call(func() error { return fn(recs) })
}

// Call runs fn as the body of an export that may hand output to the host
// (package aggregate's eddy_agg_create, and RunWhole): Emit is allowed and
// there is no current key; an error or a panic fails the call, dropping
// output not yet handed over; the output is flushed when fn returns nil.
func Call(fn func() error) (status int32) {
	if registered == nil {
		return fail(ErrNoOperator)
	}
	emitting = true
	defer func() {
		emitting = false
		if p := recover(); p != nil {
			status = recovered(p)
		}
	}()
	if err := fn(); err != nil {
		return fail(err.Error())
	}
	flush()
	return abi.StatusOK
}

// RunBatch decodes batch and calls each for every record, in order, with
// the record's key as the current key and Emit allowed; it flushes the
// output at the end. An error or a panic fails the call. It implements
// package keyed's eddy_on_timer, whose batches have no field table.
func RunBatch(batch []byte, what string, each func(r *abi.Record) error) int32 {
	return runBatch(batch, what, each, false)
}

// RunInput is RunBatch for a batch of input records (eddy_process, and
// package co's eddy_process2): once the module has declared fields, such
// a batch carries a field table, and FieldRow gives each record's row. A
// nil each is the registered operator's Process.
func RunInput(batch []byte, each func(r *abi.Record) error) int32 {
	return runBatch(batch, "input batch", each, fieldPaths > 0)
}

func runBatch(batch []byte, what string, each func(r *abi.Record) error, withFields bool) (status int32) {
	if registered == nil {
		return fail(ErrNoOperator)
	}
	recs, err := abi.DecodeBatch(batch, records[:0])
	records = recs[:0]
	if err != nil {
		return fail("eddy: " + what + ": " + err.Error())
	}
	row, rowSize := -1, 0
	if withFields {
		row, rowSize = abi.FieldTableOffset(len(recs)), fieldRowSize
		if end := uint64(row) + uint64(rowSize)*uint64(len(recs)); end > uint64(len(batch)) {
			return fail(fmt.Sprintf("eddy: %s: its field table of %d rows of %d bytes at %d ends past the batch's %d bytes",
				what, len(recs), rowSize, row, len(batch)))
		}
		fieldBatch = batch
	}
	// One deferred recover per batch, not per record: a panic fails the
	// task anyway, so where in the batch it happened does not matter.
	emitting = true
	defer func() {
		emitting, key, hasKey = false, nil, false
		fieldBatch, fieldRow = nil, -1
		if p := recover(); p != nil {
			status = recovered(p)
		}
	}()
	hasKey = true
	for i := range recs {
		key = recs[i].Key
		fieldRow = row
		row += rowSize
		var err error
		if each == nil {
			err = registered.Process(&recs[i])
		} else {
			err = each(&recs[i])
		}
		if err != nil {
			return fail(err.Error())
		}
	}
	flush()
	return abi.StatusOK
}

// Close implements eddy_close.
func Close() (status int32) {
	if registered == nil {
		return fail(ErrNoOperator)
	}
	emitting = true
	defer func() {
		emitting = false
		if p := recover(); p != nil {
			status = recovered(p)
		}
	}()
	if err := registered.Close(); err != nil {
		return fail(err.Error())
	}
	flush()
	return abi.StatusOK
}
