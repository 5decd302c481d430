// Package co gives Eddy operators two inputs: Flink's
// KeyedCoProcessFunction. A two-input operator runs on a wasm node with
// input: [left, right] and a key per input, key_by: [left_key, right_key];
// the SDK calls ProcessLeft for a record of the first input and
// ProcessRight for one of the second, with the current key set to the
// record's key. Keyed state and timers are those of package keyed, one key
// space for both inputs: a handle declared once addresses the same state
// from either side, and a timer fires once (keyed.TimerHandler), whichever
// input set it.
//
//	type joiner struct{ persons *keyed.Value }
//
//	func (j *joiner) ProcessLeft(r *eddy.Record) error  { … j.persons.Put(r.Value) … }
//	func (j *joiner) ProcessRight(r *eddy.Record) error { … j.persons.Get() … }
//
//	func init() { co.Register(&joiner{}) }
//
// Importing this package makes the module declare ABI version 5 (abi/ABI.md,
// "Version 5: two-input keyed operators") and export eddy_process2; it is a
// package of its own for the reason package keyed is one: the version must
// be known before eddy_open. A module of version 5 may also use the
// version 4 functions (keyed.Schema), without importing keyed/schema.
//
// It is not for one-input operators: its module refuses eddy_process, and
// the host refuses to run it on a node without a key per input.
package co

import (
	"errors"

	"github.com/eddy-stream/eddy/abi"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
	"github.com/eddy-stream/eddy/sdk/go/keyed"

	// schema's init sets version 4; importing it makes it run before
	// this package's, whatever else the module imports.
	_ "github.com/eddy-stream/eddy/sdk/go/keyed/schema"
)

// abiVersion is the ABI version that defines two-input operators.
const abiVersion = abi.TwoInputVersion

func init() { guest.Version = abiVersion }

// The inputs' indexes, as eddy_process2 numbers them.
const (
	Left  = 0 // the node's first input
	Right = 1 // its second
)

// Operator is a two-input operator. Open and Close are as for
// eddy.Operator; ProcessLeft gets the records of the first input,
// ProcessRight those of the second, each with the current key set to the
// record's. Either may Emit; an error or a panic fails the task. An
// Operator that sets timers implements keyed.TimerHandler as well.
type Operator interface {
	Open(config []byte) error
	ProcessLeft(r *eddy.Record) error
	ProcessRight(r *eddy.Record) error
	Close() error
}

// Register makes op the module's operator. Call it from an init function.
func Register(op Operator) {
	registered = op
	guest.Register(adapter{op})
}

var registered Operator

// errOneInput is eddy_process's answer: the host never calls it on a
// module of version 5 that exports eddy_process2, so a call means a host
// that does not know two-input operators.
var errOneInput = errors.New("co: this module is a two-input operator (package co): it takes records through eddy_process2, not eddy_process")

// adapter is what package guest sees: an Operator whose Process refuses,
// and the timer handler of the registered operator.
type adapter struct{ op Operator }

func (a adapter) Open(config []byte) error  { return a.op.Open(config) }
func (a adapter) Process(*abi.Record) error { return errOneInput }
func (a adapter) Close() error              { return a.op.Close() }

func (a adapter) OnTimer(t keyed.Timer) error {
	h, ok := a.op.(keyed.TimerHandler)
	if !ok {
		return errors.New("co: a timer fired, but the operator does not implement keyed.TimerHandler")
	}
	return h.OnTimer(t)
}

// Method values made once, so that a batch does not allocate.
var (
	left  = func(r *abi.Record) error { return registered.ProcessLeft(r) }
	right = func(r *abi.Record) error { return registered.ProcessRight(r) }
)

// process2 implements eddy_process2 on one batch of input.
func process2(input uint32, batch []byte) int32 {
	switch input {
	case Left:
		return guest.RunInput(batch, left)
	case Right:
		return guest.RunInput(batch, right)
	}
	return guest.RunInput(batch, func(*abi.Record) error {
		return errors.New("co: eddy_process2 called for an input other than 0 and 1")
	})
}
