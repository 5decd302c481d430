// Package eddy is the Go SDK for Eddy operator modules: it implements the
// guest side of the Eddy ABI (abi/ABI.md) so that an operator is a plain Go
// type with Open, Process and Close methods.
//
// An operator module is a main package built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o op.wasm ./op
//
// It registers its operator from an init function, because in a c-shared
// module main is never called (the host calls _initialize, which runs the
// package initializers, and then the ABI exports):
//
//	func init() { eddy.Register(&myOperator{}) }
//	func main() {}
//
// Importing this package is what defines the ABI exports (eddy_alloc,
// eddy_open, eddy_process, eddy_close, eddy_abi_version): //go:wasmexport
// works in any package that is linked into the module.
//
// Keyed state, timers and event time are in package keyed
// (github.com/eddy-stream/eddy/sdk/go/keyed). A module that imports it
// declares ABI version 2; one that does not stays at version 1, which every
// host accepts. For a window node, package aggregate makes a module an
// aggregate (ABI version 3) and package window a window function, in place
// of an Operator.
//
// Records arrive in batches; the SDK decodes each batch, calls Process once
// per record, and collects what Emit is given into one output buffer that it
// hands to the host when full and at the end of every eddy_process and
// eddy_close call.
//
// This package is not for running modules (see package host) and is only
// useful under GOOS=wasip1: on other platforms Emit and Log panic, because
// there is no host to talk to. Put an operator's algorithm in a separate
// pure-Go package, as udfs/project/projection does, to test or benchmark it
// natively.
package eddy

import (
	"fmt"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// Record is one record. In Process, Key, Value and header values alias the
// input batch: they are valid only until Process returns, and must not be
// modified. Copy what you keep; Emit copies what it is given.
type Record = abi.Record

// Header is one record header.
type Header = abi.Header

// NoTimestamp is the Timestamp of a record without event time.
const NoTimestamp = abi.NoTimestamp

// OutputBufferSize is the size of the buffer Emit collects records in. A
// record larger than this is handed to the host alone, from a temporary
// buffer.
const OutputBufferSize = guest.OutputBufferSize

// Operator is what a module implements. The host drives one instance per
// task from one goroutine: the methods are never called concurrently. An
// operator that sets timers also implements keyed.TimerHandler.
type Operator interface {
	// Open configures the operator before the first record. config is the
	// node's config from the job spec as JSON ("{}" when absent); the slice
	// belongs to the operator. Emit may not be called from Open.
	Open(config []byte) error
	// Process handles one record and may Emit any number of records. An
	// error, or a panic, fails the task with its message.
	Process(r *Record) error
	// Close is called when the input ends or the task is cancelled; it may
	// Emit what the operator still holds.
	Close() error
}

// Register makes op the module's operator. Call it once, from an init
// function. It panics if called twice, because a module has exactly one
// operator.
func Register(op Operator) { guest.Register(op) }

// Func returns an Operator whose Process is fn and whose Open and Close do
// nothing, for stateless operators that need no configuration.
func Func(fn func(r *Record) error) Operator { return funcOperator(fn) }

type funcOperator func(r *Record) error

func (f funcOperator) Open([]byte) error       { return nil }
func (f funcOperator) Process(r *Record) error { return f(r) }
func (f funcOperator) Close() error            { return nil }

// Emit sends r downstream. It copies r's key, value and headers, so r may
// alias the input record or a buffer the caller reuses. It may be called
// only from Process, keyed.TimerHandler's OnTimer and Close; elsewhere it
// panics.
func Emit(r Record) { guest.Emit(&r) }

// EmitKV sends a record without headers downstream; see Emit.
func EmitKV(key, value []byte, timestamp int64) {
	guest.Emit(&Record{Key: key, Value: value, Timestamp: timestamp})
}

// Level is the severity of a log message.
type Level int32

// Log levels.
const (
	LevelDebug Level = abi.LogDebug
	LevelInfo  Level = abi.LogInfo
	LevelWarn  Level = abi.LogWarn
	LevelError Level = abi.LogError
)

// Log writes msg to the task log. The host rate-limits it, so do not log
// per record except while debugging.
func Log(level Level, msg string) { guest.Log(int32(level), msg) }

// Logf formats its arguments as fmt.Sprintf does and logs the result.
func Logf(level Level, format string, args ...any) {
	guest.Log(int32(level), fmt.Sprintf(format, args...))
}
