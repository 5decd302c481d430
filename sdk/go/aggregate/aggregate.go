// Package aggregate makes a Go Wasm module an Eddy aggregate module: the
// incremental aggregate of a window node (`aggregate: {wasm: {module: …}}`
// in a job spec), in the style of Flink's AggregateFunction. It implements
// the guest side of ABI version 3 (abi/ABI.md, "Aggregate modules").
//
// An aggregate folds records into an accumulator, a byte string of its own
// design that the window operator stores between calls and in checkpoints:
// Create makes an empty one, Add adds a record, Merge combines two (sliding
// windows merge their panes, session windows their sessions) and Result
// turns one into the window's result, a JSON value. Every method appends
// its output to a dst slice the SDK reuses, so an aggregate written in
// that style allocates nothing per record:
//
//	// Command count counts the records of each window.
//	package main
//
//	import (
//		"encoding/binary"
//		"errors"
//		"strconv"
//
//		eddy "github.com/eddy-stream/eddy/sdk/go"
//		"github.com/eddy-stream/eddy/sdk/go/aggregate"
//	)
//
//	type count struct{}
//
//	var errBad = errors.New("count: an accumulator is not 8 bytes")
//
//	func (count) Open(config []byte) error { return nil }
//
//	func (count) Create(dst []byte) []byte { return binary.LittleEndian.AppendUint64(dst, 0) }
//
//	func (count) Add(dst, acc []byte, r *eddy.Record) ([]byte, error) {
//		if len(acc) != 8 {
//			return dst, errBad
//		}
//		return binary.LittleEndian.AppendUint64(dst, binary.LittleEndian.Uint64(acc)+1), nil
//	}
//
//	func (count) Merge(dst, a, b []byte) ([]byte, error) {
//		if len(a) != 8 || len(b) != 8 {
//			return dst, errBad
//		}
//		return binary.LittleEndian.AppendUint64(dst, binary.LittleEndian.Uint64(a)+binary.LittleEndian.Uint64(b)), nil
//	}
//
//	func (count) Result(dst, acc []byte) ([]byte, error) {
//		if len(acc) != 8 {
//			return dst, errBad
//		}
//		return strconv.AppendUint(dst, binary.LittleEndian.Uint64(acc), 10), nil
//	}
//
//	func init() { aggregate.Register(count{}) }
//
//	func main() {}
//
// Build it like any Go module (GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared). Importing this package defines the exports
// eddy_agg_create, eddy_agg_add, eddy_agg_merge and eddy_agg_result and
// makes the module declare ABI version 3, which a host runs only as a
// window node's aggregate. A module registers either an aggregate or an
// eddy.Operator, not both; it must not import package keyed either, since
// the window operator keeps the accumulators and an aggregate has no state
// of its own. The module still exports eddy_process, as every module built
// with the Go SDK does (the ABI allows extra exports), but a call fails
// with a message saying that the module is an aggregate.
//
// For a window function, which sees all the elements of a window at once,
// see package window instead. Like package eddy, this package only works
// inside a Wasm guest; put the aggregate's algorithm in a pure-Go package
// to test it natively, as udfs/cardstats/stats does.
package aggregate

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eddy-stream/eddy/abi"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// Aggregate is what an aggregate module implements. The host drives one
// instance per task from one goroutine: the methods are never called
// concurrently.
//
// Accumulators are opaque to the SDK and the host, but they outlive the
// instance: the window operator stores them in its state and checkpoints,
// and hands them to other instances of the module, possibly after a
// restart. An accumulator must therefore be self-contained bytes (no
// pointers, no references to instance memory) in an encoding later
// versions of the module can still read.
//
// Add, Merge and Result append their output to dst and return the
// extended slice, as append does (dst is a buffer the SDK reuses, usually
// empty with spare capacity). Their inputs alias the host's batch or the
// SDK's buffers: they are valid only during the call, must not be
// modified, and never overlap dst. An error (or a panic) fails the task
// with its message; return one for an accumulator that does not decode
// rather than guessing.
//
// Do not call eddy.Emit from these methods: the SDK emits exactly the
// records the ABI asks for, and the host fails a call that emits more.
type Aggregate interface {
	// Open configures the aggregate before any other call. config is the
	// aggregate's config from the job spec as JSON ("{}" when absent); the
	// slice belongs to the aggregate.
	Open(config []byte) error
	// Create appends an empty accumulator to dst. The host calls it once
	// per instance and uses the result for every new window, so it must
	// depend on nothing but the configuration.
	Create(dst []byte) []byte
	// Add appends to dst the accumulator acc with the record r added
	// (Flink's add). r is one of the window's input records, as the task
	// received it.
	Add(dst, acc []byte, r *eddy.Record) ([]byte, error)
	// Merge appends to dst the merge of the accumulators a and b: a is
	// what the group has folded so far (its header's accumulator first), b
	// the group's next accumulator, in the host's order. Merging must be
	// associative, and merging with an empty accumulator (from Create)
	// must give the other one back unchanged.
	Merge(dst, a, b []byte) ([]byte, error)
	// Result appends to dst the window's result for the accumulator acc:
	// exactly one JSON value (object, array, number, string, true, false
	// or null). The host checks that it is valid JSON.
	Result(dst, acc []byte) ([]byte, error)
}

// abiVersion is the ABI version that defines aggregate modules.
const abiVersion = abi.AggregateVersion

func init() { guest.Version = abiVersion }

// registered is the module's aggregate; nil until Register.
var registered Aggregate

// Register makes a the module's aggregate. Call it once, from an init
// function (main never runs in a c-shared module). It panics if the
// module already registered an aggregate or an operator, or if package
// keyed is linked into it: an aggregate module can be nothing else.
func Register(a Aggregate) {
	if a == nil {
		panic("aggregate: Register(nil)")
	}
	if registered != nil {
		panic("aggregate: Register called more than once")
	}
	if guest.Registered() != nil {
		panic("aggregate: Register: the module already registered an operator with eddy.Register; a module is an operator or an aggregate, not both")
	}
	if err := checkVersion(); err != nil {
		panic(err.Error())
	}
	registered = a
	guest.Register(module{})
}

// checkVersion catches a module that links package keyed too, whose init
// sets version 2 (init order decides which package's version wins).
func checkVersion() error {
	if guest.Version != abiVersion {
		return fmt.Errorf("aggregate: the module declares ABI version %d, not %d: does it import package keyed? An aggregate keeps no state of its own", guest.Version, abiVersion)
	}
	return nil
}

// errNotOperator is the failure of eddy_process in an aggregate module.
var errNotOperator = errors.New("aggregate: this module is an aggregate module (it registered with aggregate.Register), not an operator: " +
	"use it as a window node's aggregate, which calls eddy_agg_add, not eddy_process")

// errNoAggregate is the failure of the aggregate exports in a module that
// registered an operator instead.
var errNoAggregate = errors.New("aggregate: no aggregate registered: call aggregate.Register from an init function (main never runs in a c-shared module)")

// module is what the SDK's runtime sees as the module's operator: it gives
// eddy_open to the aggregate and refuses eddy_process. As a
// guest.BatchOperator it refuses every batch, empty ones too.
type module struct{}

func (module) Open(config []byte) error {
	if err := checkVersion(); err != nil {
		return err
	}
	return registered.Open(config)
}

func (module) Process(*abi.Record) error            { return errNotOperator }
func (module) ProcessBatch(recs []abi.Record) error { return errNotOperator }
func (module) Close() error                         { return nil }

// Buffers reused by every call, so that folding allocates nothing once
// they have grown to the size of the accumulators. An accumulator being
// folded lives in one of folds while the next one is written into the
// other.
var (
	folds  [2][]byte
	result []byte
)

// The bodies of the exports, made once so that a call does not allocate.
var (
	createBody = func() error {
		if registered == nil {
			return errNoAggregate
		}
		folds[0] = registered.Create(folds[0][:0])
		emit(folds[0])
		return nil
	}
	addBody    = func(recs []abi.Record) error { return fold(recs, abi.ExportAggAdd, addMember) }
	mergeBody  = func(recs []abi.Record) error { return fold(recs, abi.ExportAggMerge, mergeMember) }
	resultBody = func(recs []abi.Record) error {
		if registered == nil {
			return errNoAggregate
		}
		for i := range recs {
			out, err := registered.Result(result[:0], recs[i].Value)
			if err != nil {
				return err
			}
			if !sameStart(out, recs[i].Value) {
				result = out[:0]
			}
			emit(out)
		}
		return nil
	}
	addMember   = func(dst, acc []byte, r *abi.Record) ([]byte, error) { return registered.Add(dst, acc, r) }
	mergeMember = func(dst, acc []byte, r *abi.Record) ([]byte, error) { return registered.Merge(dst, acc, r.Value) }
)

// create implements eddy_agg_create.
func create() int32 { return guest.Call(createBody) }

// add implements eddy_agg_add on a batch of groups.
func add(batch []byte) int32 { return guest.RunWhole(batch, abi.ExportAggAdd+" batch", addBody) }

// merge implements eddy_agg_merge on a batch of groups.
func merge(batch []byte) int32 { return guest.RunWhole(batch, abi.ExportAggMerge+" batch", mergeBody) }

// results implements eddy_agg_result on a batch of accumulators.
func results(batch []byte) int32 {
	return guest.RunWhole(batch, abi.ExportAggResult+" batch", resultBody)
}

// emit hands one answer to the host; only its value counts.
func emit(value []byte) { guest.Emit(&abi.Record{Value: value, Timestamp: abi.NoTimestamp}) }

// fold walks the groups of an eddy_agg_add or eddy_agg_merge batch (ABI.md,
// "Aggregate modules"): a header whose 4-byte key counts the members that
// follow and whose value is the accumulator to start from. It folds each
// group's members into that accumulator with step and emits the result,
// one record per group. Members are folded in order, each into the
// previous result: for Merge that makes the header's accumulator the left
// operand, which the ABI's associativity requirement makes the only thing
// that matters.
func fold(recs []abi.Record, what string, step func(dst, acc []byte, r *abi.Record) ([]byte, error)) error {
	if registered == nil {
		return errNoAggregate
	}
	for i := 0; i < len(recs); {
		header := &recs[i]
		if len(header.Key) != abi.GroupHeaderKeyLen {
			return fmt.Errorf("aggregate: %s: record %d should be a group header, with a %d-byte key, but its key has %d bytes",
				what, i, abi.GroupHeaderKeyLen, len(header.Key))
		}
		n := binary.LittleEndian.Uint32(header.Key)
		if uint64(n) > uint64(len(recs)-i-1) {
			return fmt.Errorf("aggregate: %s: the group header at record %d announces %d records, but only %d follow",
				what, i, n, len(recs)-i-1)
		}
		acc, w := header.Value, 0
		for j := i + 1; j <= i+int(n); j++ {
			out, err := step(folds[w][:0], acc, &recs[j])
			if err != nil {
				return err
			}
			if !sameStart(out, acc) { // out is folds[w], perhaps grown
				folds[w] = out[:0]
				w ^= 1
			}
			acc = out
		}
		emit(acc)
		i += 1 + int(n)
	}
	return nil
}

// sameStart reports whether a and b start at the same byte: a method that
// returned its input accumulator unchanged, against the contract but
// harmlessly, must not have it adopted as a buffer to write into.
func sameStart(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}
