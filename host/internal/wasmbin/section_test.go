package wasmbin

import (
	"bytes"
	"errors"
	"testing"
)

func TestSections(t *testing.T) {
	custom := AppendSection(nil, SectionCustom, AppendName(nil, "name"))
	typ := []byte{SectionType, 0x84, 0x80, 0x80, 0x80, 0x00, 0x01, 0x60, 0x00, 0x00} // padded size
	in := append(append([]byte(Header), typ...), custom...)
	r := NewReaderAt(in[len(Header):], len(Header))

	s, err := r.Section()
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != SectionType || s.Offset != 8 || !bytes.Equal(s.Raw, typ) || !bytes.Equal(s.Content, typ[6:]) {
		t.Errorf("first section = %+v", s)
	}
	if c := s.Reader(); c.Offset() != 14 || c.Size() != 4 {
		t.Errorf("its content reader starts at %d with %d bytes, want 14 and 4", c.Offset(), c.Size())
	}
	s, err = r.Section()
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != SectionCustom || s.Offset != 18 || !bytes.Equal(s.Raw, custom) || !r.EOF() {
		t.Errorf("second section = %+v, EOF %v", s, r.EOF())
	}
	if _, err := r.Section(); !errors.Is(err, ErrUnexpectedEnd) {
		t.Errorf("a section after the last: %v, want ErrUnexpectedEnd", err)
	}
}

func TestSectionErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		want string
		end  bool // wraps ErrUnexpectedEnd
	}{
		{name: "size overflows", in: []byte{SectionType, 0xff, 0xff, 0xff, 0xff, 0x7f},
			want: "type section at offset 0x8: size: LEB128 number overflows 32 bits"},
		{name: "size truncated", in: []byte{SectionCode, 0x80},
			want: "code section at offset 0x8: size: unexpected end", end: true},
		{name: "content beyond the end", in: []byte{SectionData, 0x05, 0x00},
			want: "data section at offset 0x8 declares 5 bytes with only 1 byte left in the module: unexpected end", end: true},
		{name: "unknown id", in: []byte{0x2a, 0x7f},
			want: "section 42 at offset 0x8 declares 127 bytes with only 0 bytes left in the module: unexpected end", end: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReaderAt(tt.in, len(Header))
			_, err := r.Section()
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Section() error = %v, want %q", err, tt.want)
			}
			if errors.Is(err, ErrUnexpectedEnd) != tt.end {
				t.Errorf("errors.Is(%v, ErrUnexpectedEnd) = %v, want %v", err, !tt.end, tt.end)
			}
		})
	}
}

// TestSectionOrder: the order the binary format requires, tag after
// memory and data count before code, and every id it defines named.
func TestSectionOrder(t *testing.T) {
	want := []byte{SectionType, SectionImport, SectionFunction, SectionTable, SectionMemory, SectionTag,
		SectionGlobal, SectionExport, SectionStart, SectionElement, SectionDataCount, SectionCode, SectionData}
	for i, id := range want {
		if order, known := SectionOrder(id); order != i+1 || !known {
			t.Errorf("SectionOrder(%d) = %d, %v; want %d, true", id, order, known, i+1)
		}
		if name := SectionName(id); name == "" || name == SectionName(0x2a) {
			t.Errorf("SectionName(%d) = %q", id, name)
		}
	}
	if order, known := SectionOrder(SectionCustom); order != 0 || !known {
		t.Errorf("SectionOrder(custom) = %d, %v; want 0, true", order, known)
	}
	if _, known := SectionOrder(SectionTag + 1); known {
		t.Errorf("section id %d is known", SectionTag+1)
	}
	if got := SectionName(SectionDataCount); got != "data count section" {
		t.Errorf("SectionName(12) = %q", got)
	}
}
