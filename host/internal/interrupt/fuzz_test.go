package interrupt

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// FuzzInstrument feeds Instrument arbitrary bytes, as an upload would. It
// must never panic; what it returns must compile with wazero whenever the
// input does; and it must not turn a module wazero refuses into one it
// accepts, which would mean Instrument read the code differently from
// wazero (and so could miss a loop).
func FuzzInstrument(f *testing.F) {
	for _, p := range testkit.WasmModules(f) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 4096 { // larger ones are too slow to mutate usefully
			f.Add(b)
		}
	}
	f.Add(spinModule.bytes())
	withStart := spinModule
	withStart.start = 1
	f.Add(withStart.bytes())
	simd := base
	simd.funcs = []byte{0}
	simd.bodies = [][]byte{body([]byte{0x01, 0x01, v128}, append([]byte{0xfd, 0x0c}, bytes.Repeat([]byte{0x03}, 16)...),
		[]byte{0x21, 0x00, 0x03, 0x40, 0x20, 0x00, 0x20, 0x00, 0xfd, 0xba, 0x01, 0x21, 0x00, 0x0b})}
	f.Add(simd.bytes())

	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	f.Cleanup(func() { _ = r.Close(ctx) })
	compiles := func(wasm []byte) (bool, error) {
		c, err := r.CompileModule(ctx, wasm)
		if err != nil {
			return false, err
		}
		_ = c.Close(ctx)
		return true, nil
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := Instrument(wasm)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "interrupt: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line starting with \"interrupt: \"", msg)
			}
			return
		}
		if implausible(wasm) {
			return
		}
		inOK, inErr := compiles(wasm)
		outOK, outErr := compiles(out)
		// wazero cannot read a custom section with no content at the very
		// end of a module, which one can become when the DWARF sections
		// after it are dropped.
		if inOK && !outOK && !(excused(wasm) && strings.Contains(outErr.Error(), "custom section")) {
			t.Fatalf("the input compiles, the instrumented module does not: %v", outErr)
		}
		if outOK && !inOK && !excused(wasm) {
			t.Fatalf("the input does not compile (%v), the instrumented module does", inErr)
		}
	})
}

// excused reports whether the input has a start section or a DWARF
// section, which Instrument replaces or drops, so that wazero's complaints
// about them (a start function with parameters, a truncated .debug_line)
// no longer apply to its output.
func excused(wasm []byte) bool {
	m, err := parse(wasm)
	if err != nil {
		return false
	}
	for _, s := range m.sections {
		if s.ID == wasmbin.SectionStart {
			return true
		}
		if name, _ := customName(s.Content); s.ID == wasmbin.SectionCustom && strings.HasPrefix(name, ".debug_") {
			return true
		}
	}
	return false
}

// implausible reports whether wasm declares more of something (entries
// of a section, parameters of a function type, locals of a function,
// bytes of a name or data segment, functions of an element segment) than
// it could hold, or has a name section. wazero allocates for the declared count before it finds
// out, gigabytes for a few bytes of input, which would take the fuzzer
// down rather than test Instrument.
func implausible(wasm []byte) bool {
	m, err := parse(wasm)
	if err != nil {
		return false
	}
	for _, s := range m.sections {
		r := s.Reader()
		switch s.ID {
		case wasmbin.SectionCustom:
			// wazero decodes the name section, with the same habit;
			// Instrument copies it as it is.
			if name, _ := customName(s.Content); name == "name" {
				return true
			}
		case wasmbin.SectionStart, wasmbin.SectionDataCount:
		case wasmbin.SectionType:
			if implausibleTypes(&r) {
				return true
			}
		case wasmbin.SectionCode:
			if implausibleLocals(&r) {
				return true
			}
		case wasmbin.SectionImport, wasmbin.SectionExport, wasmbin.SectionElement, wasmbin.SectionData:
			if implausibleEntries(&r, s.ID) {
				return true
			}
		default:
			if n, err := r.U32(); err == nil && uint64(n) > uint64(len(s.Content)) {
				return true
			}
		}
	}
	return false
}

func implausibleTypes(r *wasmbin.Reader) bool {
	n, err := r.U32()
	if err != nil || uint64(n) > uint64(r.Size()) {
		return err == nil
	}
	for range n {
		if _, err := r.Byte(); err != nil { // 0x60
			return false
		}
		for range 2 { // params, results
			count, err := r.U32()
			if err != nil || uint64(count) > uint64(r.Len()) {
				return err == nil
			}
			if r.Skip(count) != nil {
				return false
			}
		}
	}
	return false
}

func implausibleLocals(r *wasmbin.Reader) bool {
	n, err := r.U32()
	if err != nil || uint64(n) > uint64(r.Size()) {
		return err == nil
	}
	for range n {
		size, err := r.U32()
		if err != nil {
			return false
		}
		b, err := r.Bytes(size)
		if err != nil {
			return false
		}
		fr := wasmbin.NewReader(b)
		groups, err := fr.U32()
		if err != nil {
			return false
		}
		var sum uint64
		for range min(groups, uint32(len(b))) {
			count, err := fr.U32()
			if err != nil {
				return false
			}
			if sum += uint64(count); sum > 1<<16 {
				return true
			}
			if fr.Skip(1) != nil {
				return false
			}
		}
	}
	return false
}

// implausibleEntries checks the vectors nested in the entries of an
// import, export, element or data section.
func implausibleEntries(r *wasmbin.Reader, id byte) bool {
	tooLong := func() bool { // a vector length beyond the bytes left; r does not move
		peek := *r
		n, err := peek.U32()
		return err == nil && uint64(n) > uint64(peek.Len())
	}
	skipExpr := func() bool { // false if the expression does not decode
		for {
			op, err := r.Byte()
			if err != nil {
				return false
			}
			if op == opEnd {
				return true
			}
			if immediates(r, op) != nil {
				return false
			}
		}
	}
	n, err := r.U32()
	if err != nil || uint64(n) > uint64(r.Size()) {
		return err == nil
	}
	for range n {
		switch id {
		case wasmbin.SectionImport, wasmbin.SectionExport:
			names := 1
			if id == wasmbin.SectionImport {
				names = 2
			}
			start := *r
			for range names {
				if tooLong() {
					return true
				}
				if _, err := r.Name(); err != nil {
					return false
				}
			}
			*r = start
			var a, b, c uint32
			if id == wasmbin.SectionImport && importEntry(r, &a, &b, &c) != nil {
				return false
			}
			if id == wasmbin.SectionExport {
				if _, err := r.Name(); err != nil {
					return false
				}
				if _, err := r.Byte(); err != nil {
					return false
				}
				if _, err := r.U32(); err != nil {
					return false
				}
			}
		case wasmbin.SectionData:
			flags, err := r.U32()
			if err != nil {
				return false
			}
			if flags == 2 {
				if _, err := r.U32(); err != nil {
					return false
				}
			}
			if flags != 1 && !skipExpr() {
				return false
			}
			if tooLong() {
				return true
			}
			if _, err := r.Name(); err != nil { // the bytes, read like a name
				return false
			}
		case wasmbin.SectionElement:
			flags, err := r.U32()
			if err != nil || flags > 7 {
				return false
			}
			if flags&2 != 0 && flags&1 == 0 { // table index
				if _, err := r.U32(); err != nil {
					return false
				}
			}
			if flags&1 == 0 && !skipExpr() { // active: offset
				return false
			}
			if flags&3 != 0 { // element kind or reference type
				if _, err := r.Byte(); err != nil {
					return false
				}
			}
			// The vector (of function indices or expressions) is what
			// wazero allocates for.
			if tooLong() {
				return true
			}
			count, _ := r.U32()
			for range count {
				if flags&4 == 0 {
					if _, err := r.U32(); err != nil {
						return false
					}
				} else if !skipExpr() {
					return false
				}
			}
		}
	}
	return false
}
