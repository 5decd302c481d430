package interrupt

import (
	"bytes"
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

// testModule is a hand-assembled Wasm binary. Its sections are written in
// the order, and with the shortest size encodings, that Instrument writes
// its own, so an expected output can be built with it too.
type testModule struct {
	types     [][]byte // function types, see funcType
	imports   [][]byte
	funcs     []byte // type index of each defined function (< 128)
	tables    [][]byte
	memory    []byte // memory type; nil = none
	globals   [][]byte
	exports   [][]byte
	start     int // 1 + index of the start function; 0 = none
	elems     [][]byte
	dataCount int // 1 + the count; 0 = no data count section
	bodies    [][]byte
	data      [][]byte
	customs   [][]byte // appended as custom sections: name and content
}

const (
	i32     = 0x7f
	i64     = 0x7e
	f32     = 0x7d
	f64     = 0x7c
	v128    = 0x7b
	funcref = 0x70
)

func vec(items ...[]byte) []byte {
	out := wasmbin.AppendU32(nil, uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func funcType(params, results []byte) []byte {
	out := append([]byte{0x60}, wasmbin.AppendU32(nil, uint32(len(params)))...)
	out = append(out, params...)
	out = wasmbin.AppendU32(out, uint32(len(results)))
	return append(out, results...)
}

func export(name string, kind byte, idx uint32) []byte {
	return wasmbin.AppendU32(append(wasmbin.AppendName(nil, name), kind), idx)
}

// body is a function body: locals (already encoded as a vector) and
// instructions, to which it adds the final end.
func body(locals []byte, instrs ...[]byte) []byte {
	out := append([]byte(nil), locals...)
	for _, in := range instrs {
		out = append(out, in...)
	}
	return append(out, opEnd)
}

var noLocals = []byte{0x00}

// header starts every binary, for cat.
var header = []byte(wasmbin.Header)

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func (m testModule) bytes() []byte {
	out := append([]byte(nil), header...)
	add := func(id byte, content []byte) {
		out = wasmbin.AppendSection(out, id, content)
	}
	if m.types != nil {
		add(wasmbin.SectionType, vec(m.types...))
	}
	if m.imports != nil {
		add(wasmbin.SectionImport, vec(m.imports...))
	}
	if m.funcs != nil {
		add(wasmbin.SectionFunction, append(wasmbin.AppendU32(nil, uint32(len(m.funcs))), m.funcs...))
	}
	if m.tables != nil {
		add(wasmbin.SectionTable, vec(m.tables...))
	}
	if m.memory != nil {
		add(wasmbin.SectionMemory, vec(m.memory))
	}
	if m.globals != nil {
		add(wasmbin.SectionGlobal, vec(m.globals...))
	}
	if m.exports != nil {
		add(wasmbin.SectionExport, vec(m.exports...))
	}
	if m.start > 0 {
		add(wasmbin.SectionStart, wasmbin.AppendU32(nil, uint32(m.start-1)))
	}
	if m.elems != nil {
		add(wasmbin.SectionElement, vec(m.elems...))
	}
	if m.dataCount > 0 {
		add(wasmbin.SectionDataCount, wasmbin.AppendU32(nil, uint32(m.dataCount-1)))
	}
	if m.bodies != nil {
		var sized [][]byte
		for _, b := range m.bodies {
			sized = append(sized, append(wasmbin.AppendU32(nil, uint32(len(b))), b...))
		}
		add(wasmbin.SectionCode, vec(sized...))
	}
	if m.data != nil {
		add(wasmbin.SectionData, vec(m.data...))
	}
	for _, c := range m.customs {
		add(wasmbin.SectionCustom, c)
	}
	return out
}

// instrumented is m as Instrument should return it: the flag and tick
// globals and the flag's export added, the start function exported
// instead of started, and the bodies replaced by the expected ones.
func (m testModule) instrumented(flag uint32, bodies ...[]byte) testModule {
	out := m
	zero := []byte{i32, 0x01, 0x41, 0x00, opEnd}
	out.globals = append(append([][]byte{}, m.globals...), zero, zero)
	out.exports = append(append([][]byte{}, m.exports...), export(ExportName, wasmbin.KindGlobal, flag))
	if m.start > 0 {
		out.exports = append(out.exports, export(StartExportName, wasmbin.KindFunc, uint32(m.start-1)))
		out.start = 0
	}
	out.bodies = bodies
	return out
}

// entrySeq is what Instrument inserts at the start of a function with
// loops: $tick++, and the iteration counter (local counter) starts there.
func entrySeq(tick, counter uint32) []byte {
	t := wasmbin.AppendU32(nil, tick)
	return cat([]byte{0x23}, t, []byte{0x41, 0x01, 0x6a, 0x22}, wasmbin.AppendU32(nil, counter), []byte{0x24}, t)
}

// loopSeq is the sequence Instrument inserts at the start of every loop
// body when the flag global has index flag and the iteration counter is
// local counter.
func loopSeq(flag, counter uint32) []byte {
	c := wasmbin.AppendU32(nil, counter)
	return cat(
		[]byte{0x23}, wasmbin.AppendU32(nil, flag), []byte{0x04, 0x40, 0x00, 0x0b}, // global.get $flag; if; unreachable; end
		[]byte{0x20}, c, []byte{0x41, 0x01, 0x6a, 0x22}, c, // $counter = $counter + 1
		[]byte{0x41, 0xff, 0x07, 0x71, 0x45},                   // $counter & 0x3ff == 0
		[]byte{0x04, 0x40, 0x41, 0x00, 0x40, 0x00, 0x1a, 0x0b}, // if; memory.grow 0; drop; end
	)
}

// loopMark stands for loopSeq in the expected instructions of a test
// case; no instruction starts with 0xff.
var loopMark = []byte{0xff, 0xff, 0xff, 0xff}

// instrumentedBody is the body Instrument should make of a function with
// the given locals vector (a one-byte count and its groups) and
// instructions, where loopMark stands for loopSeq. counter is the index of
// the local it adds: the number of parameters and locals.
func instrumentedBody(locals []byte, flag, counter uint32, instrs ...[]byte) []byte {
	var code []byte
	loops := false
	for _, in := range instrs {
		if bytes.Equal(in, loopMark) {
			in, loops = loopSeq(flag, counter), true
		}
		code = append(code, in...)
	}
	if !loops {
		return body(locals, code)
	}
	locals = cat([]byte{locals[0] + 1}, locals[1:], []byte{0x01, i32})
	return body(locals, entrySeq(flag+1, counter), code)
}

// newRuntime starts a wazero runtime with its default configuration (the
// compiler where supported, api.CoreFeaturesV2) and, on purpose, no
// WithCloseOnContextDone.
func newRuntime(t testing.TB) wazero.Runtime {
	t.Helper()
	r := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfig())
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// instantiate instantiates compiled in r, providing every function it
// imports as a host function that does nothing, and without calling any
// start function (Instrument moved the module's own to an export).
func instantiate(t testing.TB, r wazero.Runtime, compiled wazero.CompiledModule) api.Module {
	t.Helper()
	ctx := context.Background()
	byModule := map[string]map[string]api.FunctionDefinition{}
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		if byModule[mod] == nil {
			byModule[mod] = map[string]api.FunctionDefinition{}
		}
		byModule[mod][name] = def
	}
	for mod, defs := range byModule {
		b := r.NewHostModuleBuilder(mod)
		for name, def := range defs {
			b.NewFunctionBuilder().
				WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), def.ParamTypes(), def.ResultTypes()).
				Export(name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			t.Fatalf("stub import module %q: %v", mod, err)
		}
	}
	mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	return mod
}

// checkFlag checks that mod exports ExportName as a mutable i32 global
// holding 0.
func checkFlag(t testing.TB, mod api.Module) api.MutableGlobal {
	t.Helper()
	g := mod.ExportedGlobal(ExportName)
	if g == nil {
		t.Fatalf("no exported global %q", ExportName)
	}
	flag, ok := g.(api.MutableGlobal)
	if !ok || g.Type() != api.ValueTypeI32 || g.Get() != 0 {
		t.Fatalf("export %q is %v (mutable %v), want a mutable i32 global holding 0", ExportName, g, ok)
	}
	return flag
}
