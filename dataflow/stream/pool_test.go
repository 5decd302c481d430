package stream

import (
	"bytes"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// TestGetBatch: a batch from GetBatch, recycled or new, is empty with the
// room asked for, and holds what is added to it.
func TestGetBatch(t *testing.T) {
	for round := range 3 {
		b := GetBatch(8, 100)
		if b.Len() != 0 || b.Bytes() != 0 || cap(b.Records) < 8 || cap(b.arena) < 100 || len(b.Sides()) != 0 {
			t.Fatalf("round %d: GetBatch(8, 100) = %d records, %d bytes, room for %d records and %d bytes, %d sides",
				round, b.Len(), b.Bytes(), cap(b.Records), cap(b.arena), len(b.Sides()))
		}
		b.Add([]byte("k"), []byte("value"), 7)
		b.Side("late").Add(nil, []byte("x"), 1)
		if r := b.Records[0]; string(r.Key) != "k" || string(r.Value) != "value" || r.Timestamp != 7 {
			t.Fatalf("round %d: record %q %q %d", round, r.Key, r.Value, r.Timestamp)
		}
		b.Recycle()
	}
	var nilBatch *Batch
	nilBatch.Recycle() // no panic
}

// TestRecyclePoisons: built with -tags invariants, the bytes of a
// recycled batch are overwritten at once, so that a reader that kept them
// sees it.
func TestRecyclePoisons(t *testing.T) {
	if !invariants {
		t.Skip("poisoning is on with -tags invariants")
	}
	b := GetBatch(1, 16)
	b.Add(nil, []byte("value"), 0)
	v := b.Records[0].Value
	b.Recycle()
	if !bytes.Equal(v, bytes.Repeat([]byte{0xee}, len(v))) {
		t.Fatalf("a recycled batch's value reads %q, want it overwritten", v)
	}
}

type releaser bool

func (r releaser) ReleasesInput() bool { return bool(r) }

func TestReleasesInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   any
		want bool
	}{
		{"releases", releaser(true), true},
		{"keeps", releaser(false), false},
		{"does not say", struct{}{}, false},
	} {
		if got := ReleasesInput(tc.op); got != tc.want {
			t.Errorf("%s: ReleasesInput = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// BenchmarkDecodeBatch is the receive side of the exchange: an Exchange
// frame of 1,024 records decoded into a batch, which the consumer task
// recycles once its head stage is done with it (task.runGate).
func BenchmarkDecodeBatch(b *testing.B) {
	recs := make([]Record, 1024)
	for i := range recs {
		recs[i] = Record{Key: []byte("card-0042"), Value: bytes.Repeat([]byte("v"), 100), Timestamp: int64(i)}
	}
	buf := abi.AppendBatch(nil, recs)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		d, err := DecodeBatch(buf)
		if err != nil || d.Len() != len(recs) {
			b.Fatalf("DecodeBatch: %d records, %v", d.Len(), err)
		}
		d.Recycle()
	}
}

// TestDecodeBatchPooled: a decoded batch, from the pool, holds the
// frame's records (aliasing the frame, which it owns), and recycled it is
// an ordinary pooled batch again; a malformed frame is an error and takes
// nothing from the pool for good.
func TestDecodeBatchPooled(t *testing.T) {
	frame := func(n int) []byte {
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{Key: []byte{byte('a' + i)}, Value: bytes.Repeat([]byte{'v'}, i), Timestamp: int64(i)}
		}
		return abi.AppendBatch(nil, recs)
	}
	for round, n := range []int{3, 1, 40, 2} {
		buf := frame(n)
		b, err := DecodeBatch(buf)
		if err != nil || b.Len() != n {
			t.Fatalf("round %d: DecodeBatch: %d records, %v", round, b.Len(), err)
		}
		for i, r := range b.Records {
			if len(r.Key) != 1 || r.Key[0] != byte('a'+i) || len(r.Value) != i || r.Timestamp != int64(i) {
				t.Fatalf("round %d: record %d is %q %q %d", round, i, r.Key, r.Value, r.Timestamp)
			}
		}
		b.Records[0].Key[0] = '#'
		if bytes.IndexByte(buf, '#') < 0 {
			t.Fatalf("round %d: the records do not alias the frame", round)
		}
		b.Recycle()
		if _, err := DecodeBatch(buf[:len(buf)-1]); err == nil {
			t.Fatalf("round %d: a truncated frame decoded", round)
		}
		p := GetBatch(4, 16)
		p.Add([]byte("k"), []byte("x"), 9)
		if p.Len() != 1 || string(p.Records[0].Value) != "x" {
			t.Fatalf("round %d: a pooled batch after a decoded one holds %d records", round, p.Len())
		}
		p.Recycle()
	}
}
