package interrupt

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
	"github.com/eddy-stream/eddy/internal/testkit"
)

func TestInstrumentFixtures(t *testing.T) {
	for _, path := range testkit.WasmModules(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			wasm, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Instrument(wasm)
			if err != nil {
				t.Fatalf("Instrument: %v", err)
			}
			r := newRuntime(t)
			compiled, err := r.CompileModule(context.Background(), out)
			if err != nil {
				t.Fatalf("the instrumented module does not compile: %v", err)
			}
			if _, ok := compiled.ExportedFunctions()[StartExportName]; ok {
				t.Errorf("%s exported, but the module has no start section", StartExportName)
			}
			checkFlag(t, instantiate(t, r, compiled))
			t.Logf("%d bytes → %d bytes", len(wasm), len(out))
		})
	}
}

// base is the module the instruction cases run in: a memory, a funcref
// table, a passive data and element segment (for the bulk operations) and
// the function types the bodies use.
var base = testModule{
	types: [][]byte{
		funcType(nil, nil),                           // 0: func()
		funcType([]byte{i32}, []byte{i32}),           // 1: func(i32) -> i32
		funcType(nil, []byte{i32}),                   // 2: func() -> i32
		funcType([]byte{i32, i32}, []byte{i32, i32}), // 3: func(i32, i32) -> (i32, i32)
	},
	tables:    [][]byte{{funcref, 0x00, 0x01}},
	memory:    []byte{0x00, 0x01},
	elems:     [][]byte{{0x01, 0x00, 0x01, 0x00}}, // passive, funcref, [func 0]
	dataCount: 2,
	data:      [][]byte{{0x01, 0x01, 'x'}}, // passive, "x"
}

// paramsOf is the number of parameters of each type of base.
var paramsOf = []int{0, 1, 0, 2}

func TestInstrumentInstructions(t *testing.T) {
	chk := loopMark
	// Immediates that hold the byte 0x03 (loop) test that they are
	// skipped, not read as instructions.
	three16 := bytes.Repeat([]byte{0x03}, 16)
	tests := []struct {
		name     string
		typ      byte     // type index of the function (see base.types)
		locals   []byte   // encoded locals vector; nil = none
		in, want [][]byte // instructions, without the final end
	}{
		{name: "empty loop", typ: 0,
			in:   [][]byte{{0x03, 0x40, 0x0b}},
			want: [][]byte{{0x03, 0x40}, chk, {0x0b}}},
		{name: "loop with a result", typ: 2,
			in:   [][]byte{{0x03, i32, 0x41, 0x01, 0x0b}},
			want: [][]byte{{0x03, i32}, chk, {0x41, 0x01, 0x0b}}},
		{name: "loop with params by type index", typ: 3,
			in:   [][]byte{{0x20, 0x00, 0x20, 0x01, 0x03, 0x03, 0x0b}},
			want: [][]byte{{0x20, 0x00, 0x20, 0x01, 0x03, 0x03}, chk, {0x0b}}},
		{name: "loop with a padded type index", typ: 3,
			in:   [][]byte{{0x20, 0x00, 0x20, 0x01, 0x03, 0x83, 0x80, 0x80, 0x80, 0x00, 0x0b}},
			want: [][]byte{{0x20, 0x00, 0x20, 0x01, 0x03, 0x83, 0x80, 0x80, 0x80, 0x00}, chk, {0x0b}}},
		{name: "nested loops", typ: 0,
			in:   [][]byte{{0x03, 0x40, 0x03, 0x40, 0x0c, 0x01, 0x0b, 0x0b}},
			want: [][]byte{{0x03, 0x40}, chk, {0x03, 0x40}, chk, {0x0c, 0x01, 0x0b, 0x0b}}},
		{name: "branches out of nested loops, unchanged", typ: 0, locals: []byte{0x01, 0x01, i32},
			in: [][]byte{{0x02, 0x40, 0x03, 0x40, 0x03, 0x40, // block; loop A; loop B
				0x20, 0x00, 0x0d, 0x80, 0x00, // br_if 0 (B), padded
				0x20, 0x00, 0x0d, 0x01, // br_if 1 (A)
				0x20, 0x00, 0x0e, 0x03, 0x00, 0x01, 0x02, 0x03, // br_table [B A block] function
				0x0b,                   // end B
				0x20, 0x00, 0x0d, 0x01, // br_if 1 (block)
				0x0b, 0x0b}}, // end A; end block
			want: [][]byte{{0x02, 0x40, 0x03, 0x40}, chk, {0x03, 0x40}, chk,
				{0x20, 0x00, 0x0d, 0x80, 0x00, 0x20, 0x00, 0x0d, 0x01, 0x20, 0x00, 0x0e, 0x03, 0x00, 0x01, 0x02, 0x03,
					0x0b, 0x20, 0x00, 0x0d, 0x01, 0x0b, 0x0b}}},
		{name: "loop in unreachable code", typ: 0,
			in:   [][]byte{{0x00, 0x03, 0x40, 0x0b}},
			want: [][]byte{{0x00, 0x03, 0x40}, chk, {0x0b}}},
		{name: "block and if, no loop", typ: 1,
			in: [][]byte{{0x02, 0x40, 0x0b, 0x20, 0x00, 0x04, i32, 0x41, 0x03, 0x05, 0x41, 0x02, 0x0b}}},
		{name: "br_table", typ: 1,
			in: [][]byte{{0x02, 0x40, 0x02, 0x40, 0x02, 0x40, 0x02, 0x40,
				0x20, 0x00, 0x0e, 0x03, 0x03, 0x02, 0x01, 0x03, // br_table [3 2 1] 3
				0x0b, 0x0b, 0x0b, 0x0b, 0x03, 0x40, 0x0b, 0x41, 0x00}},
			want: [][]byte{{0x02, 0x40, 0x02, 0x40, 0x02, 0x40, 0x02, 0x40,
				0x20, 0x00, 0x0e, 0x03, 0x03, 0x02, 0x01, 0x03,
				0x0b, 0x0b, 0x0b, 0x0b, 0x03, 0x40}, chk, {0x0b, 0x41, 0x00}}},
		{name: "call_indirect and padded call index", typ: 1,
			in: [][]byte{{0x20, 0x00, 0x41, 0x00, 0x11, 0x01, 0x00, // call_indirect type 1 table 0
				0x10, 0x80, 0x80, 0x80, 0x80, 0x00, // call 0, padded to 5 bytes
				0x03, 0x40, 0x0b}},
			want: [][]byte{{0x20, 0x00, 0x41, 0x00, 0x11, 0x01, 0x00, 0x10, 0x80, 0x80, 0x80, 0x80, 0x00, 0x03, 0x40}, chk, {0x0b}}},
		{name: "select with a type", typ: 1,
			in:   [][]byte{{0x20, 0x00, 0x41, 0x03, 0x20, 0x00, 0x1c, 0x01, i32, 0x1a, 0x03, 0x40, 0x0b, 0x41, 0x03}},
			want: [][]byte{{0x20, 0x00, 0x41, 0x03, 0x20, 0x00, 0x1c, 0x01, i32, 0x1a, 0x03, 0x40}, chk, {0x0b, 0x41, 0x03}}},
		{name: "constants, memory and sign extension", typ: 0,
			in: [][]byte{
				{0x43, 0x03, 0x03, 0x03, 0x03, 0x1a},               // f32.const; drop
				append(append([]byte{0x44}, three16[:8]...), 0x1a), // f64.const; drop
				{0x42, 0x03, 0x1a, 0x41, 0x83, 0x03, 0x1a},         // i64.const 3; drop; i32.const 387; drop
				{0x3f, 0x00, 0x40, 0x00, 0x1a},                     // memory.grow (memory.size); drop
				{0x41, 0x03, 0x28, 0x02, 0x03, 0xc0, 0x1a},         // i32.load align=2 offset=3; i32.extend8_s; drop
				{0x41, 0x03, 0x42, 0x03, 0x37, 0x03, 0x03},         // i64.store align=3 offset=3
				{0x03, 0x40, 0x0b},
			},
			want: [][]byte{
				{0x43, 0x03, 0x03, 0x03, 0x03, 0x1a},
				append(append([]byte{0x44}, three16[:8]...), 0x1a),
				{0x42, 0x03, 0x1a, 0x41, 0x83, 0x03, 0x1a},
				{0x3f, 0x00, 0x40, 0x00, 0x1a},
				{0x41, 0x03, 0x28, 0x02, 0x03, 0xc0, 0x1a},
				{0x41, 0x03, 0x42, 0x03, 0x37, 0x03, 0x03},
				{0x03, 0x40}, chk, {0x0b},
			}},
		{name: "0xfc: saturating truncation, bulk memory, tables", typ: 0,
			in: [][]byte{
				{0x43, 0, 0, 0, 0, 0xfc, 0x00, 0x1a},                         // i32.trunc_sat_f32_s; drop
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x08, 0x00, 0x00}, // memory.init 0
				{0xfc, 0x09, 0x00}, // data.drop 0
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0a, 0x00, 0x00}, // memory.copy
				{0x41, 0x00, 0x41, 0x03, 0x41, 0x00, 0xfc, 0x0b, 0x00},       // memory.fill
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0c, 0x00, 0x00}, // table.init 0 0
				{0xfc, 0x0d, 0x00}, // elem.drop 0
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0e, 0x00, 0x00}, // table.copy 0 0
				{0xd0, funcref, 0x41, 0x03, 0xfc, 0x0f, 0x00, 0x1a},          // table.grow 0; drop
				{0xfc, 0x10, 0x00, 0x1a},                                     // table.size 0; drop
				{0x41, 0x00, 0xd2, 0x00, 0x41, 0x00, 0xfc, 0x11, 0x00},       // table.fill 0 with ref.func 0
				{0x03, 0x40, 0x0b},
			},
			want: [][]byte{
				{0x43, 0, 0, 0, 0, 0xfc, 0x00, 0x1a},
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x08, 0x00, 0x00},
				{0xfc, 0x09, 0x00},
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0a, 0x00, 0x00},
				{0x41, 0x00, 0x41, 0x03, 0x41, 0x00, 0xfc, 0x0b, 0x00},
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0c, 0x00, 0x00},
				{0xfc, 0x0d, 0x00},
				{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0e, 0x00, 0x00},
				{0xd0, funcref, 0x41, 0x03, 0xfc, 0x0f, 0x00, 0x1a},
				{0xfc, 0x10, 0x00, 0x1a},
				{0x41, 0x00, 0xd2, 0x00, 0x41, 0x00, 0xfc, 0x11, 0x00},
				{0x03, 0x40}, chk, {0x0b},
			}},
		{name: "reference types", typ: 0,
			in: [][]byte{
				{0xd0, funcref, 0xd1, 0x1a},          // ref.null func; ref.is_null; drop
				{0x41, 0x00, 0x25, 0x00, 0x1a},       // table.get 0; drop
				{0x41, 0x00, 0xd2, 0x00, 0x26, 0x00}, // table.set 0 (ref.func 0)
				{0x03, 0x40, 0x0b},
			},
			want: [][]byte{
				{0xd0, funcref, 0xd1, 0x1a},
				{0x41, 0x00, 0x25, 0x00, 0x1a},
				{0x41, 0x00, 0xd2, 0x00, 0x26, 0x00},
				{0x03, 0x40}, chk, {0x0b},
			}},
		{name: "SIMD", typ: 0, locals: []byte{0x01, 0x01, v128},
			in: [][]byte{
				append([]byte{0xfd, 0x0c}, three16...),                             // v128.const
				{0x20, 0x00},                                                       // local.get 0
				append([]byte{0xfd, 0x0d}, three16...),                             // i8x16.shuffle
				{0x21, 0x00},                                                       // local.set 0
				{0x20, 0x00, 0xfd, 0x15, 0x03, 0x1a},                               // i8x16.extract_lane_s 3; drop
				{0x20, 0x00, 0x41, 0x03, 0xfd, 0x17, 0x03, 0x21, 0x00},             // i8x16.replace_lane 3
				{0x41, 0x00, 0xfd, 0x00, 0x04, 0x03, 0x21, 0x00},                   // v128.load align=4 offset=3
				{0x41, 0x00, 0x20, 0x00, 0xfd, 0x0b, 0x04, 0x03},                   // v128.store
				{0x41, 0x00, 0x20, 0x00, 0xfd, 0x54, 0x00, 0x03, 0x03, 0x21, 0x00}, // v128.load8_lane offset=3 lane 3
				{0x41, 0x00, 0xfd, 0x5c, 0x02, 0x03, 0x21, 0x00},                   // v128.load32_zero
				{0x20, 0x00, 0x20, 0x00, 0xfd, 0xba, 0x01, 0x21, 0x00},             // i32x4.dot_i16x8_s (a two-byte opcode)
				{0x20, 0x00, 0xfd, 0x4d, 0x21, 0x00},                               // v128.not
				{0x03, 0x40, 0x0b},
			},
			want: [][]byte{
				append([]byte{0xfd, 0x0c}, three16...),
				{0x20, 0x00},
				append([]byte{0xfd, 0x0d}, three16...),
				{0x21, 0x00},
				{0x20, 0x00, 0xfd, 0x15, 0x03, 0x1a},
				{0x20, 0x00, 0x41, 0x03, 0xfd, 0x17, 0x03, 0x21, 0x00},
				{0x41, 0x00, 0xfd, 0x00, 0x04, 0x03, 0x21, 0x00},
				{0x41, 0x00, 0x20, 0x00, 0xfd, 0x0b, 0x04, 0x03},
				{0x41, 0x00, 0x20, 0x00, 0xfd, 0x54, 0x00, 0x03, 0x03, 0x21, 0x00},
				{0x41, 0x00, 0xfd, 0x5c, 0x02, 0x03, 0x21, 0x00},
				{0x20, 0x00, 0x20, 0x00, 0xfd, 0xba, 0x01, 0x21, 0x00},
				{0x20, 0x00, 0xfd, 0x4d, 0x21, 0x00},
				{0x03, 0x40}, chk, {0x0b},
			}},
	}
	r := newRuntime(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			locals := tt.locals
			if locals == nil {
				locals = noLocals
			}
			want := tt.want
			if want == nil {
				want = tt.in // nothing to instrument
			}
			in := base
			in.funcs = []byte{tt.typ}
			in.bodies = [][]byte{body(locals, tt.in...)}
			wasm := in.bytes()
			// The case itself must be valid, or it proves nothing.
			if c, err := r.CompileModule(ctx, wasm); err != nil {
				t.Fatalf("the test module does not compile: %v", err)
			} else {
				_ = c.Close(ctx)
			}

			got, err := Instrument(wasm)
			if err != nil {
				t.Fatalf("Instrument: %v", err)
			}
			counter := uint32(paramsOf[tt.typ])
			for i := 1; i < len(locals); i += 2 { // count, type: one-byte counts only
				counter += uint32(locals[i])
			}
			if exp := in.instrumented(0, instrumentedBody(locals, 0, counter, want...)).bytes(); !bytes.Equal(got, exp) {
				t.Fatalf("Instrument =\n%x\nwant\n%x", got, exp)
			}
			c, err := r.CompileModule(ctx, got)
			if err != nil {
				t.Fatalf("the instrumented module does not compile: %v", err)
			}
			_ = c.Close(ctx)
		})
	}
}

func TestInstrumentSections(t *testing.T) {
	loop := body(noLocals, []byte{0x03, 0x40, 0x0b})
	tests := []struct {
		name string
		in   testModule
		flag uint32 // index of the flag global
	}{
		{name: "no global or export section: both created in order",
			in: testModule{types: [][]byte{funcType(nil, nil)}, funcs: []byte{0}, memory: []byte{0x00, 0x00}, bodies: [][]byte{loop}}},
		{name: "only a type section", in: testModule{types: [][]byte{funcType(nil, nil)}}},
		{name: "no memory is needed without loops",
			in: testModule{types: [][]byte{funcType(nil, nil)}, funcs: []byte{0}, bodies: [][]byte{body(noLocals)}}},
		{name: "imported and defined globals come before the flag", flag: 3,
			in: testModule{
				types: [][]byte{funcType(nil, nil)},
				imports: [][]byte{
					cat(wasmbin.AppendName(nil, "env"), wasmbin.AppendName(nil, "f"), []byte{wasmbin.KindFunc, 0x00}),
					cat(wasmbin.AppendName(nil, "env"), wasmbin.AppendName(nil, "g1"), []byte{wasmbin.KindGlobal, i32, 0x00}),
					cat(wasmbin.AppendName(nil, "env"), wasmbin.AppendName(nil, "mem"), []byte{wasmbin.KindMemory, 0x01, 0x01, 0x02}),
					cat(wasmbin.AppendName(nil, "env"), wasmbin.AppendName(nil, "tab"), []byte{wasmbin.KindTable, funcref, 0x00, 0x01}),
					cat(wasmbin.AppendName(nil, "env"), wasmbin.AppendName(nil, "g2"), []byte{wasmbin.KindGlobal, i64, 0x01}),
				},
				funcs:   []byte{0},
				globals: [][]byte{{f64, 0x01, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b}},
				exports: [][]byte{export("run", wasmbin.KindFunc, 1), export("g", wasmbin.KindGlobal, 2)},
				bodies:  [][]byte{loop},
			}},
		{name: "start function exported instead",
			in: testModule{
				types:   [][]byte{funcType(nil, nil)},
				funcs:   []byte{0, 0},
				memory:  []byte{0x00, 0x00},
				exports: [][]byte{export("run", wasmbin.KindFunc, 0)},
				start:   2,
				bodies:  [][]byte{loop, loop},
			}},
		{name: "name and other custom sections kept, DWARF dropped",
			in: testModule{
				types:  [][]byte{funcType(nil, nil)},
				funcs:  []byte{0},
				memory: []byte{0x00, 0x00},
				bodies: [][]byte{loop},
				customs: [][]byte{
					cat(wasmbin.AppendName(nil, "name"), []byte{0x01, 0x04, 0x01, 0x00, 0x01, 'f'}), // function 0 is "f"
					cat(wasmbin.AppendName(nil, ".debug_info"), []byte{1, 2, 3}),
					cat(wasmbin.AppendName(nil, "producers"), []byte{0x00}),
					cat(wasmbin.AppendName(nil, ".debug_line"), []byte{0x00}),
				},
			}},
	}
	r := newRuntime(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := tt.in.bytes()
			if c, err := r.CompileModule(ctx, wasm); err != nil {
				t.Fatalf("the test module does not compile: %v", err)
			} else {
				_ = c.Close(ctx)
			}
			var bodies [][]byte
			for _, b := range tt.in.bodies {
				if bytes.Equal(b, loop) {
					b = instrumentedBody(noLocals, tt.flag, 0, []byte{0x03, 0x40}, loopMark, []byte{0x0b})
				}
				bodies = append(bodies, b)
			}
			want := tt.in.instrumented(tt.flag, bodies...)
			var customs [][]byte
			for _, c := range want.customs {
				if name, _ := customName(c); !strings.HasPrefix(name, ".debug_") {
					customs = append(customs, c)
				}
			}
			want.customs = customs

			got, err := Instrument(wasm)
			if err != nil {
				t.Fatalf("Instrument: %v", err)
			}
			if exp := want.bytes(); !bytes.Equal(got, exp) {
				t.Fatalf("Instrument =\n%x\nwant\n%x", got, exp)
			}
			c, err := r.CompileModule(ctx, got)
			if err != nil {
				t.Fatalf("the instrumented module does not compile: %v", err)
			}
			_ = c.Close(ctx)
		})
	}
}

func TestInstrumentErrors(t *testing.T) {
	module := func(instrs ...[]byte) []byte {
		m := base
		m.funcs = []byte{0}
		m.bodies = [][]byte{body(noLocals, instrs...)}
		return m.bytes()
	}
	valid := module([]byte{0x03, 0x40, 0x0b})
	withExport := func(name string) []byte {
		m := base
		m.funcs = []byte{0}
		m.exports = [][]byte{export(name, wasmbin.KindFunc, 0)}
		m.bodies = [][]byte{body(noLocals)}
		return m.bytes()
	}
	rawBody := func(b []byte) []byte { // a body without the final end added
		m := base
		m.funcs = []byte{0}
		m.bodies = [][]byte{b}
		return m.bytes()
	}
	tests := []struct {
		name  string
		wasm  []byte
		words []string
	}{
		{name: "empty", wasm: nil, words: []string{"not a WebAssembly 1.0 binary"}},
		{name: "wrong version", wasm: []byte("\x00asm\x02\x00\x00\x00"), words: []string{"not a WebAssembly 1.0 binary"}},
		{name: "truncated", wasm: valid[:len(valid)-3], words: []string{"unexpected end"}},
		{name: "section size beyond the end", wasm: cat(header, []byte{wasmbin.SectionType, 0xff, 0xff, 0x03}), words: []string{"unexpected end"}},
		{name: "section size overflows", wasm: cat(header, []byte{wasmbin.SectionType, 0xff, 0xff, 0xff, 0xff, 0x7f}), words: []string{"overflows 32 bits"}},
		{name: "unknown section", wasm: cat(header, []byte{14, 0x00}), words: []string{"unknown section id 14"}},
		{name: "repeated section", wasm: cat(header, []byte{wasmbin.SectionType, 0x01, 0x00, wasmbin.SectionType, 0x01, 0x00}), words: []string{"out of order or repeated"}},
		{name: "sections out of order", wasm: cat(header, []byte{wasmbin.SectionExport, 0x01, 0x00, wasmbin.SectionGlobal, 0x01, 0x00}), words: []string{"out of order"}},
		{name: "bad custom section name", wasm: cat(header, []byte{wasmbin.SectionCustom, 0x02, 0x05, 'a'}), words: []string{"custom section", "name"}},
		{name: "export named like the flag", wasm: withExport(ExportName), words: []string{`already exports "eddy_interrupt"`}},
		{name: "export named like the start export", wasm: withExport(StartExportName), words: []string{`already exports "eddy_interrupt_start"`}},
		{name: "import section with trailing bytes", wasm: cat(header, []byte{wasmbin.SectionImport, 0x02, 0x00, 0x00}), words: []string{"import section", "1 bytes after the last entry"}},
		{name: "unknown import kind", wasm: cat(header, []byte{wasmbin.SectionImport, 0x05, 0x01, 0x00, 0x00, 0x07, 0x00}), words: []string{"unknown import kind 0x7"}},
		{name: "atomics are not decoded", wasm: module([]byte{0x41, 0x00, 0xfe, 0x10, 0x02, 0x00, 0x1a}), words: []string{"function 0", "instruction 0xfe 0x10", "unknown or unsupported opcode"}},
		{name: "tail calls are not decoded", wasm: module([]byte{0x12, 0x00}), words: []string{"instruction 0x12"}},
		{name: "unknown 0xfc sub-opcode", wasm: module([]byte{0xfc, 0x12}), words: []string{"0xfc sub-opcode 18"}},
		{name: "reserved SIMD opcode", wasm: module([]byte{0xfd, 0x9a, 0x01}), words: []string{"unknown SIMD opcode 0x9a"}},
		{name: "padded SIMD opcode wazero would read otherwise", wasm: module(append([]byte{0xfd, 0x8c, 0x00}, bytes.Repeat([]byte{0x03}, 16)...)),
			words: []string{"second byte of a SIMD opcode"}},
		{name: "memory index not a single zero byte", wasm: module([]byte{0x3f, 0x80, 0x00, 0x1a}), words: []string{"memory index must be the byte 0x0"}},
		{name: "unsupported block type", wasm: module([]byte{0x02, 0x60, 0x0b}), words: []string{"unsupported block type"}},
		{name: "body without its end", wasm: rawBody([]byte{0x00, 0x03, 0x40, 0x0b}), words: []string{"ends before the end of its expression"}},
		{name: "bytes after the end", wasm: rawBody([]byte{0x00, 0x0b, 0x01}), words: []string{"1 bytes after the end of the body's expression"}},
		{name: "truncated immediate", wasm: rawBody([]byte{0x00, 0x41}), words: []string{"instruction 0x41", "unexpected end"}},
		{name: "global.set of a global the module lacks", wasm: module([]byte{0x41, 0x00, 0x24, 0x00}),
			words: []string{"instruction 0x24", "global 0 does not exist (the module has 0)"}},
		{name: "global.get of a global the module lacks", wasm: module([]byte{0x23, 0x01, 0x1a}),
			words: []string{"instruction 0x23", "global 1 does not exist"}},
		{name: "local.get of a local the function lacks", wasm: module([]byte{0x20, 0x00, 0x1a}),
			words: []string{"instruction 0x20", "local 0 does not exist (the function has 0)"}},
		{name: "export of a global the module lacks", wasm: func() []byte {
			m := base
			m.funcs = []byte{0}
			m.exports = [][]byte{export("g", wasmbin.KindGlobal, 0)}
			m.bodies = [][]byte{body(noLocals)}
			return m.bytes()
		}(), words: []string{`export "g": global 0 does not exist`}},
		{name: "loops without a memory", wasm: testModule{types: [][]byte{funcType(nil, nil)}, funcs: []byte{0}, bodies: [][]byte{body(noLocals, []byte{0x03, 0x40, 0x0b})}}.bytes(),
			words: []string{"loops but no memory"}},
		{name: "more bodies than functions", wasm: cat(header, []byte{wasmbin.SectionCode, 0x01, 0x05}), words: []string{"5 function bodies for 0 functions"}},
		{name: "fewer bodies than claimed", wasm: func() []byte {
			m := base
			m.funcs = []byte{0, 0}
			m.dataCount, m.data = 0, nil
			return wasmbin.AppendSection(m.bytes(), wasmbin.SectionCode, []byte{0x02, 0x02, 0x00, 0x0b}) // 2 bodies, 1 there
		}(), words: []string{"function 1: body size: unexpected end"}},
		{name: "function of a type that does not exist", wasm: func() []byte {
			m := base
			m.funcs = []byte{9}
			m.bodies = [][]byte{body(noLocals)}
			return m.bytes()
		}(), words: []string{"function section", "function 0 has type 9; there are 4 types"}},
		{name: "a type that is not a function type", wasm: cat(header, []byte{wasmbin.SectionType, 0x03, 0x01, 0x5f, 0x00}),
			words: []string{"type 0: unsupported form 0x5f"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Instrument(tt.wasm)
			if err == nil {
				t.Fatalf("Instrument returned %d bytes, want an error", len(out))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "interrupt: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with \"interrupt: \"", msg)
			}
			for _, w := range tt.words {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// spinModule exports "spin", which loops forever, and "triangle",
// "squares" and "countdown", which loop (plainly, nested, and with block
// parameters) and return a result.
var spinModule = testModule{
	types:  [][]byte{funcType(nil, nil), funcType([]byte{i32}, []byte{i32})},
	funcs:  []byte{0, 1, 1, 1, 0},
	memory: []byte{0x00, 0x00},
	exports: [][]byte{export("spin", wasmbin.KindFunc, 0), export("triangle", wasmbin.KindFunc, 1), export("squares", wasmbin.KindFunc, 2),
		export("countdown", wasmbin.KindFunc, 3), export("spin_calls", wasmbin.KindFunc, 4)},
	bodies: [][]byte{
		// loop br 0 end
		body(noLocals, []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}),
		// triangle(n) = n + (n-1) + … + 1
		body([]byte{0x01, 0x01, i32}, []byte{
			0x02, 0x40, 0x03, 0x40,
			0x20, 0x00, 0x45, 0x0d, 0x01, // br_if 1 (n == 0)
			0x20, 0x01, 0x20, 0x00, 0x6a, 0x21, 0x01, // acc += n
			0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00, // n--
			0x0c, 0x00, 0x0b, 0x0b,
			0x20, 0x01,
		}),
		// squares(n) = n*n, counting in two nested loops
		body([]byte{0x01, 0x03, i32}, []byte{
			0x02, 0x40, 0x03, 0x40,
			0x20, 0x01, 0x20, 0x00, 0x4f, 0x0d, 0x01, // br_if 1 (i >= n)
			0x41, 0x00, 0x21, 0x02, // j = 0
			0x02, 0x40, 0x03, 0x40,
			0x20, 0x02, 0x20, 0x00, 0x4f, 0x0d, 0x01, // br_if 1 (j >= n)
			0x20, 0x03, 0x41, 0x01, 0x6a, 0x21, 0x03, // acc++
			0x20, 0x02, 0x41, 0x01, 0x6a, 0x21, 0x02, // j++
			0x0c, 0x00, 0x0b, 0x0b,
			0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // i++
			0x0c, 0x00, 0x0b, 0x0b,
			0x20, 0x03,
		}),
		// countdown(n): the number of iterations of a loop (param i32)
		// (result i32) that carries n-1 on the stack until it reaches 0
		body([]byte{0x01, 0x01, i32}, []byte{
			0x20, 0x00,
			0x03, 0x01, // loop (type 1)
			0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // iterations++
			0x41, 0x01, 0x6b, 0x22, 0x00, 0x20, 0x00, 0x0d, 0x00, // n-1; br_if 0 (n-1 != 0)
			0x0b,
			0x1a, 0x20, 0x01,
		}),
		// loop (triangle 10) drop br 0 end: spins in calls to a function
		// whose own loop runs too few iterations to tick by itself
		body(noLocals, []byte{0x03, 0x40, 0x41, 0x0a, 0x10, 0x01, 0x1a, 0x0c, 0x00, 0x0b}),
	},
}

func TestInstrumentedCodeComputesTheSame(t *testing.T) {
	ctx := context.Background()
	instrumented, err := Instrument(spinModule.bytes())
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t)
	var mods []api.Module
	for _, wasm := range [][]byte{spinModule.bytes(), instrumented} {
		mod, err := r.Instantiate(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, mod)
	}
	checkFlag(t, mods[1])
	for _, call := range []struct {
		fn   string
		arg  uint64
		want uint64
	}{
		{"triangle", 10, 55}, {"squares", 7, 49}, {"countdown", 5, 5},
		// Past 1024 iterations, through the exits to Go, with the
		// countdown loop's parameter on the stack.
		{"triangle", 3000, 4501500}, {"squares", 100, 10000}, {"countdown", 5000, 5000},
	} {
		for i, mod := range mods {
			got, err := mod.ExportedFunction(call.fn).Call(ctx, call.arg)
			if err != nil || got[0] != call.want {
				t.Errorf("module %d: %s(%d) = %v, %v; want %d", i, call.fn, call.arg, got, err, call.want)
			}
		}
	}
}

// TestSettingTheFlagStopsALoop is the point of the package: a guest
// spinning in a loop, in a runtime without WithCloseOnContextDone, traps
// soon after another goroutine sets the flag.
func TestSettingTheFlagStopsALoop(t *testing.T) {
	ctx := context.Background()
	wasm, err := Instrument(spinModule.bytes())
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t)
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	flag := checkFlag(t, mod)

	type result struct {
		err     error
		stopped time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(ctx)
		done <- result{err, time.Now()}
	}()
	// Let the guest spin a little first, so the flag is set while it
	// runs, not before it starts.
	set := make(chan time.Time, 1)
	timer := time.AfterFunc(20*time.Millisecond, func() {
		set <- time.Now()
		flag.Set(1)
	})
	defer timer.Stop()
	select {
	case res := <-done:
		if res.err == nil || !strings.Contains(res.err.Error(), "unreachable") {
			t.Fatalf("spin returned %v, want an unreachable trap", res.err)
		}
		select {
		case at := <-set:
			t.Logf("the guest stopped %s after the flag was set", res.stopped.Sub(at))
		default:
			t.Fatal("spin returned before the flag was set")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the guest is still spinning 10s after the flag was set")
	}
	if _, err := mod.ExportedFunction("triangle").Call(ctx, 3); err == nil {
		t.Error("a loop ran with the flag set")
	}
}

func TestInstrumentDoesNotAliasItsInput(t *testing.T) {
	wasm := spinModule.bytes()
	orig := bytes.Clone(wasm)
	out, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i] = 0
	}
	if !bytes.Equal(wasm, orig) {
		t.Fatal("Instrument modified its input, or returned memory that aliases it")
	}
}

// TestSpinningGuestLetsTheGCRun checks the tick: while an instrumented
// guest spins, the Go runtime can still stop the world, so garbage
// collections complete and the goroutine that sets the flag gets to run.
// Without it this test hangs (until go test's -timeout).
func TestSpinningGuestLetsTheGCRun(t *testing.T) {
	for _, fn := range []string{"spin", "spin_calls"} {
		t.Run(fn, func(t *testing.T) {
			ctx := context.Background()
			wasm, err := Instrument(spinModule.bytes())
			if err != nil {
				t.Fatal(err)
			}
			r := newRuntime(t)
			mod, err := r.Instantiate(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			flag := checkFlag(t, mod)
			done := make(chan error, 1)
			go func() {
				_, err := mod.ExportedFunction(fn).Call(ctx)
				done <- err
			}()
			for range 20 {
				runtime.GC()
				select {
				case err := <-done:
					t.Fatalf("%s returned before the flag was set: %v", fn, err)
				default:
				}
			}
			flag.Set(1)
			if err := <-done; err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("%s returned %v, want an unreachable trap", fn, err)
			}
		})
	}
}
