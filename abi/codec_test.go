package abi

import (
	"bytes"
	"errors"
	"testing"
)

func sampleRecords() []Record {
	return []Record{
		{Key: []byte("k1"), Value: []byte(`{"a":1}`), Timestamp: 42},
		{Value: []byte("no key"), Timestamp: NoTimestamp},
		{Key: []byte("h"), Value: []byte("v"), Timestamp: -5, Headers: []Header{{Key: "trace", Value: []byte("abc")}, {Key: "empty"}}},
		{},
	}
}

func equalRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Timestamp != w.Timestamp || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
	}{
		{"empty", nil},
		{"one", sampleRecords()[:1]},
		{"mixed", sampleRecords()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := AppendBatch(nil, tc.recs)
			if len(buf) != EncodedSize(tc.recs) {
				t.Fatalf("encoded %d bytes, EncodedSize says %d", len(buf), EncodedSize(tc.recs))
			}
			got, err := DecodeBatch(buf, nil)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, tc.recs)
		})
	}
}

func TestWriter(t *testing.T) {
	recs := sampleRecords()
	var w Writer
	w.Reset(make([]byte, 256))
	for i := range recs {
		if !w.Append(&recs[i]) {
			t.Fatalf("record %d did not fit", i)
		}
	}
	got, err := DecodeBatch(w.Bytes(), nil)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, recs)

	w.Reset(make([]byte, 64))
	big := Record{Value: make([]byte, 100)}
	if w.Append(&big) {
		t.Fatal("a record larger than the buffer was accepted")
	}
	if w.Len() != 0 {
		t.Fatalf("Len = %d after a refused append", w.Len())
	}
}

func TestDecodeErrors(t *testing.T) {
	good := AppendBatch(nil, sampleRecords()[:1])
	tests := []struct {
		name   string
		mangle func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:4] }},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"count too large", func(b []byte) []byte { b[4] = 200; return b }},
		{"key past end", func(b []byte) []byte { b[HeaderSize+12] = 250; return b }},
		{"value offset past end", func(b []byte) []byte { b[HeaderSize+16+3] = 0x7f; return b }},
		{"headers past end", func(b []byte) []byte { b[HeaderSize+28] = 9; return b }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := tc.mangle(append([]byte(nil), good...))
			_, err := DecodeBatch(buf, nil)
			if !errors.Is(err, ErrMalformedBatch) {
				t.Fatalf("err = %v, want ErrMalformedBatch", err)
			}
		})
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, sampleRecords()))
	f.Add(AppendBatch(nil, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeBatch(b, nil)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode and decode to the same records.
		again, err := DecodeBatch(AppendBatch(nil, recs), nil)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		equalRecords(t, again, recs)
	})
}

func BenchmarkEncodeDecode(b *testing.B) {
	recs := make([]Record, 256)
	for i := range recs {
		recs[i] = Record{Key: []byte("card-0001"), Value: []byte(`{"card":"c1","amount":12.5,"country":"DE"}`), Timestamp: int64(i)}
	}
	buf := make([]byte, EncodedSize(recs))
	out := make([]Record, 0, len(recs))
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		EncodeBatch(buf, recs)
		out, _ = DecodeBatch(buf, out[:0])
	}
}
