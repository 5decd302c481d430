// Package interrupt rewrites a WebAssembly binary so that its host can stop
// the guest at any moment, cheaply: every loop body is made to start with
//
//	global.get $flag
//	if
//	  unreachable
//	end
//
// where $flag is a new mutable i32 global, 0 until the host sets it, that
// the module exports as ExportName. The host sets it to 1
// (api.MutableGlobal.Set) from any goroutine, and the guest traps at its
// next loop iteration. This replaces wazero's WithCloseOnContextDone,
// which exits from compiled code to Go and back at every loop iteration
// and made tight guest loops many times slower.
//
// The flag alone is not enough. Go cannot preempt a goroutine while it
// runs code wazero compiled, so a guest that looped without ever leaving
// that code would hold up the garbage collector's every stop-the-world,
// and with it the whole process, including the goroutine that was to set
// the flag. So the guest also leaves it now and then, through a zero-page
// memory.grow (which wazero's compiler runs in Go, and which needs no new
// import): each function with loops gets a local counting their
// iterations, started on every entry from a second new global, $tick,
// which the entry increments; every 1024th count exits (see exitMask).
// That keeps the check in registers but for the flag's load, and a guest
// iterating every nanosecond exits about every microsecond. A module with
// loops must therefore have a memory, as every operator module does.
//
// Code that runs no loop ends by itself, with one exception: deep recursion
// without loops (wazero's own check has the same blind spot).
//
// A start function would run inside instantiation, before the host can
// reach the flag, so Instrument removes the start section and exports that
// function as StartExportName instead; the host must call it, with its
// deadline armed, right after instantiating. Everything else keeps its
// meaning. Function, global and type indices are unchanged, and the new
// locals come after a function's own, so the "name" section stays valid.
// DWARF sections (".debug_*") describe code offsets that no longer hold
// and are dropped.
//
// Instrument decodes the instruction set wazero accepts by default
// (api.CoreFeaturesV2: MVP, sign extension, non-trapping float-to-int, bulk
// memory, reference types, multi-value, SIMD) and refuses anything else
// rather than guess where an instruction ends: a loop it failed to see
// would be a loop the host cannot stop. It is no validator (wazero
// validates the module before and after), but it refuses code that names
// a global or local that does not exist: that index will be the flag's,
// the tick's or the iteration counter's, which the guest must not touch.
//
// Package interrupt knows nothing of the operator ABI.
package interrupt

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
)

const (
	// ExportName is the export under which an instrumented module exposes
	// its interrupt flag: a mutable i32 global, 0 until the host sets it.
	ExportName = "eddy_interrupt"
	// StartExportName is the export under which an instrumented module
	// exposes the function its start section named, if it had one.
	StartExportName = "eddy_interrupt_start"
)

// Section ids of the binary format.
const (
	sectionCustom    = 0
	sectionType      = 1
	sectionImport    = 2
	sectionFunction  = 3
	sectionTable     = 4
	sectionMemory    = 5
	sectionGlobal    = 6
	sectionExport    = 7
	sectionStart     = 8
	sectionElement   = 9
	sectionCode      = 10
	sectionData      = 11
	sectionDataCount = 12
	sectionTag       = 13
)

// sectionOrder is the place of each known non-custom section id in the
// order the binary format requires (tag after memory, data count before
// code); unknown ids are absent.
var sectionOrder = map[byte]int{
	sectionType: 1, sectionImport: 2, sectionFunction: 3, sectionTable: 4,
	sectionMemory: 5, sectionTag: 6, sectionGlobal: 7, sectionExport: 8,
	sectionStart: 9, sectionElement: 10, sectionDataCount: 11, sectionCode: 12,
	sectionData: 13,
}

// Kinds of imports and exports.
const (
	kindFunc   = 0x00
	kindTable  = 0x01
	kindMemory = 0x02
	kindGlobal = 0x03
	kindTag    = 0x04
)

var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// section is one section of the input: raw is all of it (id, size,
// content) so that an untouched section is copied exactly as it came.
type section struct {
	id      byte
	raw     []byte
	content []byte
	offset  int // of the id byte in the binary, for error messages
}

// module is what Instrument learns from the sections before it rewrites
// them.
type module struct {
	sections      []section
	typeParams    []uint32 // number of parameters of each function type
	params        []uint32 // number of parameters of each defined function
	importFuncs   uint32
	importGlobals uint32
	globals       uint32
	hasMemory     bool // imported or defined
	hasStart      bool
	start         uint32 // function index of the start function
}

// Instrument returns a copy of the Wasm binary wasm in which every loop
// body starts with a check of a new exported global, ExportName, and
// every so often exits to Go (see the package documentation). It returns
// an error, and never panics, for a binary that is malformed or uses an
// instruction it cannot decode, for one that already exports ExportName
// or StartExportName, and for one with loops but no memory.
func Instrument(wasm []byte) ([]byte, error) {
	m, err := parse(wasm)
	if err != nil {
		return nil, err
	}
	if uint64(m.importGlobals)+uint64(m.globals) >= math.MaxUint32-1 {
		return nil, fmt.Errorf("interrupt: too many globals (%d imported, %d defined)", m.importGlobals, m.globals)
	}
	flag := m.importGlobals + m.globals
	w := &bodyRewriter{flag: flag, tick: flag + 1, globals: flag}

	// Sections the module lacks are created in their place, before the
	// first section that must follow them or the trailing custom sections.
	missing := []section{
		{id: sectionGlobal, content: m.globalSection(nil)},
		{id: sectionExport, content: m.exportSection(nil, flag)},
	}
	for _, s := range m.sections {
		missing = slices.DeleteFunc(missing, func(x section) bool { return x.id == s.id })
	}

	// Each loop takes about 50 bytes more: Go-built modules grow by 3%.
	out := make([]byte, 0, len(wasm)+len(wasm)/16+64)
	out = append(out, header...)
	// Custom sections after the last other one (the name section, usually)
	// stay last: wazero's name section decoder can read past the end of a
	// malformed name section, harmlessly only when nothing follows.
	trailing := len(m.sections)
	for trailing > 0 && m.sections[trailing-1].id == sectionCustom {
		trailing--
	}
	for i, s := range m.sections {
		for len(missing) > 0 && (i >= trailing || s.id != sectionCustom && sectionOrder[s.id] > sectionOrder[missing[0].id]) {
			out = appendSection(out, missing[0].id, missing[0].content)
			missing = missing[1:]
		}
		switch s.id {
		case sectionCustom:
			if name, _ := customName(s.content); strings.HasPrefix(name, ".debug_") {
				continue
			}
			out = append(out, s.raw...)
		case sectionGlobal:
			out = appendSection(out, sectionGlobal, m.globalSection(s.content))
		case sectionExport:
			out = appendSection(out, sectionExport, m.exportSection(s.content, flag))
		case sectionStart:
			// Replaced by the StartExportName export.
		case sectionCode:
			code, loops, err := w.instrumentCode(s.content, m.params, s.offset+len(s.raw)-len(s.content), m.importFuncs)
			if err != nil {
				return nil, fmt.Errorf("interrupt: code section at %#x: %w", s.offset, err)
			}
			if loops > 0 && !m.hasMemory {
				// Adding one would make valid a module that uses memory
				// instructions without a memory: wazero must judge the
				// module as it came.
				return nil, fmt.Errorf("interrupt: the module has loops but no memory, which the loop check needs for memory.grow")
			}
			out = appendSection(out, sectionCode, code)
		default:
			out = append(out, s.raw...)
		}
	}
	for _, s := range missing {
		out = appendSection(out, s.id, s.content)
	}
	return out, nil
}

// parse splits the binary into sections, checks their order, and reads
// what Instrument needs from the import, global, export and start sections.
func parse(wasm []byte) (*module, error) {
	if len(wasm) < len(header) || !bytes.Equal(wasm[:len(header)], header) {
		return nil, fmt.Errorf("interrupt: not a WebAssembly 1.0 binary (bad magic number or version)")
	}
	m := &module{}
	r := reader{b: wasm, pos: len(header)}
	last := 0
	for !r.eof() {
		offset := r.pos
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("interrupt: section at %#x: size: %w", offset, err)
		}
		content, err := r.bytes(size)
		if err != nil {
			return nil, fmt.Errorf("interrupt: section at %#x: %d bytes: %w", offset, size, err)
		}
		s := section{id: id, raw: wasm[offset:r.pos], content: content, offset: offset}
		if id != sectionCustom {
			order, known := sectionOrder[id]
			if !known {
				return nil, fmt.Errorf("interrupt: section at %#x: unknown section id %d", offset, id)
			}
			if order <= last {
				return nil, fmt.Errorf("interrupt: section at %#x: section id %d is out of order or repeated", offset, id)
			}
			last = order
		}
		if err := m.read(s); err != nil {
			return nil, fmt.Errorf("interrupt: %s section at %#x: %w", sectionName(id), offset, err)
		}
		m.sections = append(m.sections, s)
	}
	return m, nil
}

// read takes what Instrument needs from one section.
func (m *module) read(s section) error {
	r := reader{b: s.content}
	var err error
	switch s.id {
	case sectionCustom:
		_, err = customName(s.content)
		return err
	case sectionType:
		m.typeParams, err = readTypes(&r)
	case sectionFunction:
		m.params, err = m.readFunctions(&r)
	case sectionImport:
		var memories uint32
		m.importFuncs, memories, m.importGlobals, err = countImports(&r)
		m.hasMemory = m.hasMemory || memories > 0
	case sectionMemory:
		// The entries are copied as they are; only their number matters.
		var n uint32
		n, err = r.u32()
		m.hasMemory = m.hasMemory || n > 0
		return err
	case sectionGlobal:
		// The entries are copied as they are; only their number matters.
		m.globals, err = r.u32()
		return err
	case sectionExport:
		// The global section precedes this one, so m.globals is final.
		err = checkExports(&r, m.importGlobals+m.globals)
	case sectionStart:
		m.hasStart = true
		m.start, err = r.u32()
	default:
		return nil
	}
	if err == nil && !r.eof() {
		err = fmt.Errorf("%d bytes after the last entry", len(r.b)-r.pos)
	}
	return err
}

func customName(content []byte) (string, error) {
	r := reader{b: content}
	name, err := r.name()
	if err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	return string(name), nil
}

// readTypes returns the number of parameters of each function type.
func readTypes(r *reader) ([]uint32, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	var params []uint32
	for i := uint32(0); i < n; i++ {
		form, err := r.byte()
		if err != nil {
			return nil, err
		}
		if form != 0x60 {
			return nil, fmt.Errorf("type %d: unsupported form %#x (only function types are)", i, form)
		}
		var count [2]uint32 // parameters, results
		for j := range count {
			if count[j], err = r.u32(); err != nil {
				return nil, fmt.Errorf("type %d: %w", i, err)
			}
			for range count[j] {
				if err := valueType(r); err != nil {
					return nil, fmt.Errorf("type %d: %w", i, err)
				}
			}
		}
		params = append(params, count[0])
	}
	return params, nil
}

// readFunctions returns the number of parameters of each defined function.
func (m *module) readFunctions(r *reader) ([]uint32, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	var params []uint32
	for i := uint32(0); i < n; i++ {
		t, err := r.u32()
		if err != nil {
			return nil, err
		}
		if uint64(t) >= uint64(len(m.typeParams)) {
			return nil, fmt.Errorf("function %d has type %d; there are %d types", uint64(m.importFuncs)+uint64(i), t, len(m.typeParams))
		}
		params = append(params, m.typeParams[t])
	}
	return params, nil
}

// countImports returns how many functions, memories and globals the import
// section imports: they come first in their index spaces.
func countImports(r *reader) (funcs, memories, globals uint32, err error) {
	n, err := r.u32()
	if err != nil {
		return 0, 0, 0, err
	}
	for i := uint32(0); i < n; i++ {
		if err := importEntry(r, &funcs, &memories, &globals); err != nil {
			return 0, 0, 0, fmt.Errorf("import %d: %w", i, err)
		}
	}
	return funcs, memories, globals, nil
}

func importEntry(r *reader, funcs, memories, globals *uint32) error {
	if _, err := r.name(); err != nil {
		return err
	}
	if _, err := r.name(); err != nil {
		return err
	}
	kind, err := r.byte()
	if err != nil {
		return err
	}
	switch kind {
	case kindFunc:
		*funcs++
		_, err = r.u32()
	case kindTable:
		if err = valueType(r); err == nil {
			err = limits(r)
		}
	case kindMemory:
		*memories++
		err = limits(r)
	case kindGlobal:
		*globals++
		if err = valueType(r); err == nil {
			_, err = r.byte() // mutability
		}
	case kindTag:
		if _, err = r.byte(); err == nil { // attribute
			_, err = r.u32()
		}
	default:
		err = fmt.Errorf("unknown import kind %#x", kind)
	}
	return err
}

// limits skips the limits of a table or memory type: flags, minimum and,
// when flag bit 0 says so, maximum (64-bit for a 64-bit memory).
func limits(r *reader) error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 0x07 {
		return fmt.Errorf("unknown limits flags %#x", flags)
	}
	maxLen := 5 // bytes of a LEB128 u32
	if flags&0x04 != 0 {
		maxLen = 10 // u64
	}
	count := 1 + int(flags&0x01)
	for range count {
		if err := r.skipLEB(maxLen); err != nil {
			return err
		}
	}
	return nil
}

// valueType skips one value type: a single byte, or a reference type
// prefix and its heap type.
func valueType(r *reader) error {
	t, err := r.byte()
	if err != nil {
		return err
	}
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69: // i32 i64 f32 f64 v128 funcref externref exnref
		return nil
	case 0x63, 0x64: // (ref null ht), (ref ht)
		_, err = r.signed(33)
		return err
	default:
		return fmt.Errorf("unknown value type %#x", t)
	}
}

// checkExports refuses a module that already uses one of the names
// Instrument adds (the host would take the module's export for its own)
// or exports a global it does not have (that index will be the flag's).
func checkExports(r *reader, globals uint32) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		name, err := r.name()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if s := string(name); s == ExportName || s == StartExportName {
			return fmt.Errorf("the module already exports %q, a name reserved for the host's interrupt check", s)
		}
		kind, err := r.byte()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		idx, err := r.u32()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if kind == kindGlobal && idx >= globals {
			return fmt.Errorf("export %q: global %d does not exist (the module has %d)", name, idx, globals)
		}
	}
	return nil
}

// globalSection returns the global section content with the flag and tick
// globals appended; content is the original section's, nil if it had none.
func (m *module) globalSection(content []byte) []byte {
	var entries []byte
	if content != nil {
		r := reader{b: content}
		r.u32() // read already: cannot fail
		entries = content[r.pos:]
	}
	out := appendU32(make([]byte, 0, len(content)+16), m.globals+2)
	out = append(out, entries...)
	// (global (mut i32) (i32.const 0)), twice
	return append(out, 0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41, 0x00, 0x0b)
}

// exportSection returns the export section content with the flag global
// and the former start function appended; content is the original
// section's, nil if it had none.
func (m *module) exportSection(content []byte, flag uint32) []byte {
	var count uint32
	var entries []byte
	if content != nil {
		r := reader{b: content}
		count, _ = r.u32() // read already: cannot fail
		entries = content[r.pos:]
	}
	count++
	if m.hasStart {
		count++
	}
	out := appendU32(make([]byte, 0, len(content)+64), count)
	out = append(out, entries...)
	out = appendU32(append(appendName(out, ExportName), kindGlobal), flag)
	if m.hasStart {
		out = appendU32(append(appendName(out, StartExportName), kindFunc), m.start)
	}
	return out
}

func appendSection(out []byte, id byte, content []byte) []byte {
	out = appendU32(append(out, id), uint32(len(content)))
	return append(out, content...)
}

func sectionName(id byte) string {
	names := [...]string{"custom", "type", "import", "function", "table", "memory", "global",
		"export", "start", "element", "code", "data", "data count", "tag"}
	if int(id) < len(names) {
		return names[id]
	}
	return fmt.Sprintf("id-%d", id)
}
