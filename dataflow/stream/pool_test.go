package stream

import (
	"bytes"
	"testing"
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
