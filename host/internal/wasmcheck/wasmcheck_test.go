package wasmcheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// Builders of hand-assembled binaries. Vector counts and sizes are what
// the tests lie about, so nothing here computes them but section and
// entry sizes, and only where a case says so.

// leb is v in the shortest unsigned LEB128 encoding.
func leb(v uint32) []byte { return wasmbin.AppendU32(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// section is a section with its true size.
func section(id byte, content ...[]byte) []byte {
	c := cat(content...)
	return cat([]byte{id}, leb(uint32(len(c))), c)
}

// module is a binary of the header and the sections.
func module(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

// vec is a vector with its true count.
func vec(items ...[]byte) []byte { return cat(leb(uint32(len(items))), cat(items...)) }

// name is a length-prefixed string.
func name(s string) []byte { return cat(leb(uint32(len(s))), []byte(s)) }

// body is a code entry with its true size: locals (an encoded vector of
// runs) and instructions, to which it adds the final end.
func body(locals []byte, instrs ...byte) []byte {
	b := cat(locals, instrs, []byte{opEnd})
	return cat(leb(uint32(len(b))), b)
}

// nameSection is a name section of the given subsections, each an id and
// its content, with true sizes.
func nameSection(subs ...[]byte) []byte {
	var c []byte
	for _, s := range subs {
		c = cat(c, s[:1], leb(uint32(len(s)-1)), s[1:])
	}
	return section(wasmbin.SectionCustom, name("name"), c)
}

const (
	max32   = 0xffffffff
	i32     = 0x7f
	funcref = 0x70
)

var (
	typeVoid = []byte{0x60, 0, 0} // func() -> ()
	i32Zero  = []byte{opI32Const, 0, opEnd}
)

// locals is a vector of runs of i32 locals of the given lengths.
func locals(runs ...uint32) []byte {
	out := leb(uint32(len(runs)))
	for _, n := range runs {
		out = cat(out, leb(n), []byte{i32})
	}
	return out
}

// limitsFor returns the default limits with MemoryPages set as a host
// with a 64 MiB memory limit sets it.
func limitsFor() Limits {
	lim := DefaultLimits()
	lim.MemoryPages = 1024
	return lim
}

// refusal is a module Check must refuse and what its error must say.
type refusal struct {
	name      string
	wasm      []byte
	want      string
	malformed bool // the error wraps ErrMalformed
}

// refusals are modules that declare more than they hold or than the
// limits allow, each but for that one thing well-formed as far as Check
// reads, and modules that break off or do not decode there.
func refusals() []refusal {
	oneFunc := func(sections ...[]byte) []byte { // type 0 and function 0 before them
		return module(append([][]byte{section(wasmbin.SectionType, vec(typeVoid)), section(wasmbin.SectionFunction, vec([]byte{0}))}, sections...)...)
	}
	return []refusal{
		// Counts of a whole section.
		{name: "functions", wasm: module(section(wasmbin.SectionFunction, leb(max32))),
			want: "function section declares 4294967295 functions in 5 bytes"},
		{name: "types", wasm: module(section(wasmbin.SectionType, leb(max32))),
			want: "type section declares 4294967295 types in 5 bytes"},
		{name: "imports", wasm: module(section(wasmbin.SectionImport, leb(max32))),
			want: "import section declares 4294967295 imports in 5 bytes"},
		{name: "tables", wasm: module(section(wasmbin.SectionTable, leb(max32))),
			want: "table section declares 4294967295 tables in 5 bytes"},
		{name: "memories", wasm: module(section(wasmbin.SectionMemory, leb(2))),
			want: "memory section declares 2 memories in 1 byte"},
		{name: "one function", wasm: module(section(wasmbin.SectionFunction, leb(1))),
			want: "function section declares 1 function in 1 byte"},
		{name: "globals", wasm: module(section(wasmbin.SectionGlobal, leb(max32))),
			want: "global section declares 4294967295 globals in 5 bytes"},
		{name: "exports", wasm: module(section(wasmbin.SectionExport, leb(max32))),
			want: "export section declares 4294967295 exports in 5 bytes"},
		{name: "element segments", wasm: module(section(wasmbin.SectionElement, leb(max32))),
			want: "element section declares 4294967295 element segments in 5 bytes"},
		{name: "function bodies", wasm: module(section(wasmbin.SectionCode, leb(max32))),
			want: "code section declares 4294967295 function bodies in 5 bytes"},
		{name: "data segments", wasm: module(section(wasmbin.SectionData, leb(max32))),
			want: "data section declares 4294967295 data segments in 5 bytes"},
		{name: "tags", wasm: module(section(wasmbin.SectionTag, leb(max32))),
			want: "tag section declares 4294967295 tags in 5 bytes"},
		{name: "one more entry than bytes", wasm: module(section(wasmbin.SectionFunction, leb(3), []byte{0, 0})),
			want: "function section declares 3 functions in 3 bytes"},

		// Vectors inside entries.
		{name: "parameters", wasm: module(section(wasmbin.SectionType, vec(cat([]byte{0x60}, leb(max32))))),
			want: "type section: type 0 declares 4294967295 parameters with only 0 bytes left"},
		{name: "results", wasm: module(section(wasmbin.SectionType, leb(2), typeVoid, []byte{0x60, 1, i32}, leb(1000), []byte{i32})),
			want: "type section: type 1 declares 1000 results with only 1 byte left"},
		{name: "recursion group", wasm: module(section(wasmbin.SectionType, vec(cat([]byte{0x4e}, leb(max32))))),
			want: "type section: recursion group 0 declares 4294967295 types with only 0 bytes left"},
		{name: "type in a recursion group", wasm: module(section(wasmbin.SectionType, leb(2), typeVoid, []byte{0x4e, 2}, typeVoid, []byte{0x60}, leb(max32))),
			want: "type section: type 2 declares 4294967295 parameters"},
		{name: "import module name", wasm: module(section(wasmbin.SectionImport, leb(1), leb(max32))),
			want: "import section: import 0 declares a module name of 4294967295 bytes with only 0 bytes left"},
		{name: "import name", wasm: module(section(wasmbin.SectionImport, leb(1), name("env"), leb(max32))),
			want: "import section: import 0 declares a name of 4294967295 bytes with only 0 bytes left"},
		{name: "import after a table with an initializer", wasm: module(section(wasmbin.SectionImport, leb(2),
			name("env"), name("t"), []byte{wasmbin.KindTable, 0x40, 0, funcref, 0, 1, opRefNull, funcref, opEnd}, leb(max32))),
			want: "import section: import 1 declares a module name of 4294967295 bytes with only 0 bytes left"},
		{name: "export name", wasm: module(section(wasmbin.SectionExport, leb(1), leb(max32))),
			want: "export section: export 0 declares a name of 4294967295 bytes with only 0 bytes left"},
		{name: "element function indices", wasm: module(section(wasmbin.SectionElement, leb(1), []byte{0}, i32Zero, leb(max32))),
			want: "element section: segment 0 declares 4294967295 function indices with only 0 bytes left"},
		{name: "passive element function indices", wasm: module(section(wasmbin.SectionElement, leb(1), []byte{1, 0}, leb(max32))),
			want: "element section: segment 0 declares 4294967295 function indices"},
		{name: "element function indices with a table index", wasm: module(section(wasmbin.SectionElement, leb(1), []byte{2, 0}, i32Zero, []byte{0}, leb(max32))),
			want: "element section: segment 0 declares 4294967295 function indices"},
		{name: "element expressions", wasm: module(section(wasmbin.SectionElement, leb(1), []byte{5, funcref}, leb(max32))),
			want: "element section: segment 0 declares 4294967295 expressions with only 0 bytes left"},
		{name: "element expressions with a table index", wasm: module(section(wasmbin.SectionElement, leb(2),
			[]byte{1, 0, 0}, []byte{6, 0}, i32Zero, []byte{funcref}, leb(max32))),
			want: "element section: segment 1 declares 4294967295 expressions"},
		{name: "data segment contents", wasm: module(section(wasmbin.SectionData, leb(1), []byte{0}, i32Zero, leb(max32))),
			want: "data section: segment 0 declares contents of 4294967295 bytes with only 0 bytes left"},
		{name: "passive data segment contents", wasm: module(section(wasmbin.SectionData, leb(1), []byte{1}, leb(max32))),
			want: "data section: segment 0 declares contents of 4294967295 bytes"},
		{name: "data segment with a memory index", wasm: module(section(wasmbin.SectionData, leb(1), []byte{2, 0}, i32Zero, leb(1<<20), []byte("abc"))),
			want: "data section: segment 0 declares contents of 1048576 bytes with only 3 bytes left"},
		{name: "function body", wasm: oneFunc(section(wasmbin.SectionCode, leb(1), leb(max32), []byte{0})),
			want: "code section: function 0 declares a body of 4294967295 bytes with only 1 byte left"},
		{name: "runs of locals", wasm: oneFunc(section(wasmbin.SectionCode, leb(1), leb(6), leb(max32), []byte{opEnd})),
			want: "code section: function 0 declares 4294967295 runs of locals with only 1 byte left"},
		{name: "function numbered after imports", wasm: module(
			section(wasmbin.SectionType, vec(typeVoid)),
			section(wasmbin.SectionImport, vec(cat(name("env"), name("f"), []byte{wasmbin.KindFunc, 0}), cat(name("env"), name("g"), []byte{wasmbin.KindFunc, 0}))),
			section(wasmbin.SectionFunction, vec([]byte{0})),
			section(wasmbin.SectionCode, vec(body(locals(50_001))))),
			want: "code section: function 2 declares 50001 locals, over the limit of 50000"},

		// Locals, tables and memories over the limits.
		{name: "locals of a function", wasm: oneFunc(section(wasmbin.SectionCode, vec(body(locals(max32))))),
			want: "code section: function 0 declares 4294967295 locals, over the limit of 50000"},
		{name: "locals in runs that overflow 32 bits", wasm: oneFunc(section(wasmbin.SectionCode, vec(body(locals(1<<31, 1<<31))))),
			want: "code section: function 0 declares 4294967296 locals, over the limit of 50000"},
		{name: "locals of all functions", wasm: func() []byte {
			const n = 11 // 11 * 50,000 > 524,288
			var funcs, bodies [][]byte
			for range n {
				funcs = append(funcs, []byte{0})
				bodies = append(bodies, body(locals(50_000)))
			}
			return module(section(wasmbin.SectionType, vec(typeVoid)), section(wasmbin.SectionFunction, vec(funcs...)), section(wasmbin.SectionCode, vec(bodies...)))
		}(), want: "code section: the functions up to function 10 declare 550000 locals in all, over the limit of 524288"},
		{name: "table minimum", wasm: module(section(wasmbin.SectionTable, vec(cat([]byte{funcref, 0}, leb(1<<27))))),
			want: "table section: table 0 declares a minimum of 134217728 elements, over the limit of 1048576"},
		{name: "table minimum with a maximum", wasm: module(section(wasmbin.SectionTable, vec(cat([]byte{funcref, 1}, leb(max32), leb(max32))))),
			want: "table section: table 0 declares a minimum of 4294967295 elements"},
		{name: "initialized table minimum", wasm: module(section(wasmbin.SectionTable, vec(cat([]byte{0x40, 0, funcref, 0}, leb(1<<27), []byte{opRefNull, funcref, opEnd})))),
			want: "table section: table 0 declares a minimum of 134217728 elements"},
		{name: "tables' minimums together", wasm: module(section(wasmbin.SectionTable, vec(
			cat([]byte{funcref, 0}, leb(600_000)), cat([]byte{0x63, 0x70, 0}, leb(600_000))))),
			want: "table section: table 1 brings the tables' minimums to 1200000 elements in all, over the limit of 1048576"},
		{name: "memory minimum", wasm: module(section(wasmbin.SectionMemory, vec(cat([]byte{0}, leb(1025))))),
			want: "memory section: memory 0 declares a minimum of 1025 pages of 64 KiB, over the limit of 1024"},
		{name: "memory minimum with a maximum", wasm: module(section(wasmbin.SectionMemory, vec(cat([]byte{1}, leb(max32), leb(max32))))),
			want: "memory section: memory 0 declares a minimum of 4294967295 pages"},
		{name: "imported memory minimum", wasm: module(section(wasmbin.SectionImport, vec(cat(name("env"), name("memory"), []byte{wasmbin.KindMemory, 0}, leb(65536))))),
			want: "import section: import 0 declares a minimum of 65536 pages of 64 KiB, over the limit of 1024"},

		// Custom and name sections.
		{name: "custom section name", wasm: module(section(wasmbin.SectionCustom, leb(max32))),
			want: "custom section declares a name of 4294967295 bytes in 5 bytes"},
		{name: "module name", wasm: module(nameSection(cat([]byte{namesModule}, leb(max32)))),
			want: "name section: subsection 0 declares a module name of 4294967295 bytes with only 0 bytes left"},
		{name: "function name map", wasm: module(nameSection(cat([]byte{namesFunction}, leb(max32)))),
			want: "name section: the function name map declares 4294967295 entries with only 0 bytes left"},
		{name: "function name", wasm: module(nameSection(cat([]byte{namesFunction}, leb(2), []byte{0}, name("f"), []byte{1}, leb(max32)))),
			want: "name section: the function name map: entry 1 declares a name of 4294967295 bytes with only 0 bytes left"},
		{name: "local name map", wasm: module(nameSection(cat([]byte{namesLocal}, leb(max32)))),
			want: "name section: the local name map declares 4294967295 functions with only 0 bytes left"},
		{name: "local name map of a function", wasm: module(nameSection(cat([]byte{namesLocal}, leb(1), leb(7), leb(max32)))),
			want: "name section: the local name map of function 7 declares 4294967295 entries with only 0 bytes left"},
		{name: "local name", wasm: module(nameSection(cat([]byte{namesLocal}, leb(1), leb(7), leb(1), leb(0), leb(max32)))),
			want: "name section: the local name map of function 7: entry 0 declares a name of 4294967295 bytes"},
		{name: "name subsection size", wasm: module(section(wasmbin.SectionCustom, name("name"), []byte{namesFunction}, leb(max32))),
			want: "name section: subsection 1 declares 4294967295 bytes with only 0 bytes left"},

		// Bytes that do not decode where Check reads.
		{name: "truncated header", wasm: []byte("\x00asm\x01\x00"), want: "not a WebAssembly binary", malformed: true},
		{name: "another version", wasm: []byte("\x00asm\x0d\x00\x01\x00"), want: "WebAssembly binary version 0x1000d is not supported", malformed: true},
		{name: "section beyond the module", wasm: module([]byte{wasmbin.SectionType}, leb(127)),
			want: "type section at offset 0x8 declares 127 bytes with only 0 bytes left in the module", malformed: true},
		{name: "custom section beyond the module", wasm: module([]byte{wasmbin.SectionCustom}, leb(max32), name("x")),
			want: "custom section at offset 0x8 declares 4294967295 bytes with only 2 bytes left in the module", malformed: true},
		{name: "section size overflows", wasm: module([]byte{wasmbin.SectionType, 0xff, 0xff, 0xff, 0xff, 0x7f}),
			want: "type section at offset 0x8: size: LEB128 number overflows 32 bits", malformed: true},
		{name: "truncated count", wasm: module(section(wasmbin.SectionFunction, []byte{0x80})),
			want: "function section: number of functions: unexpected end (at offset 0xa)", malformed: true},
		{name: "truncated type", wasm: module(section(wasmbin.SectionType, leb(1), []byte{0x60, 1, 0x63})),
			want: "type section: type 0: parameters: unexpected end", malformed: true},
		{name: "not a function type", wasm: module(section(wasmbin.SectionType, vec([]byte{0x5f, 0}))),
			want: "type section: type 0: form 0x5f is not that of a function type", malformed: true},
		{name: "unknown import kind", wasm: module(section(wasmbin.SectionImport, vec(cat(name("a"), name("b"), []byte{7})))),
			want: "import section: import 0: unknown kind 0x7", malformed: true},
		{name: "memory64 limits", wasm: module(section(wasmbin.SectionMemory, vec([]byte{4, 1}))),
			want: "memory section: memory 0: limits flags 0x4 are not 0 to 3", malformed: true},
		{name: "element flags", wasm: module(section(wasmbin.SectionElement, vec([]byte{8}))),
			want: "element section: segment 0: flags 8 are not 0 to 7", malformed: true},
		{name: "data flags", wasm: module(section(wasmbin.SectionData, vec([]byte{3}))),
			want: "data section: segment 0: flags 3 are not 0 to 2", malformed: true},
		{name: "call in a constant expression", wasm: module(section(wasmbin.SectionData, vec([]byte{0, 0x10, 0, opEnd, 0}))),
			want: "data section: segment 0: instruction 0x10 in a constant expression", malformed: true},
		{name: "vector instruction in a constant expression", wasm: module(section(wasmbin.SectionData, vec([]byte{0, opVecPrefix, 1}))),
			want: "instruction 0xfd 0x1 in a constant expression", malformed: true},
		{name: "truncated locals", wasm: oneFunc(section(wasmbin.SectionCode, leb(1), leb(3), []byte{2, 1, i32})),
			want: "code section: function 0: locals: unexpected end", malformed: true},
		{name: "name subsection shorter than its size", wasm: module(section(wasmbin.SectionCustom, name("name"), []byte{namesFunction, 3, 0, 0x00, 0x00})),
			want: "name section: subsection 1 ends 2 bytes before its declared size", malformed: true},
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, tt := range refusals() {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.wasm, limitsFor())
			if err == nil {
				t.Fatalf("Check accepted %x", tt.wasm)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("Check error = %q, want one line containing %q", msg, tt.want)
			}
			if got := errors.Is(err, ErrMalformed); got != tt.malformed {
				t.Errorf("errors.Is(%q, ErrMalformed) = %v, want %v", err, got, tt.malformed)
			}
		})
	}
}

func TestCheckLimitsAreInclusive(t *testing.T) {
	lim := limitsFor()
	oneFunc := func(code []byte) []byte {
		return module(section(wasmbin.SectionType, vec(typeVoid)), section(wasmbin.SectionFunction, vec([]byte{0})), section(wasmbin.SectionCode, code))
	}
	tests := []struct {
		name string
		wasm []byte
	}{
		{name: "locals of a function", wasm: oneFunc(vec(body(locals(20_000, 30_000))))},
		{name: "table minimum", wasm: module(section(wasmbin.SectionTable, vec(cat([]byte{funcref, 0}, leb(1<<20)))))},
		{name: "tables' minimums together", wasm: module(section(wasmbin.SectionTable, vec(
			cat([]byte{funcref, 0}, leb(1<<19)), cat([]byte{funcref, 1}, leb(1<<19), leb(max32)))))},
		{name: "imported table minimum", wasm: module(section(wasmbin.SectionImport, vec(cat(name("env"), name("t"), []byte{wasmbin.KindTable, funcref, 0}, leb(max32)))))},
		{name: "memory minimum", wasm: module(section(wasmbin.SectionMemory, vec(cat([]byte{1}, leb(1024), leb(65536)))))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Check(tt.wasm, lim); err != nil {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

func TestCheckAcceptsRepoModules(t *testing.T) {
	for _, p := range testkit.WasmModules(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			wasm, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(wasm, limitsFor()); err != nil {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

// TestCheckDoesNotAllocate: a module that passes costs nothing but the
// walk, however large it is.
func TestCheckDoesNotAllocate(t *testing.T) {
	wasm, err := os.ReadFile("../../../udfs/build/card-stats-go.wasm")
	if err != nil {
		t.Fatal(err)
	}
	lim := limitsFor()
	if n := testing.AllocsPerRun(5, func() {
		if err := Check(wasm, lim); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Check allocated %v times for a %d-byte module, want 0", n, len(wasm))
	}
}

func BenchmarkCheck(b *testing.B) {
	wasm, err := os.ReadFile("../../../udfs/build/card-stats-go.wasm")
	if err != nil {
		b.Fatal(err)
	}
	lim := limitsFor()
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if err := Check(wasm, lim); err != nil {
			b.Fatal(err)
		}
	}
}
