package wasmbin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLEB128 holds the LEB128 reads to references that share no code
// with them: encoding/binary's Uvarint for the unsigned ones, arithmetic
// on big integers for the signed ones.
func FuzzLEB128(f *testing.F) {
	for _, seed := range []string{
		"\x00", "\x7f", "\x80\x01", ones4 + "\x0f", pad4 + "\x10", pad4 + "\x80\x00",
		ones9 + "\x01", ones9 + "\x02", pad9 + "\x7f", ones4, "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ref, n := binary.Uvarint(in)

		r := NewReader(in)
		v64, err := r.U64()
		if ok := n > 0; ok != (err == nil) || ok && (v64 != ref || r.Offset() != n) {
			t.Fatalf("U64(%x) = %d, %v in %d bytes; Uvarint: %d in %d", in, v64, err, r.Offset(), ref, n)
		}
		checkEnd(t, "U64", in, 10, err)

		r = NewReader(in)
		v32, err := r.U32()
		if ok := n > 0 && n <= 5 && ref <= 1<<32-1; ok != (err == nil) || ok && (uint64(v32) != ref || r.Offset() != n) {
			t.Fatalf("U32(%x) = %d, %v in %d bytes; Uvarint: %d in %d", in, v32, err, r.Offset(), ref, n)
		}
		checkEnd(t, "U32", in, 5, err)
		if err == nil {
			if enc, want := AppendU32(nil, v32), binary.AppendUvarint(nil, uint64(v32)); !bytes.Equal(enc, want) {
				t.Fatalf("AppendU32(%d) = %x, want the shortest encoding %x", v32, enc, want)
			}
		}

		for _, bits := range []int{32, 33, 64} {
			r := NewReader(in)
			var got int64
			switch bits {
			case 32:
				var v int32
				v, err = r.S32()
				got = int64(v)
			case 33:
				got, err = r.S33()
			case 64:
				got, err = r.S64()
			}
			maxLen := (bits + 6) / 7
			want, size, ok := signedRef(in, maxLen, bits)
			if ok != (err == nil) || ok && (got != want || r.Offset() != size) {
				t.Fatalf("S%d(%x) = %d, %v in %d bytes; want %d in %d (ok %v)", bits, in, got, err, r.Offset(), want, size, ok)
			}
			checkEnd(t, "signed", in, maxLen, err)
			if bits == 32 && err == nil {
				back := NewReader(AppendS32(nil, int32(got)))
				if v, err := back.S32(); err != nil || int64(v) != got || !back.EOF() {
					t.Fatalf("S32(AppendS32(%d)) = %d, %v", got, v, err)
				}
			}
		}
	})
}

// checkEnd fails unless err is ErrUnexpectedEnd exactly when in is all
// continuation bytes and fewer than maxLen of them: a number that breaks
// off rather than one that is too long.
func checkEnd(t *testing.T, what string, in []byte, maxLen int, err error) {
	t.Helper()
	brokenOff := len(in) < maxLen
	for _, c := range in {
		brokenOff = brokenOff && c&0x80 != 0
	}
	if errors.Is(err, ErrUnexpectedEnd) != brokenOff {
		t.Fatalf("%s(%x): error %v; want ErrUnexpectedEnd: %v", what, in, err, brokenOff)
	}
}

// signedRef decodes a signed LEB128 number of at most maxLen bytes from
// in as the readers do, not checking the unused bits of the last byte:
// the value, sign-extended from the top bit of the last byte, reduced to
// 64 bits (32 for bits == 32).
func signedRef(in []byte, maxLen, bits int) (v int64, n int, ok bool) {
	for n < len(in) && n < maxLen && in[n]&0x80 != 0 {
		n++
	}
	if n == len(in) || n == maxLen {
		return 0, 0, false
	}
	n++
	x := new(big.Int)
	for i := n - 1; i >= 0; i-- {
		x.Lsh(x, 7).Or(x, big.NewInt(int64(in[i]&0x7f)))
	}
	if in[n-1]&0x40 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(7*n)))
	}
	width := 64
	if bits == 32 {
		width = 32
	}
	mod := new(big.Int).Lsh(big.NewInt(1), uint(width))
	x.Mod(x, mod) // two's complement in width bits
	if x.Bit(width-1) == 1 {
		x.Sub(x, mod)
	}
	return x.Int64(), n, true
}

// FuzzReader feeds a reader arbitrary bytes, as an upload would: first
// as the sections of a binary, then to every read in turn, the first byte
// of each step choosing which. No read may panic or run outside the bytes
// it was given, and the sections must tile what they were read from.
func FuzzReader(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/*.wasm")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) < 4096 && len(b) > len(Header) {
			f.Add(b[len(Header):])
		}
	}
	f.Add([]byte{SectionType, 0x04, 0x01, 0x60, 0x00, 0x00, SectionCustom, 0x02, 0x01, 'x'})
	f.Add([]byte{SectionData, 0x85, 0x80, 0x80, 0x80, 0x00, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReaderAt(in, len(Header))
		end := len(Header)
		for !r.EOF() {
			s, err := r.Section()
			if err != nil {
				if msg := err.Error(); !strings.Contains(msg, "section") || strings.Contains(msg, "\n") {
					t.Fatalf("Section error %q: want one line that names the section", msg)
				}
				break
			}
			if s.Offset != end || len(s.Raw) < 2 || s.Raw[0] != s.ID ||
				!bytes.Equal(s.Raw, in[end-len(Header):r.Offset()-len(Header)]) || !bytes.HasSuffix(s.Raw, s.Content) {
				t.Fatalf("section %+v does not follow at %d from the bytes it was read from", s, end)
			}
			if c := s.Reader(); c.Offset()+c.Size() != r.Offset() {
				t.Fatalf("content reader of %+v ends at %d, the section at %d", s, c.Offset()+c.Size(), r.Offset())
			}
			end = r.Offset()
		}

		r = NewReaderAt(in, 3)
		for !r.EOF() {
			before := r
			op, _ := r.Byte()
			var err error
			switch op % 14 {
			case 0:
				_, err = r.U32()
			case 1:
				_, err = r.U64()
			case 2:
				_, err = r.S32()
			case 3:
				_, err = r.S33()
			case 4:
				_, err = r.S64()
			case 5:
				_, err = r.Name()
			case 6:
				_, err = r.ValueType()
			case 7:
				_, err = r.Limits()
			case 8:
				_, err = r.Bytes(uint32(op >> 4))
			case 9:
				err = r.Skip(uint32(op >> 4))
			case 10:
				var sub Reader
				if sub, err = r.Sub(uint32(op >> 4)); err == nil && (sub.Offset()+sub.Size() != r.Offset() || len(sub.Rest()) != sub.Size()) {
					t.Fatalf("Sub(%d) from offset %d: offset %d, size %d, parent at %d", op>>4, before.Offset(), sub.Offset(), sub.Size(), r.Offset())
				}
			case 11:
				_, err = r.Peek()
			case 12:
				err = r.Expect(op, "a byte")
			case 13:
				_, err = r.Section()
			}
			if r.Len() < 0 || r.Len() > before.Len() || r.Offset() != 3+r.Size()-r.Len() || !bytes.Equal(r.Rest(), in[len(in)-r.Len():]) {
				t.Fatalf("after read %d from offset %d: offset %d, %d bytes left of %d", op%14, before.Offset(), r.Offset(), r.Len(), r.Size())
			}
			if err != nil {
				break
			}
		}
	})
}
