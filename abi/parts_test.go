package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// partsBatch writes recs into a batch at offset at of a memory of size
// bytes, the values of the records whose index is in asParts as part
// lists: each value cut into pieces that are copied elsewhere in the
// memory (in reverse order, so no part is next to the one before it).
func partsBatch(t *testing.T, recs []Record, asParts map[int]bool, size, at int) (mem, batch []byte) {
	t.Helper()
	mem = bytes.Repeat([]byte{'#'}, size)
	free := size // parts go down from the end of the memory
	var w Writer
	w.Reset(mem[at : at+4096])
	le := binary.LittleEndian
	for i := range recs {
		if !asParts[i] {
			if !w.Append(&recs[i]) {
				t.Fatalf("record %d does not fit", i)
			}
			continue
		}
		v := recs[i].Value
		var pieces [][]byte
		for len(v) > 0 {
			n := min(len(v), 1+i%3)
			pieces = append(pieces, v[:n])
			v = v[n:]
		}
		pieces = append(pieces, nil) // an empty part is allowed
		list, ok := w.AppendPartList(&recs[i], len(pieces))
		if !ok {
			t.Fatalf("record %d does not fit", i)
		}
		for p, piece := range pieces {
			free -= len(piece)
			copy(mem[free:], piece)
			le.PutUint32(list[PartSize*p:], uint32(free))
			le.PutUint32(list[PartSize*p+4:], uint32(len(piece)))
		}
	}
	if free < at+4096 {
		t.Fatal("memory too small for the test's parts")
	}
	return mem, w.Bytes()
}

func TestGather(t *testing.T) {
	recs := []Record{
		{Key: []byte("k0"), Value: []byte(`{"a":1}`), Timestamp: 5},
		{Key: []byte("k1"), Value: []byte(`{"card":"4111","amount":150.25}`), Timestamp: 6, Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Value: []byte(``), Timestamp: NoTimestamp},
		{Key: []byte("k3"), Value: []byte(`plain again`)},
		{Value: []byte(`x`)},
	}
	mem, batch := partsBatch(t, recs, map[int]bool{1: true, 2: true, 4: true}, 1<<14, 64)
	var g Gather
	for round := range 2 { // the second Decode reuses the buffer
		got, err := g.Decode(batch, mem, nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, recs)
		if round == 0 {
			// a plain batch decodes as DecodeBatch does
			plain := AppendBatch(nil, recs)
			got, err := g.Decode(plain, plain, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, recs)
		}
	}
	// Without parts, the same batch does not decode.
	if _, err := DecodeBatch(batch, nil); err == nil {
		t.Fatal("DecodeBatch took a batch with part lists")
	}
}

func TestGatherRefuses(t *testing.T) {
	recs := []Record{{Value: []byte(`abcdef`)}, {Value: []byte(`{"x":[1,2,3]}`)}}
	le := binary.LittleEndian
	entry := func(i int) int { return HeaderSize + EntrySize*i }
	for _, c := range []struct {
		name   string
		mangle func(batch []byte) // batch lies inside the memory
		limit  uint64
		want   string
		is     error
	}{
		{"part past the memory", func(b []byte) {
			list := le.Uint32(b[entry(1)+16:])
			le.PutUint32(b[list+8:], 1<<14-2)
			le.PutUint32(b[list+12:], 3)
		}, 1 << 20, "part 1 [0x3ffe, 0x4001) is outside the 16384-byte memory", ErrMalformedBatch},
		{"address wraps", func(b []byte) {
			list := le.Uint32(b[entry(1)+16:])
			le.PutUint32(b[list:], 0xFFFFFFFF)
			le.PutUint32(b[list+4:], 2)
		}, 1 << 20, "is outside the 16384-byte memory", ErrMalformedBatch},
		{"list past the batch", func(b []byte) {
			le.PutUint32(b[entry(1)+20:], ValueParts|1<<20)
		}, 1 << 20, "part list of 1048576 parts", ErrMalformedBatch},
		{"over the limit", func([]byte) {}, 10, "gather more than the limit of 10 bytes", nil},
		{"a plain value past the batch", func(b []byte) {
			le.PutUint32(b[entry(0)+20:], 1<<20)
		}, 1 << 20, "record 0: value", ErrMalformedBatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem, batch := partsBatch(t, recs, map[int]bool{1: true}, 1<<14, 128)
			c.mangle(batch)
			var g Gather
			_, err := g.Decode(batch, mem, nil, c.limit)
			var limit *GatherLimitError
			if c.is == nil && !errors.As(err, &limit) || c.is != nil && !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode: %v, want %v with %q", err, c.is, c.want)
			}
		})
	}
}

func TestAppendPartListFull(t *testing.T) {
	var w Writer
	w.Reset(make([]byte, 64))
	if _, ok := w.AppendPartList(&Record{Key: []byte("k")}, 4); ok {
		t.Fatal("a part list larger than the buffer was accepted")
	}
	if _, ok := w.AppendPartList(&Record{}, 2); !ok || w.Len() != 1 {
		t.Fatal(fmt.Sprint("a part list that fits was refused, Len ", w.Len()))
	}
}

// TestAppendWords: a batch written with AppendWords is byte for byte the
// batch AppendPartList writes with the same list, with and without
// headers, and a record that does not fit is refused with nothing written.
func TestAppendWords(t *testing.T) {
	recs := []Record{
		{Key: []byte("k0"), Timestamp: 5},
		{Timestamp: NoTimestamp},
		{Key: []byte("k2"), Timestamp: 7, Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Key: []byte("key three"), Timestamp: -3},
	}
	lists := [][]uint64{{0x0000000300001000, 0x0000000700002000}, nil, {0x0000000100000010}, {1, 2, 3, 0xffffffffffffffff}}
	le := binary.LittleEndian
	var byList, byWords Writer
	byList.Reset(bytes.Repeat([]byte{'#'}, 512))
	byWords.Reset(bytes.Repeat([]byte{'#'}, 512))
	for i := range recs {
		list, ok := byList.AppendPartList(&recs[i], len(lists[i]))
		if !ok {
			t.Fatalf("record %d does not fit", i)
		}
		for p, x := range lists[i] {
			le.PutUint64(list[PartSize*p:], x)
		}
		if !byWords.AppendWords(&recs[i], lists[i]) {
			t.Fatalf("AppendWords: record %d does not fit", i)
		}
	}
	if a, b := byList.Bytes(), byWords.Bytes(); !bytes.Equal(a, b) {
		t.Fatalf("AppendWords wrote\n%q\nAppendPartList and the list\n%q", b, a)
	}
	var w Writer
	buf := bytes.Repeat([]byte{'#'}, 64)
	w.Reset(buf)
	if w.AppendWords(&Record{Key: []byte("k")}, []uint64{1, 2, 3, 4}) || w.Len() != 0 {
		t.Fatal("a part list larger than the buffer was accepted")
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{'#'}, 64)) {
		t.Fatal("a refused AppendWords wrote into the buffer")
	}
	if !w.AppendWords(&Record{}, []uint64{1, 2}) || w.Len() != 1 {
		t.Fatal("a part list that fits was refused")
	}
}

// BenchmarkGather: what the host pays per record of a batch of 256
// projected values of 7 parts each (Gather.Decode), against decoding the
// same values written whole (DecodeBatch).
func BenchmarkGather(b *testing.B) {
	value := []byte(`{"card":"4111111111111111","amount":150.25,"country":"DE"}`)
	recs := make([]Record, 256)
	for i := range recs {
		recs[i] = Record{Value: value, Timestamp: int64(i)}
	}
	mem := make([]byte, 1<<17)
	copy(mem[1<<16:], value)
	var w Writer
	w.Reset(mem[:1<<16])
	le := binary.LittleEndian
	for i := range recs {
		list, ok := w.AppendPartList(&recs[i], 7)
		if !ok {
			b.Fatal("full")
		}
		for p := range 7 {
			le.PutUint32(list[PartSize*p:], uint32(1<<16+8*p))
			le.PutUint32(list[PartSize*p+4:], 8)
		}
	}
	batch := w.Bytes()
	whole := AppendBatch(nil, recs)
	b.Run("parts", func(b *testing.B) {
		var g Gather
		dst := make([]Record, 0, 256)
		for b.Loop() {
			if _, err := g.Decode(batch, mem, dst[:0], 1<<30); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
	})
	b.Run("whole", func(b *testing.B) {
		dst := make([]Record, 0, 256)
		for b.Loop() {
			if _, err := DecodeBatch(whole, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
	})
}
