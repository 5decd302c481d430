package host

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// TestValuesInParts runs testdata/parts.c, a version 7 module that emits
// each value as a part list (the second half of the input value, a comma
// from its static data, an empty part, the first half): the host gathers
// them, across batch sizes and on an instance reused for many batches.
func TestValuesInParts(t *testing.T) {
	e := newTestEngine(t, Config{})
	i := newTestInstance(t, loadFixture(t, e, "parts"), "job/parts[0]")
	if err := i.Open([]byte{'P'}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	values := []string{`{"a":1}`, ``, `x`, `abcdef`, strings.Repeat("0123456789", 300)}
	for _, size := range []int{1, 2, len(values)} {
		var c collector
		for start := 0; start < len(values); start += size {
			var recs []abi.Record
			for k, v := range values[start:min(start+size, len(values))] {
				recs = append(recs, abi.Record{Key: []byte{'k', byte('0' + start + k)}, Value: []byte(v), Timestamp: int64(start + k)})
			}
			if err := i.Process(recs, c.emit); err != nil {
				t.Fatalf("batches of %d: %v", size, err)
			}
		}
		if len(c.recs) != len(values) {
			t.Fatalf("batches of %d: %d records out, want %d", size, len(c.recs), len(values))
		}
		for k, v := range values {
			h := len(v) / 2
			want := v[h:] + "," + v[:h]
			r := c.recs[k]
			if string(r.Value) != want || string(r.Key) != string([]byte{'k', byte('0' + k)}) || r.Timestamp != int64(k) {
				t.Fatalf("batches of %d: record %d is (%q, %.40q, %d), want (k%d, %.40q, %d)", size, k, r.Key, r.Value, r.Timestamp, k, want, k)
			}
		}
	}
}

// TestValuesInPartsRefused: a part outside the memory traps the task with
// the address, one whose parts gather more than max_emit_bytes traps it
// with that limit (before the host gathers anything), and a module that
// declares version 6 cannot emit part lists at all.
func TestValuesInPartsRefused(t *testing.T) {
	e := newTestEngine(t, Config{})
	one := []abi.Record{{Key: []byte("k"), Value: []byte("v")}}
	for _, c := range []struct {
		fixture string
		mode    byte
		is      error
		words   []string
	}{
		{"parts", 'O', ErrBadPointer, []string{"eddy.emit: batch at", "record 0: part 0", "is outside the", "-byte memory"}},
		{"parts", 'B', ErrEmitLimit, []string{"max_emit_bytes=16777216", "the part lists of this eddy.emit gather more than the 16777216 bytes left"}},
		{"parts_v6", 'P', ErrBadPointer, []string{"eddy.emit: batch at", "record 0: value"}},
	} {
		t.Run(c.fixture+"/"+string(c.mode), func(t *testing.T) {
			i := newTestInstance(t, loadFixture(t, e, c.fixture), "job/parts[0]")
			if err := i.Open([]byte{c.mode}); err != nil {
				t.Fatalf("Open: %v", err)
			}
			var col collector
			err := i.Process(one, col.emit)
			if !errors.Is(err, c.is) {
				t.Fatalf("Process: %v, want %v", err, c.is)
			}
			for _, w := range c.words {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("Process: %v, want it to say %q", err, w)
				}
			}
			if len(col.recs) != 0 {
				t.Fatalf("%d records reached the caller", len(col.recs))
			}
		})
	}
}

// TestNumberPaths: the row entry of a number path is the value's float64,
// NaN when absent or not a number, beside a span path of the same path;
// a module of version 6 cannot declare one.
func TestNumberPaths(t *testing.T) {
	e := newTestEngine(t, Config{})
	i := newTestInstance(t, loadFixture(t, e, "parts"), "job/parts[0]")
	list := abi.EncodeFields([][]string{{"price"}}, [][]string{{"price"}, {"bid", "price"}})
	if err := i.Open(append([]byte{'F'}, list...)); err != nil {
		t.Fatalf("Open: %v", err)
	}
	in := []struct {
		value string
		price string  // the span of "price"
		n, m  float64 // the numbers; NaN: none
	}{
		{`{"price":150.25,"bid":{"price":-3e2}}`, `150.25`, 150.25, -300},
		{`{"price":"12","bid":{"price":12345678901234567890}}`, `"12"`, math.NaN(), 12345678901234567890},
		{`{"bid":{"price":1e400}}`, ``, math.NaN(), math.Inf(1)},
		{`{"price":0.1,"bid":[1]}`, `0.1`, 0.1, math.NaN()},
		{`{"price":1,}`, ``, math.NaN(), math.NaN()},
	}
	var recs []abi.Record
	for _, r := range in {
		recs = append(recs, abi.Record{Value: []byte(r.value)})
	}
	var c collector
	if err := i.Process(recs, c.emit); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	for k, r := range in {
		row := c.recs[k].Value
		if len(row) != abi.FieldRowSize(3) {
			t.Fatalf("record %d: row of %d bytes", k, len(row))
		}
		off, n := le.Uint32(row[4:]), le.Uint32(row[8:])
		span := ""
		if off != abi.FieldAbsent {
			// the module copied the row; the span's offset is in the input batch
			span = "present"
		}
		if (span == "") != (r.price == "") || span != "" && int(n) != len(r.price) {
			t.Fatalf("record %d: span (%#x, %d), want %q", k, off, n, r.price)
		}
		x, y := math.Float64frombits(le.Uint64(row[12:])), math.Float64frombits(le.Uint64(row[20:]))
		if !same(x, r.n) || !same(y, r.m) {
			t.Fatalf("record %d: numbers %v, %v, want %v, %v", k, x, y, r.n, r.m)
		}
	}

	v6 := newTestInstance(t, loadFixture(t, e, "parts_v6"), "job/parts[0]")
	err := v6.Open(append([]byte{'F'}, list...))
	if err == nil || !strings.Contains(err.Error(), "the list has number paths, which need ABI version 7, but the module declares 6") {
		t.Fatalf("a version 6 module declaring number paths: %v", err)
	}
}
