//go:build !wasip1

// The fake host below replaces the wasm imports, so these tests run
// natively. udfs/ runs window functions inside real Wasm guests.

package window

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

type recorder struct {
	t        *testing.T
	records  []abi.Record
	failures []string
}

func (h *recorder) Emit(batch []byte) {
	recs, err := abi.DecodeBatch(batch, nil)
	if err != nil {
		h.t.Fatalf("emitted batch does not decode: %v", err)
	}
	for _, r := range recs {
		h.records = append(h.records, abi.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp})
	}
}
func (h *recorder) Log(int32, string) {}
func (h *recorder) Fail(msg string)   { h.failures = append(h.failures, msg) }

func install(t *testing.T, f Function) *recorder {
	h := &recorder{t: t}
	t.Cleanup(guest.SetTestHost(h, nil))
	Register(f)
	if st := guest.Open([]byte(`{"n":1}`)); st != abi.StatusOK {
		t.Fatalf("open: %q", h.failures)
	}
	return h
}

func descriptorOf(key string, start, end int64) abi.Record {
	v := binary.LittleEndian.AppendUint64(nil, uint64(start))
	v = binary.LittleEndian.AppendUint64(v, uint64(end))
	return abi.Record{Key: []byte(key), Value: v, Timestamp: end - 1}
}

// summary emits one record per window: its bounds and its elements.
type summary struct{ config []byte }

func (s *summary) Open(config []byte) error { s.config = config; return nil }

func (s *summary) Apply(w Window, elems []eddy.Record) error {
	v := fmt.Appendf(nil, "[%d,%d) %d:", w.Start, w.End, len(elems))
	for _, e := range elems {
		if string(e.Value) == "fail" {
			return errors.New("summary: failing")
		}
		v = fmt.Appendf(v, " %s@%d", e.Value, e.Timestamp)
	}
	eddy.EmitKV(w.Key, v, w.MaxTimestamp())
	return nil
}

func TestApply(t *testing.T) {
	s := &summary{}
	h := install(t, s)
	if string(s.config) != `{"n":1}` {
		t.Errorf("Open got %q", s.config)
	}
	batches := [][]abi.Record{
		{descriptorOf("k", 0, 10), {Value: []byte("a"), Timestamp: 1}, {Value: []byte("b"), Timestamp: 9}},
		{descriptorOf("", -20, -10)},
		// An element may look like a descriptor: only record 0 is one.
		{descriptorOf("j", 1<<40, 1<<41), descriptorOf("x", 1, 2)},
	}
	for _, b := range batches {
		if st := guest.Process(abi.AppendBatch(nil, b)); st != abi.StatusOK {
			t.Fatalf("status %d: %q", st, h.failures)
		}
	}
	want := []string{
		`k [0,10) 2: a@1 b@9 @9`,
		` [-20,-10) 0: @-11`,
		"j [1099511627776,2199023255552) 1: \x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00@1 @2199023255551",
	}
	if len(h.records) != len(want) {
		t.Fatalf("%d records, want %d", len(h.records), len(want))
	}
	for i, r := range h.records {
		if got := fmt.Sprintf("%s %s @%d", r.Key, r.Value, r.Timestamp); got != want[i] {
			t.Errorf("record %d: %q, want %q", i, got, want[i])
		}
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name  string
		batch []abi.Record
		want  string
	}{
		{"empty", nil, "window: an empty batch: a window function's batch starts with the window's descriptor; is the module used as a window node's apply?"},
		{"no descriptor", []abi.Record{{Key: []byte("k"), Value: []byte("abc")}},
			"window: record 0 is not a window descriptor: its value has 3 bytes, want 16; is the module used as a window node's apply?"},
		{"apply error", []abi.Record{descriptorOf("k", 0, 1), {Value: []byte("ok")}, {Value: []byte("fail")}}, "summary: failing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := install(t, &summary{})
			if st := guest.Process(abi.AppendBatch(nil, tc.batch)); st != abi.StatusError {
				t.Fatalf("status %d", st)
			}
			if len(h.failures) != 1 || h.failures[0] != tc.want || len(h.records) != 0 {
				t.Fatalf("failures %q, records %d; want %q", h.failures, len(h.records), tc.want)
			}
		})
	}
}

func TestFunc(t *testing.T) {
	var got Window
	var n int
	install(t, Func(func(w Window, elems []eddy.Record) error {
		got, n = w, len(elems)
		return nil
	}))
	if st := guest.Process(abi.AppendBatch(nil, []abi.Record{descriptorOf("key", 5, 7), {}, {}})); st != abi.StatusOK {
		t.Fatalf("status %d", st)
	}
	if string(got.Key) != "key" || got.Start != 5 || got.End != 7 || got.MaxTimestamp() != 6 || n != 2 {
		t.Fatalf("window %+v with %d elements", got, n)
	}
}

type nopHost struct{}

func (nopHost) Emit([]byte)       {}
func (nopHost) Log(int32, string) {}
func (nopHost) Fail(string)       {}

func TestNoAllocations(t *testing.T) {
	install(t, Func(func(w Window, elems []eddy.Record) error {
		for i := range elems {
			eddy.EmitKV(w.Key, elems[i].Value, w.MaxTimestamp())
		}
		return nil
	}))
	recs := []abi.Record{descriptorOf("k", 0, 100)}
	for i := range 100 {
		recs = append(recs, abi.Record{Value: []byte("element"), Timestamp: int64(i)})
	}
	batch := abi.AppendBatch(nil, recs)
	t.Cleanup(guest.SetTestHost(nopHost{}, guest.Registered()))
	guest.Process(batch) // size the decode slice once
	if n := testing.AllocsPerRun(50, func() { guest.Process(batch) }); n != 0 {
		t.Errorf("%v allocations per window", n)
	}
}
