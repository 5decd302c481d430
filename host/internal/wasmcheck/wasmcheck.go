// Package wasmcheck refuses a WebAssembly binary whose declared sizes
// cannot be true, or would cost the host more memory than it allows,
// before a runtime that trusts them allocates for them.
//
// wazero, like many decoders, sizes its structures from the counts a
// module declares (functions in the function section, locals of a
// function, bytes of a name or of a data segment, entries of the name
// section's maps) before it reads the entries, and it reads a section
// without holding it to its declared size. A 15-byte module declaring
// 2^32-1 functions makes it allocate 16 GiB; others make Go run out of
// memory, which is a fatal error that no recover can catch. Check walks
// the sections and the vectors inside them and refuses a module in which
//
//   - a section, or a vector's count, a name or a segment, claims more
//     than the bytes left for it (every entry of a vector takes at least
//     one byte, so a count beyond them is impossible);
//   - a function declares more locals than Limits.FunctionLocals, or all
//     functions together more than Limits.ModuleLocals (each costs the
//     runtime memory while a few bytes declare thousands);
//   - a memory's minimum exceeds Limits.MemoryPages, or the tables'
//     minimums exceed Limits.TableElements in all (an instance allocates
//     them when it starts, outside the memory limit of the guest).
//
// Check is no validator: it reads only as deep as the vectors a decoder
// allocates for, and a module it accepts may well be refused by wazero.
// Where it reads, it reads as wazero (1.12) does, so that whatever wazero
// decodes, Check has bounded first; TestCheckAcceptsWhatWazeroAccepts and
// FuzzCheck hold it to that, and are the tests to run on a wazero
// upgrade. Its own memory use does not depend on its input: it allocates
// nothing but the error it returns.
//
// Package wasmcheck knows nothing of the operator ABI or of wazero's API.
package wasmcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

// Limits bound what a module may declare. A zero field is a limit of
// zero, not "no limit": start from DefaultLimits.
type Limits struct {
	// MemoryPages is the most 64 KiB pages a memory, defined or imported,
	// may declare as its minimum.
	MemoryPages uint32
	// TableElements is the most elements the tables a module defines may
	// declare as their minimums, all together. Every element takes 8
	// bytes of host memory in every instance.
	TableElements uint64
	// FunctionLocals is the most locals one function may declare
	// (parameters not included).
	FunctionLocals uint32
	// ModuleLocals is the most locals all functions of a module may
	// declare together.
	ModuleLocals uint64
}

// DefaultLimits returns the limits browser engines and wasmparser agree
// on where they suit a host that runs many instances in one process, and
// tighter ones where they do not.
func DefaultLimits() Limits {
	return Limits{
		// 4 GiB, all that 32-bit addresses reach; a host lowers it to its
		// own memory limit.
		MemoryPages: 1 << 16,
		// 8 MiB of host memory per instance. Engines allow 10 million
		// elements (80 MiB), too many for one of many instances in a
		// process. Toolchains declare one element per function whose
		// address is taken: 11,000 in an 11 MB Go module.
		TableElements: 1 << 20,
		// As every browser engine.
		FunctionLocals: 50_000,
		// Engines have no such limit, but compiling costs wazero some 70
		// bytes per local, so this bounds that cost at 36 MiB, what
		// compiling a 1 MB module costs anyway. An 11 MB Go module
		// declares 30,000 locals in all; a C one built with -O0 about
		// one per 100 bytes.
		ModuleLocals: 1 << 19,
	}
}

// Check returns nil if nothing wasm declares exceeds the bytes that hold
// it or lim, and otherwise an error of one line that names the section,
// the entry and the count, such as "function section declares 4294967295
// functions in 5 bytes". A binary that breaks off or does not decode
// where Check reads is refused too, as wazero would refuse it, with an
// error that wraps ErrMalformed.
func Check(wasm []byte, lim Limits) error {
	if len(wasm) < len(wasmbin.Header) || string(wasm[:len(wasmbin.Magic)]) != wasmbin.Magic {
		return malformedf("not a WebAssembly binary (no \\0asm header)")
	}
	if v := binary.LittleEndian.Uint32(wasm[len(wasmbin.Magic):len(wasmbin.Header)]); v != 1 {
		return malformedf("WebAssembly binary version %#x is not supported (only 1 is)", v)
	}
	c := checker{lim: lim}
	r := wasmbin.NewReaderAt(wasm[len(wasmbin.Header):], len(wasmbin.Header))
	for !r.EOF() {
		s, err := r.Section()
		if err != nil {
			return malformedf("%v", err)
		}
		content := s.Reader()
		if err := c.check(s.ID, &content); err != nil {
			return err
		}
	}
	return nil
}

// checker holds what Check learns from one section that it needs in a
// later one.
type checker struct {
	lim     Limits
	section string // the name of the section being read, for errors
	// importFuncs is the number of imported functions, by which code
	// entries are numbered in errors as in the function index space.
	importFuncs uint32
	tableElems  uint64 // the defined tables' minimums so far
	allLocals   uint64 // the locals of the functions so far
}

func (c *checker) check(id byte, r *wasmbin.Reader) error {
	if _, known := wasmbin.SectionOrder(id); !known {
		// wazero refuses an unknown section before it reads its content.
		return nil
	}
	c.section = wasmbin.SectionName(id)
	switch id {
	case wasmbin.SectionCustom:
		return c.custom(r)
	case wasmbin.SectionType:
		return c.types(r)
	case wasmbin.SectionImport:
		return c.imports(r)
	case wasmbin.SectionFunction:
		// Entries without vectors inside: only their number matters.
		_, err := c.count(r, where{}, "functions")
		return err
	case wasmbin.SectionTable:
		return c.tables(r)
	case wasmbin.SectionMemory:
		return c.memories(r)
	case wasmbin.SectionGlobal:
		_, err := c.count(r, where{}, "globals")
		return err
	case wasmbin.SectionExport:
		return c.exports(r)
	case wasmbin.SectionElement:
		return c.elements(r)
	case wasmbin.SectionCode:
		return c.code(r)
	case wasmbin.SectionData:
		return c.data(r)
	case wasmbin.SectionTag:
		_, err := c.count(r, where{}, "tags")
		return err
	default:
		// The start and data count sections hold one number each.
		return nil
	}
}

// where names the entry of a section that declares a vector, for errors:
// "type 3", "the function name map: entry 7", "the local name map of
// function 2: entry 0". The zero value is the section itself. It is formatted only when
// there is an error, so that a module Check accepts costs no allocation.
type where struct {
	what     string
	index    uint64
	hasIndex bool
	entry    uint64
	hasEntry bool
}

func item(what string, index uint64) where { return where{what: what, index: index, hasIndex: true} }

// of names entry i of the vector that w declares.
func (w where) of(i uint32) where {
	w.entry, w.hasEntry = uint64(i), true
	return w
}

func (w where) String() string {
	s := w.what
	if w.hasIndex {
		s += fmt.Sprintf(" %d", w.index)
	}
	if w.hasEntry {
		s += fmt.Sprintf(": entry %d", w.entry)
	}
	return s
}

// count reads the length of a vector and refuses one with more entries
// than there are bytes left in r; things names the entries.
func (c *checker) count(r *wasmbin.Reader, w where, things string) (uint32, error) {
	at := r.Offset()
	n, err := r.U32()
	if err != nil {
		return 0, c.malformed(w, at, fmt.Errorf("number of %s: %w", things, err))
	}
	if uint64(n) > uint64(r.Len()) {
		if w == (where{}) {
			return 0, fmt.Errorf("%s declares %s in %s", c.section, quantity(n, things), nbytes(uint64(r.Size())))
		}
		return 0, fmt.Errorf("%s: %s declares %s with only %s left", c.section, w, quantity(n, things), nbytes(uint64(r.Len())))
	}
	return n, nil
}

// bytes skips a vector of bytes (a name, a data segment) after checking
// that its length does not exceed the bytes left in r.
func (c *checker) bytes(r *wasmbin.Reader, w where, what string) error {
	at := r.Offset()
	n, err := r.U32()
	if err != nil {
		return c.malformed(w, at, fmt.Errorf("length of %s: %w", what, err))
	}
	if uint64(n) > uint64(r.Len()) {
		if w == (where{}) {
			return fmt.Errorf("%s declares %s of %s in %s", c.section, what, nbytes(uint64(n)), nbytes(uint64(r.Size())))
		}
		return fmt.Errorf("%s: %s declares %s of %s with only %s left", c.section, w, what, nbytes(uint64(n)), nbytes(uint64(r.Len())))
	}
	return r.Skip(n)
}

// malformed reports bytes that do not decode where Check reads them.
func (c *checker) malformed(w where, at int, err error) error {
	var le *limitError
	if errors.As(err, &le) {
		return le // already the whole message
	}
	if w == (where{}) {
		return malformedf("%s: %v (at offset %#x)", c.section, err, at)
	}
	return malformedf("%s: %s: %v (at offset %#x)", c.section, w, err, at)
}

// ErrMalformed marks the errors of Check that report bytes that do not
// decode (a truncated or corrupt binary) rather than a count that cannot
// be true or a declaration over a limit.
var ErrMalformed = errors.New("wasmcheck: malformed binary")

type malformedError struct{ msg string }

func (e *malformedError) Error() string        { return e.msg }
func (e *malformedError) Is(target error) bool { return target == ErrMalformed }

func malformedf(format string, args ...any) error {
	return &malformedError{msg: fmt.Sprintf(format, args...)}
}

func nbytes(n uint64) string { return quantity(n, "bytes") }

// quantity is "1 function" or "2 functions", given the plural.
func quantity[N uint32 | uint64](n N, plural string) string {
	if n != 1 {
		return fmt.Sprintf("%d %s", n, plural)
	}
	singular, ok := map[string]string{
		"entries": "entry", "function indices": "function index",
		"function bodies": "function body", "memories": "memory",
		"runs of locals": "run of locals",
	}[plural]
	if !ok {
		singular = strings.TrimSuffix(plural, "s")
	}
	return "1 " + singular
}

// limitError is a declared minimum over a limit: the whole message, not
// bytes that fail to decode.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// custom checks a custom section's name and, when it is the name section,
// its maps: wazero decodes that one.
func (c *checker) custom(r *wasmbin.Reader) error {
	at := r.Offset()
	n, err := r.U32()
	if err != nil {
		return c.malformed(where{}, at, fmt.Errorf("length of the name: %w", err))
	}
	if uint64(n) > uint64(r.Len()) {
		return fmt.Errorf("%s declares a name of %s in %s", c.section, nbytes(uint64(n)), nbytes(uint64(r.Size())))
	}
	name, _ := r.Bytes(n) // there, as checked above
	if string(name) != "name" {
		return nil
	}
	c.section = "name section"
	return c.names(r)
}

// Subsections of the name section that wazero decodes.
const (
	namesModule   = 0
	namesFunction = 1
	namesLocal    = 2
)

// names checks the subsections of a name section. wazero reads each one
// it knows from where the previous one ended, not from where its size
// says, so each must end exactly where it says for Check to read the
// same bytes.
func (c *checker) names(r *wasmbin.Reader) error {
	for !r.EOF() {
		at := r.Offset()
		id, _ := r.Byte()
		w := item("subsection", uint64(id))
		size, err := r.U32()
		if err != nil {
			return c.malformed(w, at, fmt.Errorf("size: %w", err))
		}
		if uint64(size) > uint64(r.Len()) {
			return fmt.Errorf("%s: %s declares %s with only %s left", c.section, w, nbytes(uint64(size)), nbytes(uint64(r.Len())))
		}
		sub, _ := r.Sub(size) // there, as checked above
		switch id {
		case namesModule:
			err = c.bytes(&sub, item("subsection", namesModule), "a module name")
		case namesFunction:
			err = c.nameMap(&sub, where{what: "the function name map"})
		case namesLocal:
			err = c.localNames(&sub)
		default:
			continue // wazero skips it by its size
		}
		if err != nil {
			return err
		}
		if !sub.EOF() {
			return malformedf("%s: %s ends %s before its declared size", c.section, w, nbytes(uint64(sub.Len())))
		}
	}
	return nil
}

// nameMap checks a vector of (index, name) pairs.
func (c *checker) nameMap(r *wasmbin.Reader, w where) error {
	n, err := c.count(r, w, "entries")
	if err != nil {
		return err
	}
	for i := range n {
		at := r.Offset()
		if _, err := r.U32(); err != nil {
			return c.malformed(w.of(i), at, fmt.Errorf("index: %w", err))
		}
		if err := c.bytes(r, w.of(i), "a name"); err != nil {
			return err
		}
	}
	return nil
}

// localNames checks a vector of (function index, name map) pairs.
func (c *checker) localNames(r *wasmbin.Reader) error {
	w := where{what: "the local name map"}
	n, err := c.count(r, w, "functions")
	if err != nil {
		return err
	}
	for i := range n {
		at := r.Offset()
		fn, err := r.U32()
		if err != nil {
			return c.malformed(w.of(i), at, fmt.Errorf("function index: %w", err))
		}
		if err := c.nameMap(r, item("the local name map of function", uint64(fn))); err != nil {
			return err
		}
	}
	return nil
}

// types checks the parameter and result vectors of each function type,
// in recursion groups or not.
func (c *checker) types(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "types")
	if err != nil {
		return err
	}
	var index uint64 // of the next type, counting those in groups
	for i := range n {
		next, err := r.Peek()
		if err != nil {
			return c.malformed(item("type", index), r.Offset(), err)
		}
		group := uint32(1)
		if next == 0x4e {
			_, _ = r.Byte() // the 0x4e, there
			if group, err = c.count(r, item("recursion group", uint64(i)), "types"); err != nil {
				return err
			}
		}
		for range group {
			if err := c.funcType(r, item("type", index)); err != nil {
				return err
			}
			index++
		}
	}
	return nil
}

func (c *checker) funcType(r *wasmbin.Reader, w where) error {
	at := r.Offset()
	form, err := r.Byte()
	if err != nil {
		return c.malformed(w, at, err)
	}
	if form != wasmbin.FuncForm {
		return c.malformed(w, at, fmt.Errorf("form %#x is not that of a function type", form))
	}
	for _, things := range [...]string{"parameters", "results"} {
		n, err := c.count(r, w, things)
		if err != nil {
			return err
		}
		for range n {
			at := r.Offset()
			if _, err := r.ValueType(); err != nil {
				return c.malformed(w, at, fmt.Errorf("%s: %w", things, err))
			}
		}
	}
	return nil
}

func (c *checker) imports(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "imports")
	if err != nil {
		return err
	}
	for i := range n {
		w := item("import", uint64(i))
		if err := c.bytes(r, w, "a module name"); err != nil {
			return err
		}
		if err := c.bytes(r, w, "a name"); err != nil {
			return err
		}
		at := r.Offset()
		kind, err := r.Byte()
		if err != nil {
			return c.malformed(w, at, err)
		}
		switch kind {
		case wasmbin.KindFunc:
			_, err = r.U32()
			c.importFuncs++
		case wasmbin.KindTable:
			// An imported table is the exporter's: it costs nothing here.
			err = c.table(r, w, false)
		case wasmbin.KindMemory:
			err = c.memory(r, w)
		case wasmbin.KindGlobal:
			if _, err = r.ValueType(); err == nil {
				_, err = r.Byte() // mutability
			}
		case wasmbin.KindTag:
			if _, err = r.Byte(); err == nil { // attribute
				_, err = r.U32()
			}
		default:
			err = fmt.Errorf("unknown kind %#x", kind)
		}
		if err != nil {
			return c.malformed(w, at, err)
		}
	}
	return nil
}

func (c *checker) tables(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "tables")
	if err != nil {
		return err
	}
	for i := range n {
		w := item("table", uint64(i))
		at := r.Offset()
		if err := c.table(r, w, true); err != nil {
			return c.malformed(w, at, err)
		}
	}
	return nil
}

// table reads a table type, which a 0x40 0x00 prefix says is followed by
// an initializer expression (wazero reads one in imports too), and for a
// defined table adds its minimum to the module's.
func (c *checker) table(r *wasmbin.Reader, w where, defined bool) error {
	t, err := r.Peek()
	if err != nil {
		return err
	}
	initialized := t == 0x40
	if initialized {
		if err := r.Skip(2); err != nil { // 0x40 and a reserved 0x00
			return err
		}
	}
	if _, err := r.ValueType(); err != nil {
		return err
	}
	min, err := limits(r)
	if err != nil {
		return err
	}
	if defined {
		c.tableElems += min
		if c.tableElems > c.lim.TableElements {
			if min == c.tableElems {
				return &limitError{fmt.Sprintf("%s: %s declares a minimum of %d elements, over the limit of %d",
					c.section, w, min, c.lim.TableElements)}
			}
			return &limitError{fmt.Sprintf("%s: %s brings the tables' minimums to %d elements in all, over the limit of %d",
				c.section, w, c.tableElems, c.lim.TableElements)}
		}
	}
	if initialized {
		return constExpr(r)
	}
	return nil
}

func (c *checker) memories(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "memories")
	if err != nil {
		return err
	}
	for i := range n {
		w := item("memory", uint64(i))
		at := r.Offset()
		if err := c.memory(r, w); err != nil {
			return c.malformed(w, at, err)
		}
	}
	return nil
}

func (c *checker) memory(r *wasmbin.Reader, w where) error {
	min, err := limits(r)
	if err != nil {
		return err
	}
	if min > uint64(c.lim.MemoryPages) {
		return &limitError{fmt.Sprintf("%s: %s declares a minimum of %d pages of 64 KiB, over the limit of %d",
			c.section, w, min, c.lim.MemoryPages)}
	}
	return nil
}

// limits reads the limits of a table or memory type and returns the
// minimum. Flags 2 and 3 mark a shared memory (threads proposal), which
// wazero decodes, then refuses unless threads are enabled. Flags 4 to 7
// (a 64-bit memory) wazero refuses before it reads on, and so does Check.
func limits(r *wasmbin.Reader) (uint64, error) {
	if flags, err := r.Peek(); err == nil && flags > wasmbin.LimitsHasMax|wasmbin.LimitsShared {
		return 0, fmt.Errorf("limits flags %#x are not 0 to 3", flags)
	}
	l, err := r.Limits()
	return l.Min, err
}

func (c *checker) exports(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "exports")
	if err != nil {
		return err
	}
	for i := range n {
		w := item("export", uint64(i))
		if err := c.bytes(r, w, "a name"); err != nil {
			return err
		}
		at := r.Offset()
		if _, err := r.Byte(); err != nil { // kind
			return c.malformed(w, at, err)
		}
		if _, err := r.U32(); err != nil {
			return c.malformed(w, at, err)
		}
	}
	return nil
}

// elements checks the vector of function indices or expressions of each
// element segment, in each of the eight encodings the flags select (bit
// 0: passive or declarative; bit 1: with a table index, or declarative;
// bit 2: expressions instead of function indices).
func (c *checker) elements(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "element segments")
	if err != nil {
		return err
	}
	for i := range n {
		w := item("segment", uint64(i))
		at := r.Offset()
		flags, err := r.U32()
		if err == nil && flags > 7 {
			err = fmt.Errorf("flags %d are not 0 to 7", flags)
		}
		if err == nil {
			err = elementHead(r, flags)
		}
		if err != nil {
			return c.malformed(w, at, err)
		}
		things := "function indices"
		if flags&4 != 0 {
			things = "expressions"
		}
		count, err := c.count(r, w, things)
		if err != nil {
			return err
		}
		for range count {
			at := r.Offset()
			if flags&4 == 0 {
				_, err = r.U32()
			} else {
				err = constExpr(r)
			}
			if err != nil {
				return c.malformed(w, at, err)
			}
		}
	}
	return nil
}

// elementHead skips what precedes the vector of an element segment.
func elementHead(r *wasmbin.Reader, flags uint32) error {
	if flags == 2 || flags == 6 { // active, with a table index
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	if flags&1 == 0 { // active: the offset
		if err := constExpr(r); err != nil {
			return err
		}
	}
	switch {
	case flags == 0 || flags == 4:
		return nil // funcref, implied
	case flags&4 == 0: // element kind, 0x00
		_, err := r.Byte()
		return err
	default: // reference type
		_, err := r.ValueType()
		return err
	}
}

// code checks the locals each function body declares.
func (c *checker) code(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "function bodies")
	if err != nil {
		return err
	}
	for i := range n {
		w := item("function", uint64(c.importFuncs)+uint64(i))
		at := r.Offset()
		size, err := r.U32()
		if err != nil {
			return c.malformed(w, at, fmt.Errorf("size: %w", err))
		}
		if uint64(size) > uint64(r.Len()) {
			return fmt.Errorf("%s: %s declares a body of %s with only %s left", c.section, w, nbytes(uint64(size)), nbytes(uint64(r.Len())))
		}
		body, _ := r.Sub(size) // there, as checked above
		if err := c.locals(&body, w); err != nil {
			return err
		}
	}
	return nil
}

// locals checks the local declarations at the start of a function body:
// runs of locals of one type, each a count and a type.
func (c *checker) locals(r *wasmbin.Reader, w where) error {
	runs, err := c.count(r, w, "runs of locals")
	if err != nil {
		return err
	}
	var sum uint64
	for range runs {
		at := r.Offset()
		n, err := r.U32()
		if err == nil {
			_, err = r.ValueType()
		}
		if err != nil {
			return c.malformed(w, at, fmt.Errorf("locals: %w", err))
		}
		sum += uint64(n)
	}
	if sum > uint64(c.lim.FunctionLocals) {
		return fmt.Errorf("%s: %s declares %d locals, over the limit of %d", c.section, w, sum, c.lim.FunctionLocals)
	}
	c.allLocals += sum
	if c.allLocals > c.lim.ModuleLocals {
		return fmt.Errorf("%s: the functions up to %s declare %d locals in all, over the limit of %d",
			c.section, w, c.allLocals, c.lim.ModuleLocals)
	}
	return nil
}

// data checks the length of each data segment.
func (c *checker) data(r *wasmbin.Reader) error {
	n, err := c.count(r, where{}, "data segments")
	if err != nil {
		return err
	}
	for i := range n {
		w := item("segment", uint64(i))
		at := r.Offset()
		flags, err := r.U32()
		if err == nil && flags > 2 {
			err = fmt.Errorf("flags %d are not 0 to 2", flags)
		}
		if err == nil && flags == 2 { // active, with a memory index
			_, err = r.U32()
		}
		if err == nil && flags != 1 { // active: the offset
			err = constExpr(r)
		}
		if err != nil {
			return c.malformed(w, at, err)
		}
		if err := c.bytes(r, w, "contents"); err != nil {
			return err
		}
	}
	return nil
}

// Instructions that wazero accepts in a constant expression.
const (
	opEnd       = 0x0b
	opGlobalGet = 0x23
	opI32Const  = 0x41
	opI64Const  = 0x42
	opF32Const  = 0x43
	opF64Const  = 0x44
	opI32Add    = 0x6a
	opI32Sub    = 0x6b
	opI32Mul    = 0x6c
	opI64Add    = 0x7c
	opI64Sub    = 0x7d
	opI64Mul    = 0x7e
	opRefNull   = 0xd0
	opRefFunc   = 0xd2
	opVecPrefix = 0xfd
	opV128Const = 0x0c
)

// constExpr skips a constant expression, up to and including its end.
func constExpr(r *wasmbin.Reader) error {
	for {
		op, err := r.Byte()
		if err != nil {
			return err
		}
		switch op {
		case opEnd:
			return nil
		case opI32Const:
			_, err = r.S32()
		case opI64Const:
			_, err = r.S64()
		case opF32Const:
			err = r.Skip(4)
		case opF64Const:
			err = r.Skip(8)
		case opGlobalGet, opRefFunc:
			_, err = r.U32()
		case opRefNull:
			// A one-byte abstract heap type or a type index: one heap
			// type, a signed LEB128 number, either way.
			_, err = r.S33()
		case opI32Add, opI32Sub, opI32Mul, opI64Add, opI64Sub, opI64Mul:
		case opVecPrefix:
			var sub byte
			if sub, err = r.Byte(); err == nil {
				if sub != opV128Const {
					return fmt.Errorf("instruction 0xfd %#x in a constant expression", sub)
				}
				err = r.Skip(16)
			}
		default:
			return fmt.Errorf("instruction %#x in a constant expression", op)
		}
		if err != nil {
			return err
		}
	}
}
