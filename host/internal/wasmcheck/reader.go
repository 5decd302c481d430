package wasmcheck

import (
	"errors"
	"fmt"
)

// errEnd is returned when a read runs past the end of the bytes a reader
// was given: those of a section, of a function body or of a name
// subsection, never more.
var errEnd = errors.New("unexpected end")

// reader decodes the primitive encodings of the Wasm binary format from
// one byte slice, a section or a part of one. Every read checks bounds, so
// a hostile binary yields an error, never an index panic; none allocates.
type reader struct {
	b   []byte
	pos int
	// base is the offset of b[0] in the binary, for error messages.
	base int
}

func (r *reader) eof() bool { return r.pos >= len(r.b) }

// left is the number of bytes not yet read.
func (r *reader) left() int { return len(r.b) - r.pos }

// offset is the offset in the binary of the next byte to be read.
func (r *reader) offset() int { return r.base + r.pos }

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errEnd
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) skip(n uint32) error {
	if uint64(n) > uint64(r.left()) {
		return errEnd
	}
	r.pos += int(n)
	return nil
}

// sub returns a reader of the next n bytes, which the caller has checked
// are there, and skips them in r.
func (r *reader) sub(n uint32) *reader {
	s := &reader{b: r.b[r.pos : r.pos+int(n)], base: r.offset()}
	r.pos += int(n)
	return s
}

// u32 reads an unsigned LEB128 number of at most 32 bits, padded
// encodings included, exactly as wazero's leb128.DecodeUint32 does.
func (r *reader) u32() (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, err := r.byte()
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
	return 0, errors.New("LEB128 number overflows 32 bits")
}

// skipLEB skips a LEB128 number of at most maxLen bytes, signed or not.
// It does not check the unused bits of the last byte: where wazero
// refuses such a number, it stops decoding, and whatever Check makes of
// the bytes after it no longer matters.
func (r *reader) skipLEB(maxLen int) error {
	for range maxLen {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return fmt.Errorf("LEB128 number longer than %d bytes", maxLen)
}
