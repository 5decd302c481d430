// Package window makes a Go Wasm module an Eddy window function: the
// `apply:` of a window node, in the style of Flink's
// ProcessWindowFunction. When a window fires, the function sees the whole
// window at once, its key, bounds and elements, and emits any number of
// records (abi/ABI.md, "Window functions").
//
//	// Command span emits, per window, the time between its first and its
//	// last element.
//	package main
//
//	import (
//		"fmt"
//
//		eddy "github.com/eddy-stream/eddy/sdk/go"
//		"github.com/eddy-stream/eddy/sdk/go/window"
//	)
//
//	func init() {
//		window.Register(window.Func(func(w window.Window, elems []eddy.Record) error {
//			if len(elems) == 0 {
//				return nil
//			}
//			span := elems[len(elems)-1].Timestamp - elems[0].Timestamp
//			eddy.EmitKV(w.Key, fmt.Appendf(nil, `{"span_ms":%d}`, span), w.MaxTimestamp())
//			return nil
//		}))
//	}
//
//	func main() {}
//
// A window function is an ordinary operator module built on eddy_process:
// the host hands it one batch per firing, whose record 0 describes the
// window, and this package decodes that record and passes the rest on.
// Importing it changes nothing else about the module: it declares ABI
// version 1 (2 if it also imports package keyed, but a window function
// node offers no keyed state or timers, so do not use them).
//
// The host keeps every element of a window until the window is cleaned
// up, so a window function costs state in proportion to its windows'
// contents; when the result can be computed incrementally, an aggregate
// module (package aggregate) is cheaper.
//
// Like package eddy, this package only works inside a Wasm guest.
package window

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eddy-stream/eddy/abi"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// Window is the window that fired.
type Window struct {
	// Key is the window's key (the node's key_by key). It aliases the
	// input batch: valid only during Apply.
	Key []byte
	// Start and End bound the window in event time, ms since the epoch;
	// End is exclusive.
	Start, End int64
}

// MaxTimestamp is the window's last millisecond, End - 1: the timestamp
// the host gives every record the function emits.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// Function is what a window function module implements. The host drives
// one instance per task from one goroutine: the methods are never called
// concurrently.
type Function interface {
	// Open configures the function before the first window. config is the
	// node's apply config from the job spec as JSON ("{}" when absent);
	// the slice belongs to the function. Emit may not be called from Open.
	Open(config []byte) error
	// Apply is called once per firing of a window, with the window's
	// elements in event-time order (arrival order for equal timestamps),
	// each as it entered the window. A window that fires again within the
	// allowed lateness comes again, whole, with its late elements. Apply
	// may emit any number of records with eddy.Emit; the host sets their
	// timestamp to w.MaxTimestamp() and keeps their key and value. The
	// elements alias the input batch: valid only until Apply returns. An
	// error, or a panic, fails the task with its message.
	Apply(w Window, elems []eddy.Record) error
}

// Register makes f the module's window function. Call it once, from an
// init function (main never runs in a c-shared module); it panics if the
// module already registered an operator.
func Register(f Function) {
	if f == nil {
		panic("window: Register(nil)")
	}
	guest.Register(&operator{fn: f})
}

// Func returns a Function whose Apply is fn and whose Open does nothing,
// for window functions that need no configuration.
func Func(fn func(w Window, elems []eddy.Record) error) Function { return funcFunction(fn) }

type funcFunction func(w Window, elems []eddy.Record) error

func (funcFunction) Open([]byte) error                           { return nil }
func (f funcFunction) Apply(w Window, elems []eddy.Record) error { return f(w, elems) }

// operator adapts a Function to the SDK's runtime. It is a
// guest.BatchOperator: each eddy_process batch is one window, whole.
type operator struct{ fn Function }

func (o *operator) Open(config []byte) error { return o.fn.Open(config) }

// Process is never called: the runtime hands a BatchOperator whole batches.
func (o *operator) Process(*abi.Record) error {
	return errors.New("window: internal error: a window batch handed over record by record")
}

func (o *operator) ProcessBatch(recs []abi.Record) error {
	w, err := descriptor(recs)
	if err != nil {
		return err
	}
	return o.fn.Apply(w, recs[1:])
}

func (o *operator) Close() error { return nil }

// descriptor decodes record 0 of a window function's batch, which
// describes the window: key = the window's key, value = its start and end
// as little-endian int64 (abi.WindowDescriptorLen bytes). The Window's Key
// aliases the record's.
func descriptor(recs []abi.Record) (Window, error) {
	if len(recs) == 0 {
		return Window{}, errors.New("window: an empty batch: a window function's batch starts with the window's descriptor; is the module used as a window node's apply?")
	}
	d := &recs[0]
	if len(d.Value) != abi.WindowDescriptorLen {
		return Window{}, fmt.Errorf("window: record 0 is not a window descriptor: its value has %d bytes, want %d; is the module used as a window node's apply?",
			len(d.Value), abi.WindowDescriptorLen)
	}
	return Window{
		Key:   d.Key,
		Start: int64(binary.LittleEndian.Uint64(d.Value)),
		End:   int64(binary.LittleEndian.Uint64(d.Value[8:])),
	}, nil
}
