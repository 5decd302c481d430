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
// While it rewrites the bodies, Instrument also straightens the jumps of
// functions built by Go's WebAssembly backend, which sends every jump
// round a dispatch loop and through a br_table (linearizeJumps, jumps.go):
// a jump forward becomes a plain br, so that only jumps back run the loop
// check. It changes no function's meaning, and leaves any other shape as
// it is.
//
// Package interrupt knows nothing of the operator ABI.
package interrupt

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

const (
	// ExportName is the export under which an instrumented module exposes
	// its interrupt flag: a mutable i32 global, 0 until the host sets it.
	ExportName = "eddy_interrupt"
	// StartExportName is the export under which an instrumented module
	// exposes the function its start section named, if it had one.
	StartExportName = "eddy_interrupt_start"
)

// module is what Instrument learns from the sections before it rewrites
// them.
type module struct {
	sections      []wasmbin.Section
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
	missing := []wasmbin.Section{
		{ID: wasmbin.SectionGlobal, Content: m.globalSection(nil)},
		{ID: wasmbin.SectionExport, Content: m.exportSection(nil, flag)},
	}
	for _, s := range m.sections {
		missing = slices.DeleteFunc(missing, func(x wasmbin.Section) bool { return x.ID == s.ID })
	}

	// Each loop takes about 50 bytes more: Go-built modules grow by 3%.
	out := make([]byte, 0, len(wasm)+len(wasm)/16+64)
	out = append(out, wasmbin.Header...)
	// Custom sections after the last other one (the name section, usually)
	// stay last: wazero's name section decoder can read past the end of a
	// malformed name section, harmlessly only when nothing follows.
	trailing := len(m.sections)
	for trailing > 0 && m.sections[trailing-1].ID == wasmbin.SectionCustom {
		trailing--
	}
	for i, s := range m.sections {
		for len(missing) > 0 && (i >= trailing || s.ID != wasmbin.SectionCustom && sectionOrder(s.ID) > sectionOrder(missing[0].ID)) {
			out = wasmbin.AppendSection(out, missing[0].ID, missing[0].Content)
			missing = missing[1:]
		}
		switch s.ID {
		case wasmbin.SectionCustom:
			if name, _ := customName(s.Content); strings.HasPrefix(name, ".debug_") {
				continue
			}
			out = append(out, s.Raw...)
		case wasmbin.SectionGlobal:
			out = wasmbin.AppendSection(out, wasmbin.SectionGlobal, m.globalSection(s.Content))
		case wasmbin.SectionExport:
			out = wasmbin.AppendSection(out, wasmbin.SectionExport, m.exportSection(s.Content, flag))
		case wasmbin.SectionStart:
			// Replaced by the StartExportName export.
		case wasmbin.SectionCode:
			code, loops, err := w.instrumentCode(s.Reader(), m.params, m.importFuncs)
			if err != nil {
				return nil, fmt.Errorf("interrupt: code section at %#x: %w", s.Offset, err)
			}
			if loops > 0 && !m.hasMemory {
				// Adding one would make valid a module that uses memory
				// instructions without a memory: wazero must judge the
				// module as it came.
				return nil, fmt.Errorf("interrupt: the module has loops but no memory, which the loop check needs for memory.grow")
			}
			out = wasmbin.AppendSection(out, wasmbin.SectionCode, code)
		default:
			out = append(out, s.Raw...)
		}
	}
	for _, s := range missing {
		out = wasmbin.AppendSection(out, s.ID, s.Content)
	}
	return out, nil
}

// parse splits the binary into sections, checks their order, and reads
// what Instrument needs from the import, global, export and start sections.
func parse(wasm []byte) (*module, error) {
	if len(wasm) < len(wasmbin.Header) || string(wasm[:len(wasmbin.Header)]) != wasmbin.Header {
		return nil, fmt.Errorf("interrupt: not a WebAssembly 1.0 binary (bad magic number or version)")
	}
	m := &module{}
	r := wasmbin.NewReaderAt(wasm[len(wasmbin.Header):], len(wasmbin.Header))
	last := 0
	for !r.EOF() {
		s, err := r.Section()
		if err != nil {
			return nil, fmt.Errorf("interrupt: %w", err)
		}
		if s.ID != wasmbin.SectionCustom {
			order, known := wasmbin.SectionOrder(s.ID)
			if !known {
				return nil, fmt.Errorf("interrupt: section at %#x: unknown section id %d", s.Offset, s.ID)
			}
			if order <= last {
				return nil, fmt.Errorf("interrupt: section at %#x: section id %d is out of order or repeated", s.Offset, s.ID)
			}
			last = order
		}
		if err := m.read(s); err != nil {
			return nil, fmt.Errorf("interrupt: %s at %#x: %w", wasmbin.SectionName(s.ID), s.Offset, err)
		}
		m.sections = append(m.sections, s)
	}
	return m, nil
}

// read takes what Instrument needs from one section.
func (m *module) read(s wasmbin.Section) error {
	r := s.Reader()
	var err error
	switch s.ID {
	case wasmbin.SectionCustom:
		_, err = customName(s.Content)
		return err
	case wasmbin.SectionType:
		m.typeParams, err = readTypes(&r)
	case wasmbin.SectionFunction:
		m.params, err = m.readFunctions(&r)
	case wasmbin.SectionImport:
		var memories uint32
		m.importFuncs, memories, m.importGlobals, err = countImports(&r)
		m.hasMemory = m.hasMemory || memories > 0
	case wasmbin.SectionMemory:
		// The entries are copied as they are; only their number matters.
		var n uint32
		n, err = r.U32()
		m.hasMemory = m.hasMemory || n > 0
		return err
	case wasmbin.SectionGlobal:
		// The entries are copied as they are; only their number matters.
		m.globals, err = r.U32()
		return err
	case wasmbin.SectionExport:
		// The global section precedes this one, so m.globals is final.
		err = checkExports(&r, m.importGlobals+m.globals)
	case wasmbin.SectionStart:
		m.hasStart = true
		m.start, err = r.U32()
	default:
		return nil
	}
	if err == nil && !r.EOF() {
		err = fmt.Errorf("%d bytes after the last entry", r.Len())
	}
	return err
}

func customName(content []byte) (string, error) {
	r := wasmbin.NewReader(content)
	name, err := r.Name()
	if err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	return string(name), nil
}

// readTypes returns the number of parameters of each function type.
func readTypes(r *wasmbin.Reader) ([]uint32, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	var params []uint32
	for i := uint32(0); i < n; i++ {
		form, err := r.Byte()
		if err != nil {
			return nil, err
		}
		if form != wasmbin.FuncForm {
			return nil, fmt.Errorf("type %d: unsupported form %#x (only function types are)", i, form)
		}
		var count [2]uint32 // parameters, results
		for j := range count {
			if count[j], err = r.U32(); err != nil {
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
func (m *module) readFunctions(r *wasmbin.Reader) ([]uint32, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	var params []uint32
	for i := uint32(0); i < n; i++ {
		t, err := r.U32()
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
func countImports(r *wasmbin.Reader) (funcs, memories, globals uint32, err error) {
	n, err := r.U32()
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

func importEntry(r *wasmbin.Reader, funcs, memories, globals *uint32) error {
	if _, err := r.Name(); err != nil {
		return err
	}
	if _, err := r.Name(); err != nil {
		return err
	}
	kind, err := r.Byte()
	if err != nil {
		return err
	}
	switch kind {
	case wasmbin.KindFunc:
		*funcs++
		_, err = r.U32()
	case wasmbin.KindTable:
		if err = valueType(r); err == nil {
			_, err = r.Limits()
		}
	case wasmbin.KindMemory:
		*memories++
		_, err = r.Limits()
	case wasmbin.KindGlobal:
		*globals++
		if err = valueType(r); err == nil {
			_, err = r.Byte() // mutability
		}
	case wasmbin.KindTag:
		if _, err = r.Byte(); err == nil { // attribute
			_, err = r.U32()
		}
	default:
		err = fmt.Errorf("unknown import kind %#x", kind)
	}
	return err
}

// valueType skips one value type and refuses one that no proposal wazero
// decodes defines.
func valueType(r *wasmbin.Reader) error {
	t, err := r.ValueType()
	if err != nil {
		return err
	}
	switch t {
	case wasmbin.I32, wasmbin.I64, wasmbin.F32, wasmbin.F64, wasmbin.V128,
		wasmbin.FuncRef, wasmbin.ExternRef, wasmbin.ExnRef, wasmbin.RefNull, wasmbin.Ref:
		return nil
	default:
		return fmt.Errorf("unknown value type %#x", t)
	}
}

// checkExports refuses a module that already uses one of the names
// Instrument adds (the host would take the module's export for its own)
// or exports a global it does not have (that index will be the flag's).
func checkExports(r *wasmbin.Reader, globals uint32) error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		name, err := r.Name()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if s := string(name); s == ExportName || s == StartExportName {
			return fmt.Errorf("the module already exports %q, a name reserved for the host's interrupt check", s)
		}
		kind, err := r.Byte()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		idx, err := r.U32()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if kind == wasmbin.KindGlobal && idx >= globals {
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
		r := wasmbin.NewReader(content)
		_, _ = r.U32() // read already: cannot fail
		entries = r.Rest()
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(content)+16), m.globals+2)
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
		r := wasmbin.NewReader(content)
		count, _ = r.U32() // read already: cannot fail
		entries = r.Rest()
	}
	count++
	if m.hasStart {
		count++
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(content)+64), count)
	out = append(out, entries...)
	out = wasmbin.AppendU32(append(wasmbin.AppendName(out, ExportName), wasmbin.KindGlobal), flag)
	if m.hasStart {
		out = wasmbin.AppendU32(append(wasmbin.AppendName(out, StartExportName), wasmbin.KindFunc), m.start)
	}
	return out
}

// sectionOrder is the place of section id in the order the binary format
// requires, 0 for a custom or unknown section.
func sectionOrder(id byte) int {
	order, _ := wasmbin.SectionOrder(id)
	return order
}
