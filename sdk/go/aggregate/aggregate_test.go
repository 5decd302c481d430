//go:build !wasip1

// The fake host below replaces the wasm imports, so these tests run
// natively. udfs/ runs aggregate modules inside real Wasm guests.

package aggregate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// recorder is a fake host that keeps copies of the emitted values.
type recorder struct {
	t        *testing.T
	values   [][]byte
	failures []string
	logs     []string
}

func (h *recorder) Emit(batch []byte) {
	recs, err := abi.DecodeBatch(batch, nil)
	if err != nil {
		h.t.Fatalf("emitted batch does not decode: %v", err)
	}
	for _, r := range recs {
		h.values = append(h.values, bytes.Clone(r.Value))
	}
}
func (h *recorder) Log(level int32, msg string) { h.logs = append(h.logs, msg) }
func (h *recorder) Fail(msg string)             { h.failures = append(h.failures, msg) }

// install makes a the registered aggregate for one test.
func install(t *testing.T, a Aggregate) *recorder {
	h := &recorder{t: t}
	undo := guest.SetTestHost(h, module{})
	registered = a
	t.Cleanup(func() { undo(); registered = nil })
	if st := guest.Open([]byte("{}")); st != abi.StatusOK {
		t.Fatalf("open: %v", h.failures)
	}
	return h
}

// trail is a test aggregate whose accumulator spells out how it was made:
// "" empty, "+v" per added value, "(a|b)" per merge. Its result is the
// trail as a JSON string. An accumulator or value "bad" is refused, and
// "panic" panics.
type trail struct {
	config []byte
	// lazy makes Add return acc itself for the value "same", against the
	// contract, to check that the SDK does not then write into it.
	lazy bool
}

func (a *trail) Open(config []byte) error { a.config = config; return nil }
func (a *trail) Create(dst []byte) []byte { return dst }

func (a *trail) Add(dst, acc []byte, r *eddy.Record) ([]byte, error) {
	switch string(r.Value) {
	case "bad":
		return dst, errors.New("trail: bad record")
	case "panic":
		panic("trail: boom")
	case "same":
		if a.lazy {
			return acc, nil
		}
	}
	if string(acc) == "bad" {
		return dst, errors.New("trail: bad accumulator")
	}
	dst = append(dst, acc...)
	dst = append(dst, '+')
	return append(dst, r.Value...), nil
}

func (a *trail) Merge(dst, x, y []byte) ([]byte, error) {
	if string(x) == "bad" || string(y) == "bad" {
		return dst, errors.New("trail: bad accumulator")
	}
	dst = append(dst, '(')
	dst = append(dst, x...)
	dst = append(dst, '|')
	dst = append(dst, y...)
	return append(dst, ')'), nil
}

func (a *trail) Result(dst, acc []byte) ([]byte, error) {
	if string(acc) == "bad" {
		return dst, errors.New("trail: bad accumulator")
	}
	return strconv.AppendQuote(dst, string(acc)), nil
}

func header(acc string, n int) abi.Record {
	return abi.Record{Key: binary.LittleEndian.AppendUint32(nil, uint32(n)), Value: []byte(acc), Timestamp: abi.NoTimestamp}
}

func rec(v string) abi.Record { return abi.Record{Key: []byte("key"), Value: []byte(v), Timestamp: 7} }

func batchOf(recs ...abi.Record) []byte { return abi.AppendBatch(nil, recs) }

func values(h *recorder) []string {
	var out []string
	for _, v := range h.values {
		out = append(out, string(v))
	}
	return out
}

func TestVersion(t *testing.T) {
	if guest.Version != abi.AggregateVersion {
		t.Fatalf("guest.Version = %d, want %d", guest.Version, abi.AggregateVersion)
	}
}

func TestCalls(t *testing.T) {
	a := &trail{}
	h := install(t, a)
	if string(a.config) != "{}" {
		t.Errorf("Open got %q", a.config)
	}
	if st := create(); st != abi.StatusOK || len(h.values) != 1 || len(h.values[0]) != 0 {
		t.Fatalf("create: status %d, values %q, failures %q", st, h.values, h.failures)
	}
	h.values = nil
	batch := batchOf(header("", 2), rec("a"), rec("b"), header("x", 0), header("y", 3), rec("c"), header("", 0), rec("d"))
	if st := add(batch); st != abi.StatusOK {
		t.Fatalf("add: %q", h.failures)
	}
	if got, want := values(h), []string{"+a+b", "x", "y+c++d"}; strings.Join(got, ",") != strings.Join(want, ",") {
		// The third group's second member looks like a header: members
		// are counted, not recognised by their keys.
		t.Fatalf("add = %q, want %q", got, want)
	}
	h.values = nil
	if st := merge(batchOf(header("a", 2), rec("b"), rec("c"), header("d", 1), rec(""))); st != abi.StatusOK {
		t.Fatalf("merge: %q", h.failures)
	}
	if got := values(h); strings.Join(got, ",") != "((a|b)|c),(d|)" {
		t.Fatalf("merge = %q", got)
	}
	h.values = nil
	if st := results(batchOf(rec("a+b"), rec(""), rec(`"`))); st != abi.StatusOK {
		t.Fatalf("result: %q", h.failures)
	}
	if got := values(h); strings.Join(got, ",") != `"a+b","","\""` {
		t.Fatalf("result = %q", got)
	}
}

// TestLongFolds folds accumulators larger than the output buffer through
// the SDK's two buffers, and one that a lazy Add hands back unchanged.
func TestLongFolds(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		h := install(t, &trail{lazy: lazy})
		recs := []abi.Record{header("start", 3000)}
		want := "start"
		for i := range 3000 {
			v := strings.Repeat(strconv.Itoa(i%10), 1+i%61)
			if i%7 == 0 {
				v = "same"
			}
			recs = append(recs, rec(v))
			if v != "same" || !lazy {
				want += "+" + v
			}
		}
		recs = append(recs, header("again", 1), rec("x"))
		if st := add(batchOf(recs...)); st != abi.StatusOK {
			t.Fatalf("lazy %v: %q", lazy, h.failures)
		}
		if len(want) <= eddy.OutputBufferSize {
			t.Fatalf("the accumulator (%d bytes) should be larger than the output buffer", len(want))
		}
		if got := values(h); len(got) != 2 || got[0] != want || got[1] != "again+x" {
			t.Fatalf("lazy %v: %d values, first %d bytes, want %d", lazy, len(got), len(got[0]), len(want))
		}
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name string
		call func() int32
		want string
	}{
		{"header key", func() int32 { return add(batchOf(rec("a"))) },
			"aggregate: eddy_agg_add: record 0 should be a group header, with a 4-byte key, but its key has 3 bytes"},
		{"missing members", func() int32 { return merge(batchOf(header("a", 1), rec("b"), header("c", 2), rec("d"))) },
			"aggregate: eddy_agg_merge: the group header at record 2 announces 2 records, but only 1 follow"},
		{"malformed batch", func() int32 { return results([]byte("EDB1")) },
			"eddy: eddy_agg_result batch: abi: malformed batch: 4 bytes is shorter than the 8-byte header"},
		{"add error", func() int32 { return add(batchOf(header("", 0), header("", 2), rec("a"), rec("bad"))) }, "trail: bad record"},
		{"add panic", func() int32 { return add(batchOf(header("", 1), rec("panic"))) }, "panic: trail: boom"},
		{"merge error", func() int32 { return merge(batchOf(header("a", 1), rec("bad"))) }, "trail: bad accumulator"},
		{"result error", func() int32 { return results(batchOf(rec("ok"), rec("bad"))) }, "trail: bad accumulator"},
		{"process", func() int32 { return guest.Process(batchOf(rec("a"))) }, errNotOperator.Error()},
		{"process nothing", func() int32 { return guest.Process(batchOf()) }, errNotOperator.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := install(t, &trail{})
			if st := tc.call(); st != abi.StatusError {
				t.Fatalf("status %d", st)
			}
			if len(h.failures) != 1 || h.failures[0] != tc.want {
				t.Fatalf("failures %q, want %q", h.failures, tc.want)
			}
			if len(h.values) != 0 {
				t.Fatalf("a failed call emitted %q", h.values)
			}
			// The next call is not affected.
			if st := add(batchOf(header("a", 1), rec("b"))); st != abi.StatusOK || len(h.values) != 1 || string(h.values[0]) != "a+b" {
				t.Fatalf("after the failure: status %d, %q", st, h.values)
			}
		})
	}
}

func TestNothingRegistered(t *testing.T) {
	h := &recorder{t: t}
	t.Cleanup(guest.SetTestHost(h, nil))
	if st := create(); st != abi.StatusError || len(h.failures) != 1 || h.failures[0] != guest.ErrNoOperator {
		t.Fatalf("status %d, failures %q", st, h.failures)
	}
	// A module that registered an operator but exports the aggregate
	// functions because it imports this package.
	h.failures = nil
	t.Cleanup(guest.SetTestHost(h, eddy.Func(func(*eddy.Record) error { return nil })))
	for _, call := range []func() int32{create, func() int32 { return add(batchOf(header("", 0))) }} {
		if st := call(); st != abi.StatusError {
			t.Errorf("status %d", st)
		}
	}
	if len(h.failures) != 2 || h.failures[0] != errNoAggregate.Error() || h.failures[1] != errNoAggregate.Error() {
		t.Fatalf("failures %q", h.failures)
	}
}

func TestRegister(t *testing.T) {
	h := &recorder{t: t}
	t.Cleanup(guest.SetTestHost(h, nil))
	t.Cleanup(func() { registered = nil })
	mustPanic := func(what, want string, fn func()) {
		t.Helper()
		defer func() {
			if p := recover(); p == nil || !strings.Contains(p.(string), want) {
				t.Errorf("%s: panic %v, want %q", what, p, want)
			}
		}()
		fn()
	}
	mustPanic("nil", "Register(nil)", func() { Register(nil) })
	Register(&trail{})
	if _, ok := guest.Registered().(module); !ok {
		t.Fatalf("the runtime's operator is %T", guest.Registered())
	}
	mustPanic("twice", "more than once", func() { Register(&trail{}) })
	registered = nil
	mustPanic("after an operator", "a module is an operator or an aggregate", func() { Register(&trail{}) })
	guest.SetTestHost(h, nil)
	guest.Version = 2 // as package keyed's init would
	defer func() { guest.Version = abiVersion }()
	mustPanic("with keyed", "does it import package keyed", func() { Register(&trail{}) })
}

// count is an aggregate that allocates nothing: an 8-byte counter.
type count struct{}

func (count) Open([]byte) error { return nil }
func (count) Create(dst []byte) []byte {
	return binary.LittleEndian.AppendUint64(dst, 0)
}
func (count) Add(dst, acc []byte, r *eddy.Record) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(dst, binary.LittleEndian.Uint64(acc)+1), nil
}
func (count) Merge(dst, a, b []byte) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(dst, binary.LittleEndian.Uint64(a)+binary.LittleEndian.Uint64(b)), nil
}
func (count) Result(dst, acc []byte) ([]byte, error) {
	return strconv.AppendUint(dst, binary.LittleEndian.Uint64(acc), 10), nil
}

type nopHost struct{}

func (nopHost) Emit([]byte)       {}
func (nopHost) Log(int32, string) {}
func (nopHost) Fail(string)       {}

func TestNoAllocations(t *testing.T) {
	install(t, count{})
	zero := make([]byte, 8)
	recs := []abi.Record{header(string(zero), 100)}
	for range 100 {
		recs = append(recs, rec("x"))
	}
	recs = append(recs, header(string(zero), 0))
	addBatch := batchOf(recs...)
	mergeBatch := batchOf(header(string(zero), 2), abi.Record{Value: zero}, abi.Record{Value: zero})
	resultBatch := batchOf(abi.Record{Value: zero}, abi.Record{Value: zero})
	undo := guest.SetTestHost(nopHost{}, module{})
	defer undo()
	calls := func() {
		if add(addBatch) != abi.StatusOK || merge(mergeBatch) != abi.StatusOK || results(resultBatch) != abi.StatusOK || create() != abi.StatusOK {
			t.Fatal("a call failed")
		}
	}
	calls() // grow the buffers once
	if n := testing.AllocsPerRun(50, calls); n != 0 {
		t.Errorf("%v allocations per round of calls", n)
	}
}
