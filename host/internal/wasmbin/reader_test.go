package wasmbin

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// readCase is one encoding and what a read must make of it: the value
// and the bytes it takes, or an error containing err.
type readCase[T any] struct {
	name string
	in   []byte
	want T
	n    int    // bytes read
	err  string // "" for none
}

func runReads[T comparable](t *testing.T, cases []readCase[T], read func(*Reader) (T, error)) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in)
			got, err := read(&r)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("read %x = %+v, %v; want an error containing %q", tt.in, got, err, tt.err)
				}
				if tt.err == ErrUnexpectedEnd.Error() && !errors.Is(err, ErrUnexpectedEnd) {
					t.Errorf("error %v does not wrap ErrUnexpectedEnd", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read %x: %v", tt.in, err)
			}
			if got != tt.want || r.Offset() != tt.n {
				t.Errorf("read %x = %+v in %d bytes, want %+v in %d", tt.in, got, r.Offset(), tt.want, tt.n)
			}
		})
	}
}

const (
	end      = "unexpected end"
	over32   = "overflows 32 bits"
	over33   = "overflows 33 bits"
	over64   = "overflows 64 bits"
	pad4     = "\x80\x80\x80\x80"
	ones4    = "\xff\xff\xff\xff"
	pad9     = pad4 + pad4 + "\x80"
	ones9    = ones4 + ones4 + "\xff"
	trailing = "\xaa\xbb" // after the number, not to be read
)

func TestU32(t *testing.T) {
	runReads(t, []readCase[uint32]{
		{name: "zero", in: []byte{0x00}, want: 0, n: 1},
		{name: "largest in one byte", in: []byte{0x7f}, want: 127, n: 1},
		{name: "two bytes", in: []byte{0x80, 0x01}, want: 128, n: 2},
		{name: "stops at the last byte", in: []byte("\xe5\x8e\x26" + trailing), want: 624485, n: 3},
		{name: "max", in: []byte(ones4 + "\x0f"), want: math.MaxUint32, n: 5},
		{name: "padded zero", in: []byte(pad4 + "\x00"), want: 0, n: 5},
		{name: "padded one", in: []byte{0x81, 0x80, 0x00}, want: 1, n: 3},
		{name: "overlong: six bytes", in: []byte(pad4 + "\x80\x00"), err: over32},
		{name: "overflow: bit 33", in: []byte(ones4 + "\x1f"), err: over32},
		{name: "overflow: unused bits of a padded fifth byte", in: []byte(pad4 + "\x70"), err: over32},
		{name: "overflow: continuation in the fifth byte", in: []byte(pad4 + "\x80"), err: over32},
		{name: "truncated: empty", in: nil, err: end},
		{name: "truncated: continuation at the end", in: []byte{0x80}, err: end},
		{name: "truncated: four continuation bytes", in: []byte(ones4), err: end},
	}, (*Reader).U32)
}

func TestU64(t *testing.T) {
	runReads(t, []readCase[uint64]{
		{name: "zero", in: []byte{0x00}, want: 0, n: 1},
		{name: "beyond 32 bits", in: []byte(pad4 + "\x10" + trailing), want: 1 << 32, n: 5},
		{name: "max", in: []byte(ones9 + "\x01"), want: math.MaxUint64, n: 10},
		{name: "padded zero", in: []byte(pad9 + "\x00"), want: 0, n: 10},
		{name: "overlong: eleven bytes", in: []byte(pad9 + "\x80\x00"), err: over64},
		{name: "overflow: bit 65", in: []byte(ones9 + "\x02"), err: over64},
		{name: "overflow: continuation in the tenth byte", in: []byte(pad9 + "\x81"), err: over64},
		{name: "truncated: empty", in: nil, err: end},
		{name: "truncated: nine continuation bytes", in: []byte(ones9), err: end},
	}, (*Reader).U64)
}

func TestS32(t *testing.T) {
	runReads(t, []readCase[int32]{
		{name: "zero", in: []byte{0x00}, want: 0, n: 1},
		{name: "minus one", in: []byte{0x7f}, want: -1, n: 1},
		{name: "largest in one byte", in: []byte{0x3f}, want: 63, n: 1},
		{name: "smallest in one byte", in: []byte{0x40}, want: -64, n: 1},
		{name: "64 takes two bytes", in: []byte{0xc0, 0x00}, want: 64, n: 2},
		{name: "-65 takes two bytes", in: []byte{0xbf, 0x7f}, want: -65, n: 2},
		{name: "max", in: []byte(ones4 + "\x07" + trailing), want: math.MaxInt32, n: 5},
		{name: "min", in: []byte(pad4 + "\x78"), want: math.MinInt32, n: 5},
		{name: "padded minus one", in: []byte{0xff, 0x7f}, want: -1, n: 2},
		{name: "padded zero", in: []byte(pad4 + "\x00"), want: 0, n: 5},
		// wazero refuses this one; finding its end is all S32 is for.
		{name: "unused bits of the fifth byte are not checked", in: []byte(ones4 + "\x4f"), want: -1, n: 5},
		{name: "overlong: six bytes", in: []byte(pad4 + "\x80\x00"), err: over32},
		{name: "truncated: empty", in: nil, err: end},
		{name: "truncated: continuation at the end", in: []byte{0xc0}, err: end},
	}, (*Reader).S32)
}

func TestS33(t *testing.T) {
	runReads(t, []readCase[int64]{
		{name: "empty block type", in: []byte{0x40}, want: -0x40, n: 1},
		{name: "i32 block type", in: []byte{0x7f}, want: -1, n: 1},
		{name: "type index", in: []byte{0x05}, want: 5, n: 1},
		{name: "largest type index", in: []byte(ones4 + "\x0f"), want: 1<<32 - 1, n: 5},
		{name: "unused bits of the fifth byte are not checked", in: []byte(pad4 + "\x10"), want: 1 << 32, n: 5},
		{name: "min", in: []byte(pad4 + "\x70"), want: -1 << 32, n: 5},
		{name: "overlong: six bytes", in: []byte(pad4 + "\x80\x00"), err: over33},
		{name: "truncated", in: []byte{0x80, 0x80}, err: end},
	}, (*Reader).S33)
}

func TestS64(t *testing.T) {
	runReads(t, []readCase[int64]{
		{name: "zero", in: []byte{0x00}, want: 0, n: 1},
		{name: "minus one", in: []byte{0x7f}, want: -1, n: 1},
		{name: "max", in: []byte(ones9 + "\x00" + trailing), want: math.MaxInt64, n: 10},
		{name: "min", in: []byte(pad9 + "\x7f"), want: math.MinInt64, n: 10},
		{name: "padded minus one", in: []byte(ones9 + "\x7f"), want: -1, n: 10},
		{name: "overlong: eleven bytes", in: []byte(pad9 + "\x80\x00"), err: over64},
		{name: "truncated: nine continuation bytes", in: []byte(pad9), err: end},
	}, (*Reader).S64)
}

func TestAppendIsShortest(t *testing.T) {
	for _, tt := range []struct {
		v    uint32
		want []byte
	}{
		{0, []byte{0x00}}, {127, []byte{0x7f}}, {128, []byte{0x80, 0x01}},
		{624485, []byte{0xe5, 0x8e, 0x26}}, {math.MaxUint32, []byte(ones4 + "\x0f")},
	} {
		if got := AppendU32(nil, tt.v); !bytes.Equal(got, tt.want) {
			t.Errorf("AppendU32(%d) = %x, want %x", tt.v, got, tt.want)
		}
	}
	for _, tt := range []struct {
		v    int32
		want []byte
	}{
		{0, []byte{0x00}}, {-1, []byte{0x7f}}, {63, []byte{0x3f}}, {-64, []byte{0x40}},
		{64, []byte{0xc0, 0x00}}, {-65, []byte{0xbf, 0x7f}}, {1023, []byte{0xff, 0x07}},
		{math.MaxInt32, []byte(ones4 + "\x07")}, {math.MinInt32, []byte(pad4 + "\x78")},
	} {
		if got := AppendS32(nil, tt.v); !bytes.Equal(got, tt.want) {
			t.Errorf("AppendS32(%d) = %x, want %x", tt.v, got, tt.want)
		}
	}
	if got, want := AppendName([]byte{0xaa}, "env"), []byte("\xaa\x03env"); !bytes.Equal(got, want) {
		t.Errorf("AppendName = %x, want %x", got, want)
	}
	if got, want := AppendSection(nil, SectionStart, []byte{0x02}), []byte{SectionStart, 0x01, 0x02}; !bytes.Equal(got, want) {
		t.Errorf("AppendSection = %x, want %x", got, want)
	}
}

func TestBounds(t *testing.T) {
	in := []byte{0x03, 'e', 'n', 'v', 0x05, 'x'}
	r := NewReaderAt(in, 100)
	if r.Size() != 6 || r.Len() != 6 || r.Offset() != 100 || r.EOF() {
		t.Fatalf("new reader: size %d, len %d, offset %d, EOF %v", r.Size(), r.Len(), r.Offset(), r.EOF())
	}
	if c, err := r.Peek(); c != 0x03 || err != nil || r.Offset() != 100 {
		t.Fatalf("Peek = %#x, %v at offset %d", c, err, r.Offset())
	}
	name, err := r.Name()
	if string(name) != "env" || err != nil || r.Offset() != 104 {
		t.Fatalf("Name = %q, %v at offset %d", name, err, r.Offset())
	}
	saved := r
	if _, err := r.Name(); !errors.Is(err, ErrUnexpectedEnd) {
		t.Errorf("a name of 5 bytes with 1 left: %v, want ErrUnexpectedEnd", err)
	}
	r = saved
	if err := r.Skip(3); !errors.Is(err, ErrUnexpectedEnd) || r.Offset() != 104 {
		t.Errorf("Skip beyond the end = %v at offset %d, want ErrUnexpectedEnd and no move", err, r.Offset())
	}
	if _, err := r.Bytes(math.MaxUint32); !errors.Is(err, ErrUnexpectedEnd) {
		t.Errorf("Bytes(MaxUint32) = %v, want ErrUnexpectedEnd", err)
	}
	sub, err := r.Sub(2)
	if err != nil || sub.Offset() != 104 || sub.Size() != 2 || !r.EOF() {
		t.Fatalf("Sub(2) = offset %d, size %d, %v; parent EOF %v", sub.Offset(), sub.Size(), err, r.EOF())
	}
	if _, err := sub.Bytes(3); !errors.Is(err, ErrUnexpectedEnd) {
		t.Errorf("a sub-reader read beyond its bytes: %v", err)
	}
	if err := sub.Expect(0x05, "the byte"); err != nil {
		t.Errorf("Expect(0x05): %v", err)
	}
	if err := sub.Expect(0x00, "the memory index"); err == nil || err.Error() != "the memory index must be the byte 0x0, not 0x78" {
		t.Errorf("Expect(0x00) of 'x' = %v", err)
	}
	if _, err := sub.Byte(); !errors.Is(err, ErrUnexpectedEnd) {
		t.Errorf("Byte at the end = %v, want ErrUnexpectedEnd", err)
	}
	if _, err := sub.Peek(); !errors.Is(err, ErrUnexpectedEnd) {
		t.Errorf("Peek at the end = %v, want ErrUnexpectedEnd", err)
	}
	var zero Reader
	if !zero.EOF() || zero.Len() != 0 || len(zero.Rest()) != 0 {
		t.Errorf("the zero Reader is not at its end")
	}
}

func TestValueType(t *testing.T) {
	runReads(t, []readCase[byte]{
		{name: "i32", in: []byte{I32, 0xff}, want: I32, n: 1},
		{name: "unknown byte, not judged", in: []byte{0x12}, want: 0x12, n: 1},
		{name: "ref null func", in: []byte{RefNull, 0x70}, want: RefNull, n: 2},
		{name: "ref to a type index", in: []byte{Ref, 0x85, 0x00}, want: Ref, n: 3},
		{name: "heap type too long", in: []byte("\x63" + pad4 + "\x80\x00"), err: over33},
		{name: "heap type missing", in: []byte{Ref}, err: end},
		{name: "empty", in: nil, err: end},
	}, (*Reader).ValueType)
}

func TestLimits(t *testing.T) {
	runReads(t, []readCase[Limits]{
		{name: "minimum", in: []byte{0x00, 0x01, 0xaa}, want: Limits{Min: 1}, n: 2},
		{name: "minimum and maximum", in: []byte{0x01, 0x01, 0x80, 0x02}, want: Limits{Flags: LimitsHasMax, Min: 1, Max: 256}, n: 4},
		{name: "shared", in: []byte{0x03, 0x00, 0x10}, want: Limits{Flags: LimitsHasMax | LimitsShared, Max: 16}, n: 3},
		{name: "64-bit", in: []byte("\x05" + pad4 + "\x10" + "\x81\x00"), want: Limits{Flags: Limits64 | LimitsHasMax, Min: 1 << 32, Max: 1}, n: 8},
		{name: "32-bit minimum overflows", in: []byte("\x00" + pad4 + "\x10"), err: over32},
		{name: "unknown flags", in: []byte{0x08, 0x00}, err: "unknown limits flags 0x8"},
		{name: "maximum missing", in: []byte{0x01, 0x01}, err: end},
		{name: "empty", in: nil, err: end},
	}, (*Reader).Limits)
}
