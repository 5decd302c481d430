package interrupt

import (
	"errors"
	"fmt"
)

// errEOF is returned when a read runs past the end of what it was given: a
// truncated binary, or a size or count that claims more than is there.
var errEOF = errors.New("unexpected end")

// reader decodes the primitive encodings of the Wasm binary format from one
// byte slice. Every read checks bounds, so a hostile binary yields an error,
// never an index panic.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) eof() bool { return r.pos >= len(r.b) }

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errEOF
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

// expect reads one byte that must equal want, for the reserved bytes
// (memory indices) that wazero accepts only as a single 0x00.
func (r *reader) expect(want byte, what string) error {
	c, err := r.byte()
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("%s must be the byte %#x, not %#x", what, want, c)
	}
	return nil
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return nil, errEOF
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

func (r *reader) skip(n int) error {
	if n > len(r.b)-r.pos {
		return errEOF
	}
	r.pos += n
	return nil
}

// u32 reads an unsigned LEB128 number of at most 32 bits, padded encodings
// (which linkers emit) included.
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

// signed reads a signed LEB128 number of at most bits bits (32, 33 or 64)
// and returns it sign-extended.
func (r *reader) signed(bits int) (int64, error) {
	maxLen := (bits + 6) / 7
	var v int64
	for i := 0; i < maxLen; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		shift := 7 * i
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("LEB128 number overflows %d bits", bits)
}

// name reads a length-prefixed string, as export and import names are.
func (r *reader) name() ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	return r.bytes(n)
}

// appendU32 appends v in the shortest unsigned LEB128 encoding.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}

// appendS32 appends v in the shortest signed LEB128 encoding.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
