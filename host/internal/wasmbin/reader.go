// Package wasmbin reads the encodings of the WebAssembly binary format
// that the host's walkers of untrusted binaries share: LEB128 numbers,
// byte vectors and names, value types, limits, and the sections of a
// module with their ids and order; and it writes the few encodings that a
// rewriter appends.
//
// Every read checks bounds, so a hostile binary yields an error, never an
// index panic, and no read that succeeds allocates, so a walker's memory
// use need not depend on its input. Unsigned numbers are read exactly as wazero (1.12)
// reads them, padded encodings included, so that a walker and wazero
// agree on where a number ends.
//
// Package wasmbin is not a decoder of modules: it builds no structure,
// knows no instruction and validates nothing. How deep to read, what to
// refuse and what a module means are for its callers (interrupt and
// wasmcheck) to decide, and wazero validates after them.
package wasmbin

import (
	"errors"
	"fmt"
)

// ErrUnexpectedEnd is returned when a read runs past the end of the bytes
// a reader was given: a truncated binary, or a size or count that claims
// more than is there. Its text carries no package prefix because it ends
// up inside the messages of the callers, which name their own.
var ErrUnexpectedEnd = errors.New("unexpected end")

var (
	errOverflow32 = errors.New("LEB128 number overflows 32 bits")
	errOverflow33 = errors.New("LEB128 number overflows 33 bits")
	errOverflow64 = errors.New("LEB128 number overflows 64 bits")
)

// Reader reads the primitive encodings of the binary format from one byte
// slice: a whole binary, a section or a part of one. The zero value reads
// nothing. A Reader is a value so that a walker can keep one on its stack
// and save and restore its position by copying it. A read that fails may
// have moved it: walkers stop at the first error.
type Reader struct {
	b   []byte
	pos int
	// base is the offset of b[0] in the binary, for Offset.
	base int
}

// NewReader returns a reader of b, which Offset takes for the start of the
// binary.
func NewReader(b []byte) Reader { return Reader{b: b} }

// NewReaderAt returns a reader of b, a part of a binary that starts at
// offset in it.
func NewReaderAt(b []byte, offset int) Reader { return Reader{b: b, base: offset} }

// EOF reports whether every byte has been read.
func (r *Reader) EOF() bool { return r.pos >= len(r.b) }

// Len is the number of bytes not yet read.
func (r *Reader) Len() int { return len(r.b) - r.pos }

// Size is the number of bytes the reader was given.
func (r *Reader) Size() int { return len(r.b) }

// Offset is the offset in the binary of the next byte to be read. For a
// reader made by NewReader, it is the index of that byte in the slice.
func (r *Reader) Offset() int { return r.base + r.pos }

// Rest returns the bytes not yet read, without reading them.
func (r *Reader) Rest() []byte { return r.b[r.pos:] }

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, ErrUnexpectedEnd
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

// Peek returns the next byte without reading it.
func (r *Reader) Peek() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, ErrUnexpectedEnd
	}
	return r.b[r.pos], nil
}

// Expect reads one byte that must equal want, for the reserved bytes
// (memory indices) that wazero accepts only as a single 0x00; what names
// the byte in the error.
func (r *Reader) Expect(want byte, what string) error {
	c, err := r.Byte()
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("%s must be the byte %#x, not %#x", what, want, c)
	}
	return nil
}

// Bytes reads the next n bytes. The result is a part of the reader's
// slice, not a copy.
func (r *Reader) Bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(r.Len()) {
		return nil, ErrUnexpectedEnd
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// Skip skips the next n bytes.
func (r *Reader) Skip(n uint32) error {
	if uint64(n) > uint64(r.Len()) {
		return ErrUnexpectedEnd
	}
	r.pos += int(n)
	return nil
}

// Sub returns a reader of the next n bytes, at their offset in the
// binary, and skips them: a section's or a function body's reader cannot
// read beyond it.
func (r *Reader) Sub(n uint32) (Reader, error) {
	at := r.Offset()
	b, err := r.Bytes(n)
	if err != nil {
		return Reader{}, err
	}
	return NewReaderAt(b, at), nil
}

// Name reads a byte vector: a length and that many bytes, as names and
// data segments are encoded. The result is a part of the reader's slice.
func (r *Reader) Name() ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	return r.Bytes(n)
}

// U32 reads an unsigned LEB128 number of at most 32 bits, padded
// encodings (which linkers emit) included, exactly as wazero's
// leb128.DecodeUint32 does: at most 5 bytes, the unused bits of the fifth
// zero.
//
// Walkers spend most of their time here, mostly on numbers of one or two
// bytes, for which this loop over Byte measured faster (BenchmarkCheck in
// wasmcheck) than one over a slice or one shared with U64: that is why
// U64 repeats it.
func (r *Reader) U32() (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if i == 4 && c&0xf0 != 0 {
			break // a continuation bit or bits beyond the 32nd
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errOverflow32
}

// U64 reads an unsigned LEB128 number of at most 64 bits, padded
// encodings included, as wazero's leb128.LoadUint64 does: at most 10
// bytes, the unused bits of the tenth zero.
func (r *Reader) U64() (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if i == 9 && c > 1 {
			break // a continuation bit or bits beyond the 64th
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errOverflow64
}

// S32 reads a signed LEB128 number of at most 32 bits (5 bytes).
func (r *Reader) S32() (int32, error) {
	v, err := r.signed(5, errOverflow32)
	return int32(v), err
}

// S33 reads a signed LEB128 number of at most 33 bits (5 bytes), as block
// types and heap types are encoded, and returns it sign-extended.
func (r *Reader) S33() (int64, error) { return r.signed(5, errOverflow33) }

// S64 reads a signed LEB128 number of at most 64 bits (10 bytes).
func (r *Reader) S64() (int64, error) { return r.signed(10, errOverflow64) }

// signed reads a signed LEB128 number of at most maxLen bytes, padded
// encodings included, and returns it sign-extended. Unlike wazero it does
// not check the unused bits of the last byte: its callers need to know
// where a number ends, which the length alone says, and wazero, which
// validates after them, refuses such a number anyway.
func (r *Reader) signed(maxLen int, overflow error) (int64, error) {
	b := r.b[r.pos:]
	if len(b) > maxLen {
		b = b[:maxLen]
	}
	var v int64
	for i, c := range b {
		shift := 7 * i
		v |= int64(c&0x7f) << shift
		if c < 0x80 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			r.pos += i + 1
			return v, nil
		}
	}
	if len(b) == maxLen {
		return 0, overflow
	}
	return 0, ErrUnexpectedEnd
}
