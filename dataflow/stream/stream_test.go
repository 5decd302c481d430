package stream

import (
	"bytes"
	"fmt"
	"testing"
)

// TestAddSpare: a value appended to Spare's slice becomes a record in
// place, one that outgrew it or came from elsewhere is copied, and either
// way every record keeps its bytes while more are added, across new
// arenas and after a Reset.
func TestAddSpare(t *testing.T) {
	b := NewBatch(4)
	want := [][]byte{}
	inPlace, moved := 0, 0
	check := func(when string) {
		t.Helper()
		if b.Len() != len(want) {
			t.Fatalf("%s: %d records, want %d", when, b.Len(), len(want))
		}
		for i, r := range b.Records {
			if !bytes.Equal(r.Value, want[i]) || r.Key != nil || r.Timestamp != int64(i) {
				t.Fatalf("%s: record %d is %.40q/%.40q@%d, want %.40q@%d", when, i, r.Key, r.Value, r.Timestamp, want[i], i)
			}
			if cap(r.Value) != len(r.Value) {
				t.Fatalf("%s: record %d's value has room after it (cap %d, len %d): an append to it would overwrite the next", when, i, cap(r.Value), len(r.Value))
			}
		}
	}
	for i := range 2000 {
		ts := int64(len(want))
		switch i % 4 {
		case 0, 1: // in place
			v := fmt.Appendf(b.Spare(64), "value %d", i)
			before := b.Bytes()
			b.AddSpare(v, ts)
			if b.Bytes() != before+len(v) || &b.Records[b.Len()-1].Value[0] != &v[0] {
				t.Fatalf("value %d was copied, not taken in place", i)
			}
			want = append(want, v)
		case 2: // more than the room asked for: in place if the arena has
			// it anyway, else append moves it and AddSpare copies it
			spare := b.Spare(1)
			v := append(spare, bytes.Repeat([]byte{'x'}, 3000+i%7)...)
			b.AddSpare(v, ts)
			want = append(want, bytes.Clone(v))
			if &v[0] == &spare[:1][0] {
				inPlace++
			} else {
				moved++
				v[0] = 'y' // the caller's bytes are not the record's
			}
		case 3: // interleaved with Add, and a value from elsewhere
			own := []byte(fmt.Sprint("elsewhere ", i))
			b.AddSpare(own, ts)
			want = append(want, bytes.Clone(own))
			own[0] = 'E'
		}
		if i == 1000 {
			check("before Reset")
			b.Reset()
			want = want[:0]
		}
	}
	check("at the end")
	if inPlace == 0 || moved == 0 {
		t.Fatalf("values larger than the room asked for: %d fit in place, %d moved; want some of each", inPlace, moved)
	}
}

// TestNewBatchSized: the bytes asked for go into one arena, and Add still
// works past them.
func TestNewBatchSized(t *testing.T) {
	b := NewBatchSized(8, 1000)
	v := bytes.Repeat([]byte{'a'}, 100)
	for range 10 {
		b.Add(nil, v, 0)
	}
	if b.Bytes() != 1000 {
		t.Fatalf("10 values of 100 bytes filled %d bytes of the arena, want all 1000 of one arena", b.Bytes())
	}
	b.Add(nil, v, 0)
	if b.Bytes() != 100 || !bytes.Equal(b.Records[10].Value, v) || !bytes.Equal(b.Records[0].Value, v) {
		t.Fatalf("past the arena: %d bytes in the new one, record 10 %q", b.Bytes(), b.Records[10].Value)
	}
}
