package abi

import (
	"encoding/binary"
	"fmt"
)

// Version 7 (ABI.md, "Version 7: values in parts and numbers the host
// parses"): a module may emit a record whose value is a list of parts in
// its memory, which the host gathers while it takes the batch, and may
// declare number paths, whose row entry is the value's float64.

// PartsVersion is the least version of a module whose emitted batches may
// carry part lists, or whose field list may hold number paths.
const PartsVersion = 7

// ValueParts, set in an emitted entry's value_len, says that the value is
// a part list: value_off is where in the batch the list starts, and the
// other bits are its number of parts, each a u32 address in the module's
// memory and a u32 length.
const ValueParts uint32 = 1 << 31

// PartSize is the size of one part of a part list.
const PartSize = 8

// AppendPartList adds r to the batch with its value a list of n parts,
// and returns the PartSize × n bytes where the caller writes them (u32
// address, u32 length each, little-endian); r.Value is not used. Like
// Append, it reports false and writes nothing when the record does not
// fit.
func (w *Writer) AppendPartList(r *Record, n int) ([]byte, bool) {
	if n < 0 || uint32(n) >= ValueParts {
		return nil, false
	}
	vl := PartSize * n
	data, ok := w.put(r, vl, ValueParts|uint32(n))
	if !ok {
		return nil, false
	}
	at := data + len(r.Key)
	return w.buf[at : at+vl : at+vl], true
}

// AppendWords is AppendPartList with the list given: it adds r to the
// batch with its value the part list words, each a part's u32 address in
// its low half and u32 length in its high half (the PartSize
// little-endian bytes of the list), and reports false, writing nothing,
// when the record does not fit. It writes the entry, the key and the list
// in one call with no slice handed back, which is what a Go-compiled
// guest pays for per record (ABI.md, "Version 7"): it repeats put's entry
// because AppendPartList and a loop filling its slice cost the Go
// projection ~30 ns more a record (eddy-bench -only operator).
func (w *Writer) AppendWords(r *Record, words []uint64) bool {
	n := len(words)
	le := binary.LittleEndian
	if len(r.Headers) > 0 {
		list, ok := w.AppendPartList(r, n)
		for p := 0; ok && p < n; p++ {
			le.PutUint64(list[PartSize*p:], words[p])
		}
		return ok
	}
	if uint32(n) >= ValueParts {
		return false
	}
	kl, vl := len(r.Key), PartSize*n
	at := HeaderSize + EntrySize*w.count
	data := w.data - kl - vl
	if data < at+EntrySize {
		return false
	}
	buf := w.buf
	e := buf[at : at+EntrySize : at+EntrySize]
	le.PutUint64(e[0:], uint64(r.Timestamp))
	le.PutUint32(e[8:], uint32(data))
	le.PutUint32(e[12:], uint32(kl))
	le.PutUint32(e[16:], uint32(data+kl))
	le.PutUint32(e[20:], ValueParts|uint32(n))
	le.PutUint64(e[24:], 0)
	copy(buf[data:], r.Key)
	list := buf[data+kl : data+kl+vl : data+kl+vl]
	for p, x := range words {
		le.PutUint64(list[PartSize*p:], x)
	}
	w.data = data
	w.count++
	return true
}

// Gather is the host's side of values in parts: it decodes the batches a
// module of version 7 emits and gathers each part list into a value of
// its own. The gathered values live in Gather's buffer until the next
// Decode; the zero Gather is ready to use. One Gather serves one instance.
type Gather struct {
	lists []int // scratch: the records whose value is a part list
	buf   []byte
}

// GatherLimitError is Gather.Decode's error when the values its part
// lists gather come to more than its limit.
type GatherLimitError struct{ Limit uint64 }

func (e *GatherLimitError) Error() string {
	return fmt.Sprintf("abi: the part lists gather more than the limit of %d bytes", e.Limit)
}

// Decode decodes batch, which lies in mem (the module's whole memory), as
// DecodeBatch does, except that a value whose value_len has ValueParts set
// is a part list: its list must lie inside the batch and each part inside
// mem, and the record's value is the concatenation of the parts. Values
// that are not part lists alias batch, as with DecodeBatch. If the
// gathered values would come to more than limit bytes, the error is a
// *GatherLimitError (the host checks as it gathers, so it never holds
// more than limit bytes for a batch).
func (g *Gather) Decode(batch, mem []byte, dst []Record, limit uint64) ([]Record, error) {
	start := len(dst)
	dst, err := decodeBatch(batch, dst, true)
	if err != nil {
		return dst, err
	}
	recs := dst[start:]
	le := binary.LittleEndian
	size := uint64(len(batch))
	buf, at := g.buf[:cap(g.buf)], 0
	for i := range recs {
		vl := le.Uint32(batch[HeaderSize+EntrySize*i+20:])
		if vl&ValueParts == 0 {
			continue
		}
		vo, n := uint64(le.Uint32(batch[HeaderSize+EntrySize*i+16:])), uint64(vl&^ValueParts)
		if vo+PartSize*n > size {
			return dst[:start], fmt.Errorf("%w: record %d: part list of %d parts at %d is outside the %d-byte batch", ErrMalformedBatch, i, n, vo, len(batch))
		}
		list := batch[vo : vo+PartSize*n]
		from := at
		for p := 0; p+PartSize <= len(list); p += PartSize {
			addr, l := uint64(le.Uint32(list[p:])), uint64(le.Uint32(list[p+4:]))
			if addr+l > uint64(len(mem)) {
				return dst[:start], fmt.Errorf("%w: record %d: part %d [%#x, %#x) is outside the %d-byte memory", ErrMalformedBatch, i, p/PartSize, addr, addr+l, len(mem))
			}
			if uint64(at)+l > limit {
				return dst[:start], &GatherLimitError{Limit: limit}
			}
			if uint64(len(buf)-at) < l+16 {
				// Grow: the values gathered so far keep the old array.
				grown := make([]byte, 2*len(buf)+int(l)+16)
				copy(grown, buf[from:at])
				buf, at, from = grown, at-from, 0
			}
			if l <= 16 && addr+16 <= uint64(len(mem)) {
				// Most parts are short: one 16-byte move, of which the
				// bytes past l are overwritten by the next part or lie
				// past every value.
				*(*[16]byte)(buf[at:]) = *(*[16]byte)(mem[addr:])
			} else {
				copy(buf[at:], mem[addr:addr+l])
			}
			at += int(l)
		}
		recs[i].Value = buf[from:at:at]
	}
	g.buf = buf[:0]
	return dst, nil
}
