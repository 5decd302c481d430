package wasmbin

import "fmt"

// Magic is what every binary starts with, whatever its version.
const Magic = "\x00asm"

// Header is what every binary of version 1 starts with: Magic and the
// version, a little-endian uint32.
const Header = Magic + "\x01\x00\x00\x00"

// Section ids.
const (
	SectionCustom    = 0
	SectionType      = 1
	SectionImport    = 2
	SectionFunction  = 3
	SectionTable     = 4
	SectionMemory    = 5
	SectionGlobal    = 6
	SectionExport    = 7
	SectionStart     = 8
	SectionElement   = 9
	SectionCode      = 10
	SectionData      = 11
	SectionDataCount = 12
	SectionTag       = 13 // exception handling proposal
)

// sections are the name and place of each section id, by id: the place
// in the order the binary format requires (tag after memory, data count
// before code), 0 for custom sections, which may stand anywhere.
var sections = [...]struct {
	name  string
	order int
}{
	SectionCustom:    {"custom section", 0},
	SectionType:      {"type section", 1},
	SectionImport:    {"import section", 2},
	SectionFunction:  {"function section", 3},
	SectionTable:     {"table section", 4},
	SectionMemory:    {"memory section", 5},
	SectionTag:       {"tag section", 6},
	SectionGlobal:    {"global section", 7},
	SectionExport:    {"export section", 8},
	SectionStart:     {"start section", 9},
	SectionElement:   {"element section", 10},
	SectionDataCount: {"data count section", 11},
	SectionCode:      {"code section", 12},
	SectionData:      {"data section", 13},
}

// SectionName names section id in messages: "data count section", or
// "section 14" for an id the format does not define.
func SectionName(id byte) string {
	if int(id) < len(sections) {
		return sections[id].name
	}
	return fmt.Sprintf("section %d", id)
}

// SectionOrder returns the place of section id in the order the binary
// format requires of the sections other than custom ones, which have
// place 0; known is false for an id the format does not define.
func SectionOrder(id byte) (order int, known bool) {
	if int(id) < len(sections) {
		return sections[id].order, true
	}
	return 0, false
}

// Section is one section of a binary.
type Section struct {
	ID byte
	// Offset is the offset of the id byte in the binary.
	Offset int
	// Raw is all of the section, id and size included, so that a rewriter
	// can copy a section it leaves alone exactly as it came.
	Raw     []byte
	Content []byte
}

// Reader returns a reader of the section's content, at its offset in the
// binary.
func (s Section) Reader() Reader {
	return NewReaderAt(s.Content, s.Offset+len(s.Raw)-len(s.Content))
}

// Section reads the next section: its id, its size, and as many bytes of
// content as the size says, which must be there. r reads the sections
// that follow the header of a binary, and the error, if any, names the
// section and its offset.
func (r *Reader) Section() (Section, error) {
	start := r.pos
	offset := r.Offset()
	id, err := r.Byte()
	if err != nil {
		return Section{}, err
	}
	size, err := r.U32()
	if err != nil {
		return Section{}, fmt.Errorf("%s at offset %#x: size: %w", SectionName(id), offset, err)
	}
	if uint64(size) > uint64(r.Len()) {
		return Section{}, fmt.Errorf("%s at offset %#x declares %s with only %s left in the module: %w",
			SectionName(id), offset, nbytes(uint64(size)), nbytes(uint64(r.Len())), ErrUnexpectedEnd)
	}
	content, _ := r.Bytes(size) // there, as checked above
	return Section{ID: id, Offset: offset, Raw: r.b[start:r.pos], Content: content}, nil
}

// nbytes is "1 byte" or "2 bytes".
func nbytes(n uint64) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
