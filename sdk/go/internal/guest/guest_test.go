//go:build !wasip1

// The fake host below replaces the wasm imports, so these tests run natively.

package guest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// recorder is a fake host: it decodes every emitted batch as the real host
// does and keeps copies, since the guest reuses its buffer at once.
type recorder struct {
	t        *testing.T
	records  []abi.Record
	sizes    []int // bytes of each emitted batch
	counts   []int // records of each emitted batch
	failures []string
	logs     []string
}

func (h *recorder) Emit(batch []byte) {
	recs, err := abi.DecodeBatch(batch, nil)
	if err != nil {
		h.t.Fatalf("emitted batch does not decode: %v", err)
	}
	for _, r := range recs {
		h.records = append(h.records, abi.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp, Headers: r.Headers})
	}
	h.sizes = append(h.sizes, len(batch))
	h.counts = append(h.counts, len(recs))
}

func (h *recorder) Log(level int32, msg string) { h.logs = append(h.logs, msg) }
func (h *recorder) Fail(msg string)             { h.failures = append(h.failures, msg) }

// The names of package eddy's API, which these tests were written against.
type (
	Record = abi.Record
	Header = abi.Header
)

const NoTimestamp = abi.NoTimestamp

type funcOperator func(r *Record) error

func (f funcOperator) Open([]byte) error       { return nil }
func (f funcOperator) Process(r *Record) error { return f(r) }
func (f funcOperator) Close() error            { return nil }

func Func(fn func(r *Record) error) Operator { return funcOperator(fn) }

func emitKV(key, value []byte, timestamp int64) {
	Emit(&Record{Key: key, Value: value, Timestamp: timestamp})
}

// install makes op the registered operator and h the host for one test.
func install(t *testing.T, op Operator) *recorder {
	h := &recorder{t: t}
	t.Cleanup(SetTestHost(h, op))
	return h
}

// operator is a configurable test operator.
type operator struct {
	config  []byte
	open    func(config []byte) error
	process func(r *Record) error
	close   func() error
}

func (o *operator) Open(config []byte) error {
	o.config = config
	if o.open != nil {
		return o.open(config)
	}
	return nil
}

func (o *operator) Process(r *Record) error { return o.process(r) }

func (o *operator) Close() error {
	if o.close != nil {
		return o.close()
	}
	return nil
}

func echo(r *Record) error {
	Emit(r)
	return nil
}

func batchOf(recs ...Record) []byte { return abi.AppendBatch(nil, recs) }

func TestProcessEmitsInOrder(t *testing.T) {
	h := install(t, Func(echo))
	in := []Record{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: 1},
		{Value: []byte("no key"), Timestamp: NoTimestamp, Headers: []Header{{Key: "h", Value: []byte("x")}}},
		{},
	}
	if st := Process(batchOf(in...)); st != abi.StatusOK {
		t.Fatalf("status %d: %v", st, h.failures)
	}
	if len(h.counts) != 1 || h.counts[0] != len(in) {
		t.Fatalf("emitted batches %v, want one of %d records", h.counts, len(in))
	}
	for i := range in {
		g, w := h.records[i], in[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Timestamp != w.Timestamp || len(g.Headers) != len(w.Headers) {
			t.Errorf("record %d = %+v, want %+v", i, g, w)
		}
	}
	if st := Process(batchOf()); st != abi.StatusOK || len(h.counts) != 1 {
		t.Errorf("an empty batch: status %d, %d emits", st, len(h.counts))
	}
}

func TestFlushesAndLargeRecords(t *testing.T) {
	h := install(t, Func(func(r *Record) error {
		emitKV(r.Key, r.Value, r.Timestamp)
		return nil
	}))
	var in []Record
	for i := range 3000 {
		v := []byte(fmt.Sprintf(`{"i": %d, "pad": "%s"}`, i, strings.Repeat("x", i%97)))
		if i == 1000 || i == 1001 || i == 2999 {
			v = bytes.Repeat([]byte{byte('a' + i%26)}, OutputBufferSize+i)
		}
		in = append(in, Record{Key: []byte(fmt.Sprint(i)), Value: v, Timestamp: int64(i)})
	}
	if st := Process(batchOf(in...)); st != abi.StatusOK {
		t.Fatalf("status %d: %v", st, h.failures)
	}
	if len(h.records) != len(in) {
		t.Fatalf("%d records out, want %d", len(h.records), len(in))
	}
	for i := range in {
		if !bytes.Equal(h.records[i].Value, in[i].Value) || h.records[i].Timestamp != int64(i) {
			t.Fatalf("record %d out of order or changed", i)
		}
	}
	large := 0
	for i, size := range h.sizes {
		switch {
		case size == OutputBufferSize:
		case size > OutputBufferSize && h.counts[i] == 1:
			large++
		default:
			t.Errorf("batch %d: %d bytes with %d records", i, size, h.counts[i])
		}
	}
	if large != 3 || len(h.sizes) < 6 {
		t.Errorf("%d emits, %d of them large; want several and 3", len(h.sizes), large)
	}
}

func TestFailures(t *testing.T) {
	boom := errors.New("boom: bad record")
	tests := []struct {
		name string
		op   *operator
		call func() int32
		want string
	}{
		{"process error", &operator{process: func(r *Record) error { Emit(r); return boom }},
			func() int32 { return Process(batchOf(Record{Value: []byte("x")})) }, "boom: bad record"},
		{"process panic", &operator{process: func(r *Record) error { panic("kaput") }},
			func() int32 { return Process(batchOf(Record{})) }, "panic: kaput"},
		{"nil dereference", &operator{process: func(r *Record) error { var p *Record; _ = p.Key; return nil }},
			func() int32 { return Process(batchOf(Record{})) }, "panic: runtime error: invalid memory address or nil pointer dereference"},
		{"open error", &operator{open: func([]byte) error { return boom }},
			func() int32 { return Open([]byte("{}")) }, "boom: bad record"},
		{"emit in open", &operator{open: func([]byte) error { emitKV(nil, nil, 0); return nil }},
			func() int32 { return Open([]byte("{}")) }, "panic: eddy: Emit called outside Process and Close"},
		{"close error", &operator{close: func() error { emitKV(nil, []byte("x"), 0); return boom }},
			Close, "boom: bad record"},
		{"malformed batch", &operator{process: echo},
			func() int32 { return Process([]byte("EDB1")) }, "eddy: input batch: abi: malformed batch: 4 bytes is shorter than the 8-byte header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := install(t, tc.op)
			if st := tc.call(); st != abi.StatusError {
				t.Fatalf("status %d, want %d", st, abi.StatusError)
			}
			if len(h.failures) != 1 || h.failures[0] != tc.want {
				t.Fatalf("failures %q, want %q", h.failures, tc.want)
			}
			if len(h.records) != 0 {
				t.Fatalf("a failed call emitted %d records", len(h.records))
			}
			if strings.HasPrefix(tc.want, "panic") && (len(h.logs) != 1 || !strings.Contains(h.logs[0], "goroutine")) {
				t.Fatalf("a panic should log its stack, logs: %q", h.logs)
			}
			// A later call starts clean: nothing from the failed one leaks.
			registered = Func(echo)
			if st := Process(batchOf(Record{Value: []byte("next")})); st != abi.StatusOK ||
				len(h.records) != 1 || string(h.records[0].Value) != "next" {
				t.Fatalf("after the failure: status %d, records %v", st, h.records)
			}
		})
	}
}

func TestNoOperator(t *testing.T) {
	h := install(t, nil)
	for _, call := range []func() int32{func() int32 { return Open(nil) }, func() int32 { return Process(batchOf()) }, Close} {
		if st := call(); st != abi.StatusError {
			t.Errorf("status %d without an operator", st)
		}
	}
	if len(h.failures) != 3 || h.failures[0] != ErrNoOperator {
		t.Errorf("failures %q", h.failures)
	}
}

func TestOpenOwnsConfigAndCloseFlushes(t *testing.T) {
	op := &operator{close: func() error { emitKV([]byte("k"), []byte("last"), 7); return nil }}
	h := install(t, op)
	config := []byte(`{"a": 1}`)
	if st := Open(config); st != abi.StatusOK {
		t.Fatal(h.failures)
	}
	copy(config, "XXXXXXXX") // the host reuses the buffer for the first batch
	if string(op.config) != `{"a": 1}` {
		t.Errorf("Open's config changed to %q with the host's buffer", op.config)
	}
	if st := Close(); st != abi.StatusOK || len(h.records) != 1 || string(h.records[0].Value) != "last" {
		t.Errorf("Close: status %d, records %v", st, h.records)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	install(t, Func(echo))
	defer func() {
		if recover() == nil {
			t.Error("a second Register did not panic")
		}
	}()
	Register(Func(echo))
}

func TestProcessNoAllocations(t *testing.T) {
	install(t, Func(func(r *Record) error {
		Emit(&Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		emitKV(r.Key, r.Value, r.Timestamp)
		return nil
	}))
	var in []Record
	for i := range 100 {
		in = append(in, Record{Key: []byte("key"), Value: []byte(fmt.Sprintf(`{"n": %d}`, i)), Timestamp: int64(i)})
	}
	batch := batchOf(in...)
	testHost = nopHost{}
	Process(batch) // size the decode slice once
	if n := testing.AllocsPerRun(50, func() { Process(batch) }); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
}

type nopHost struct{}

func (nopHost) Emit([]byte)       {}
func (nopHost) Log(int32, string) {}
func (nopHost) Fail(string)       {}

// wholeOperator takes each batch whole (a BatchOperator).
type wholeOperator struct {
	operator
	batch func(recs []Record) error
}

func (o *wholeOperator) ProcessBatch(recs []Record) error { return o.batch(recs) }

func TestBatchOperator(t *testing.T) {
	var sizes []int
	op := &wholeOperator{
		operator: operator{process: func(*Record) error { t.Fatal("Process called on a BatchOperator"); return nil }},
		batch: func(recs []Record) error {
			sizes = append(sizes, len(recs))
			if _, ok := CurrentKey(); ok {
				t.Error("a whole batch has a current key")
			}
			for i := range recs {
				switch string(recs[i].Value) {
				case "error":
					return errors.New("whole: bad batch")
				case "panic":
					panic("whole: boom")
				}
				Emit(&recs[len(recs)-1-i]) // in reverse: the operator sees them all
			}
			return nil
		},
	}
	h := install(t, op)
	if st := Process(batchOf(Record{Value: []byte("a")}, Record{Value: []byte("b")})); st != abi.StatusOK {
		t.Fatalf("status %d: %v", st, h.failures)
	}
	if st := Process(batchOf()); st != abi.StatusOK {
		t.Fatalf("empty batch: status %d", st)
	}
	if len(sizes) != 2 || sizes[0] != 2 || sizes[1] != 0 || len(h.records) != 2 || string(h.records[0].Value) != "b" {
		t.Fatalf("batches of %v, records %v", sizes, h.records)
	}
	for _, tc := range []struct{ value, want string }{{"error", "whole: bad batch"}, {"panic", "panic: whole: boom"}} {
		h.records, h.failures = nil, nil
		if st := Process(batchOf(Record{Value: []byte("x")}, Record{Value: []byte(tc.value)})); st != abi.StatusError {
			t.Fatalf("%s: status %d", tc.value, st)
		}
		if len(h.failures) != 1 || h.failures[0] != tc.want || len(h.records) != 0 {
			t.Fatalf("%s: failures %q, records %v", tc.value, h.failures, h.records)
		}
	}
	h.failures = nil
	if st := Process([]byte("EDB1")); st != abi.StatusError || len(h.failures) != 1 ||
		h.failures[0] != "eddy: input batch: abi: malformed batch: 4 bytes is shorter than the 8-byte header" {
		t.Fatalf("malformed batch: status %d, failures %q", st, h.failures)
	}
}

func TestCall(t *testing.T) {
	h := install(t, Func(echo))
	if st := Call(func() error { emitKV(nil, []byte("created"), NoTimestamp); return nil }); st != abi.StatusOK {
		t.Fatalf("status %d", st)
	}
	if len(h.records) != 1 || string(h.records[0].Value) != "created" {
		t.Fatalf("records %v", h.records)
	}
	if st := Call(func() error { emitKV(nil, []byte("dropped"), 0); return errors.New("call failed") }); st != abi.StatusError ||
		len(h.failures) != 1 || h.failures[0] != "call failed" || len(h.records) != 1 {
		t.Fatalf("status %d, failures %q, records %v", st, h.failures, h.records)
	}
	// Emit is refused again after the call.
	if st := Open([]byte("{}")); st != abi.StatusOK {
		t.Fatal(h.failures)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Emit after Call did not panic")
			}
		}()
		emitKV(nil, nil, 0)
	}()
	undo := SetTestHost(h, nil)
	defer undo()
	if st := Call(func() error { return nil }); st != abi.StatusError || h.failures[len(h.failures)-1] != ErrNoOperator {
		t.Fatalf("without an operator: status %d, failures %q", st, h.failures)
	}
}
