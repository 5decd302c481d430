package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Batch layout (all integers little-endian; see ABI.md "Batch encoding"):
//
//	offset 0   u32 magic  (BatchMagic)
//	offset 4   u32 count
//	offset 8   count entries of EntrySize bytes:
//	             +0  i64 timestamp
//	             +8  u32 key_off      +12 u32 key_len
//	             +16 u32 value_off    +20 u32 value_len
//	             +24 u32 headers_off  +28 u32 headers_len
//	then       the data area; every offset is from the start of the batch.
//
// Headers, when present, are a block: u32 n, then n times
// (u32 key_len, u32 value_len, key bytes, value bytes).
const (
	BatchMagic  uint32 = 0x31424445 // "EDB1"
	HeaderSize         = 8
	EntrySize          = 32
	MaxRecords         = 1 << 24
	maxHeaderNo        = 1 << 16
)

// ErrMalformedBatch is returned (wrapped, with the reason) for bytes that are
// not a valid batch.
var ErrMalformedBatch = errors.New("abi: malformed batch")

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is the unit of data: an opaque key and value, an event timestamp
// in milliseconds since the Unix epoch (NoTimestamp when absent) and optional
// headers.
type Record struct {
	Key       []byte
	Value     []byte
	Timestamp int64
	Headers   []Header
}

func headersSize(hs []Header) int {
	if len(hs) == 0 {
		return 0
	}
	n := 4
	for _, h := range hs {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// RecordSize is the number of bytes r adds to a batch: its entry and data.
func RecordSize(r *Record) int {
	return EntrySize + len(r.Key) + len(r.Value) + headersSize(r.Headers)
}

// EncodedSize is the exact size of the batch EncodeBatch writes for recs.
func EncodedSize(recs []Record) int {
	n := HeaderSize
	for i := range recs {
		n += RecordSize(&recs[i])
	}
	return n
}

// EncodeBatch writes recs into dst, which must be at least EncodedSize(recs)
// bytes, and returns the number of bytes written. Data follows the entry
// table in record order.
func EncodeBatch(dst []byte, recs []Record) int {
	return encodeBatch(dst, recs, HeaderSize+EntrySize*len(recs))
}

// encodeBatch is EncodeBatch with the data area starting at data, which
// leaves [HeaderSize+EntrySize*len(recs), data) to the caller (the field
// table of version 6).
func encodeBatch(dst []byte, recs []Record, data int) int {
	le := binary.LittleEndian
	le.PutUint32(dst[0:], BatchMagic)
	le.PutUint32(dst[4:], uint32(len(recs)))
	for i := range recs {
		r := &recs[i]
		e := dst[HeaderSize+EntrySize*i : HeaderSize+EntrySize*(i+1)]
		le.PutUint64(e[0:], uint64(r.Timestamp))
		le.PutUint32(e[8:], uint32(data))
		le.PutUint32(e[12:], uint32(len(r.Key)))
		data += copy(dst[data:], r.Key)
		le.PutUint32(e[16:], uint32(data))
		le.PutUint32(e[20:], uint32(len(r.Value)))
		data += copy(dst[data:], r.Value)
		if len(r.Headers) == 0 {
			le.PutUint64(e[24:], 0)
			continue
		}
		start := data
		data = putHeaders(dst, data, r.Headers)
		le.PutUint32(e[24:], uint32(start))
		le.PutUint32(e[28:], uint32(data-start))
	}
	return data
}

func putHeaders(dst []byte, at int, hs []Header) int {
	le := binary.LittleEndian
	le.PutUint32(dst[at:], uint32(len(hs)))
	at += 4
	for _, h := range hs {
		le.PutUint32(dst[at:], uint32(len(h.Key)))
		le.PutUint32(dst[at+4:], uint32(len(h.Value)))
		at += 8
		at += copy(dst[at:], h.Key)
		at += copy(dst[at:], h.Value)
	}
	return at
}

// AppendBatch appends the encoding of recs to dst.
func AppendBatch(dst []byte, recs []Record) []byte {
	n := EncodedSize(recs)
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+n]
	EncodeBatch(dst[start:], recs)
	return dst
}

// BatchCount validates the header of buf and returns its record count.
func BatchCount(buf []byte) (int, error) {
	if len(buf) < HeaderSize {
		return 0, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrMalformedBatch, len(buf), HeaderSize)
	}
	le := binary.LittleEndian
	if m := le.Uint32(buf); m != BatchMagic {
		return 0, fmt.Errorf("%w: bad magic %#08x", ErrMalformedBatch, m)
	}
	count := le.Uint32(buf[4:])
	if count > MaxRecords || uint64(HeaderSize)+uint64(count)*EntrySize > uint64(len(buf)) {
		return 0, fmt.Errorf("%w: %d records do not fit in %d bytes", ErrMalformedBatch, count, len(buf))
	}
	return int(count), nil
}

func span(buf []byte, off, n uint32, what string, i int) ([]byte, error) {
	end := uint64(off) + uint64(n)
	if end > uint64(len(buf)) {
		return nil, fmt.Errorf("%w: record %d: %s [%d, %d) is outside the %d-byte batch", ErrMalformedBatch, i, what, off, end, len(buf))
	}
	return buf[off:end:end], nil
}

// DecodeBatch decodes buf and appends its records to dst. The records alias
// buf: copy buf first if it will be reused. Every offset and length is
// checked; a bad one is an error wrapping ErrMalformedBatch, never a panic.
func DecodeBatch(buf []byte, dst []Record) ([]Record, error) {
	return decodeBatch(buf, dst, false)
}

// decodeBatch is DecodeBatch; with parts, an entry whose value_len has
// ValueParts set is taken as a part list, which the caller has checked,
// and its record's Value is left nil (Gather.Decode).
func decodeBatch(buf []byte, dst []Record, parts bool) ([]Record, error) {
	count, err := BatchCount(buf)
	if err != nil {
		return dst, err
	}
	// dst grows once and each record is written in place, and a span is
	// checked inline (span only builds the error): per record, that saves
	// an append and two calls, which Go's wasm backend makes expensive.
	start := len(dst)
	dst = slices.Grow(dst, count)[:start+count]
	recs := dst[start:]
	le := binary.LittleEndian
	size := uint64(len(buf))
	for i := range recs {
		e := buf[HeaderSize+EntrySize*i : HeaderSize+EntrySize*(i+1)]
		ko, kl := le.Uint32(e[8:]), le.Uint32(e[12:])
		vo, vl := le.Uint32(e[16:]), le.Uint32(e[20:])
		if uint64(ko)+uint64(kl) > size {
			_, err := span(buf, ko, kl, "key", i)
			return dst[:start+i], err
		}
		r := &recs[i]
		if uint64(vo)+uint64(vl) > size {
			if !parts || vl&ValueParts == 0 {
				_, err := span(buf, vo, vl, "value", i)
				return dst[:start+i], err
			}
			vo, vl = 0, 0 // Gather.Decode sets the value
		}
		r.Timestamp = int64(le.Uint64(e))
		r.Key = buf[ko : ko+kl : ko+kl]
		r.Value = buf[vo : vo+vl : vo+vl]
		r.Headers = nil
		if hl := le.Uint32(e[28:]); hl != 0 {
			block, err := span(buf, le.Uint32(e[24:]), hl, "headers", i)
			if err == nil {
				r.Headers, err = decodeHeaders(block, i)
			}
			if err != nil {
				return dst[:start+i], err
			}
		}
	}
	return dst, nil
}

func decodeHeaders(b []byte, i int) ([]Header, error) {
	le := binary.LittleEndian
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: record %d: headers block of %d bytes", ErrMalformedBatch, i, len(b))
	}
	n := le.Uint32(b)
	if n > maxHeaderNo || uint64(n)*8 > uint64(len(b)-4) {
		return nil, fmt.Errorf("%w: record %d: %d headers do not fit in %d bytes", ErrMalformedBatch, i, n, len(b))
	}
	hs := make([]Header, 0, n)
	at := uint64(4)
	for j := uint32(0); j < n; j++ {
		if at+8 > uint64(len(b)) {
			return nil, fmt.Errorf("%w: record %d: header %d is truncated", ErrMalformedBatch, i, j)
		}
		kl, vl := uint64(le.Uint32(b[at:])), uint64(le.Uint32(b[at+4:]))
		at += 8
		if at+kl+vl > uint64(len(b)) {
			return nil, fmt.Errorf("%w: record %d: header %d is truncated", ErrMalformedBatch, i, j)
		}
		hs = append(hs, Header{Key: string(b[at : at+kl]), Value: b[at+kl : at+kl+vl : at+kl+vl]})
		at += kl + vl
	}
	return hs, nil
}

// Writer builds a batch incrementally inside a fixed buffer, as guests do
// with their output buffer: entries grow from the front, data from the back,
// so no byte is moved when the batch is handed over. The zero Writer is not
// usable; call Reset first.
type Writer struct {
	buf   []byte
	count int
	data  int // start of the data written so far, growing down from len(buf)
}

// Reset makes w write a new, empty batch into buf.
func (w *Writer) Reset(buf []byte) {
	w.buf, w.count, w.data = buf, 0, len(buf)
}

// Len is the number of records written since the last Reset.
func (w *Writer) Len() int { return w.count }

// Fits reports whether r fits into the remaining space.
func (w *Writer) Fits(r *Record) bool {
	return HeaderSize+EntrySize*w.count+RecordSize(r) <= w.data
}

// Append adds r and reports whether it fitted; nothing is written when it
// did not. The data goes below what is already there, key first, then
// value and headers: sizes are computed once and the entry is written
// through one bounds-checked slice, which matters to guests (Go's wasm
// backend pays for every check and call).
func (w *Writer) Append(r *Record) bool {
	vl := len(r.Value)
	data, ok := w.put(r, vl, uint32(vl))
	if ok {
		copy(w.buf[data+len(r.Key):], r.Value)
	}
	return ok
}

// put is Append but for the value's bytes: it reserves vl bytes for them
// after the key, writes the entry with value_len valueLen, the key and the
// headers, and returns where the data starts (the value at data+len(key)).
func (w *Writer) put(r *Record, vl int, valueLen uint32) (int, bool) {
	kl, hs := len(r.Key), headersSize(r.Headers)
	at := HeaderSize + EntrySize*w.count
	data := w.data - kl - vl - hs
	if data < at+EntrySize {
		return 0, false
	}
	buf := w.buf
	e := buf[at : at+EntrySize : at+EntrySize]
	le := binary.LittleEndian
	le.PutUint64(e[0:], uint64(r.Timestamp))
	le.PutUint32(e[8:], uint32(data))
	le.PutUint32(e[12:], uint32(kl))
	le.PutUint32(e[16:], uint32(data+kl))
	le.PutUint32(e[20:], valueLen)
	if hs > 0 {
		putHeaders(buf, data+kl+vl, r.Headers)
		le.PutUint32(e[24:], uint32(data+kl+vl))
		le.PutUint32(e[28:], uint32(hs))
	} else {
		le.PutUint64(e[24:], 0)
	}
	copy(buf[data:], r.Key)
	w.data = data
	w.count++
	return data, true
}

// Bytes finishes the batch and returns it: the whole buffer, since data
// sits at its end.
func (w *Writer) Bytes() []byte {
	le := binary.LittleEndian
	le.PutUint32(w.buf, BatchMagic)
	le.PutUint32(w.buf[4:], uint32(w.count))
	return w.buf
}
