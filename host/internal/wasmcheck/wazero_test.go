package wasmcheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

// allFeatures are all the features wazero decodes: the host enables
// fewer, but may enable more one day, and Check must not refuse what
// they allow.
const allFeatures = api.CoreFeaturesV2 | experimental.CoreFeaturesThreads | experimental.CoreFeaturesTailCall |
	experimental.CoreFeaturesExtendedConst | experimental.CoreFeaturesExceptionHandling |
	experimental.CoreFeaturesTypedFunctionReferences

// newWazero returns a runtime configured as the host's checker, with
// every feature.
func newWazero(t testing.TB) (compiles func([]byte) error) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(allFeatures))
	t.Cleanup(func() { _ = r.Close(ctx) })
	return func(wasm []byte) error {
		m, err := r.CompileModule(ctx, wasm)
		if err == nil {
			_ = m.Close(ctx)
		}
		return err
	}
}

// TestCheckAcceptsWhatWazeroAccepts: Check reads the parts it reads as
// wazero does, so it accepts every construct wazero accepts there, and
// every module of wazero's own spec test corpus that wazero compiles.
func TestCheckAcceptsWhatWazeroAccepts(t *testing.T) {
	compiles := newWazero(t)
	code := func(bodies ...[]byte) []byte { return section(wasmbin.SectionCode, vec(bodies...)) }
	voidFunc := [][]byte{section(wasmbin.SectionType, vec(typeVoid)), section(wasmbin.SectionFunction, vec([]byte{0}))}
	withVoidFunc := func(sections ...[]byte) []byte { return module(append(voidFunc[:2:2], sections...)...) }
	refFunc0 := []byte{opRefFunc, 0, opEnd}
	refNullFunc := []byte{opRefNull, funcref, opEnd}

	tests := []struct {
		name string
		wasm []byte
	}{
		{name: "element segments in each encoding", wasm: withVoidFunc(
			section(wasmbin.SectionTable, vec([]byte{funcref, 0, 8})),
			section(wasmbin.SectionElement, vec(
				cat([]byte{0}, i32Zero, vec([]byte{0})),
				cat([]byte{1, 0}, vec([]byte{0})),
				cat([]byte{2, 0}, []byte{opI32Const, 1, opEnd}, []byte{0}, vec([]byte{0})),
				cat([]byte{3, 0}, vec([]byte{0})),
				cat([]byte{4}, []byte{opI32Const, 2, opEnd}, vec(refFunc0, refNullFunc)),
				cat([]byte{5, funcref}, vec(refNullFunc)),
				cat([]byte{6, 0}, []byte{opI32Const, 4, opEnd}, []byte{funcref}, vec(refFunc0)),
				cat([]byte{7, 0x63, funcref}, vec(refFunc0)),
			)),
			code(body(locals())))},
		{name: "data segments in each encoding", wasm: module(
			section(wasmbin.SectionMemory, vec([]byte{0, 1})),
			section(wasmbin.SectionDataCount, leb(3)),
			section(wasmbin.SectionData, vec(
				cat([]byte{0}, i32Zero, name("ab")),
				cat([]byte{1}, name("cd")),
				cat([]byte{2, 0}, []byte{opI32Const, 4, opEnd}, name("")),
			)))},
		{name: "globals of each constant", wasm: module(
			section(wasmbin.SectionType, vec(typeVoid)),
			section(wasmbin.SectionImport, vec(cat(name("env"), name("g"), []byte{wasmbin.KindGlobal, i32, 0}))),
			section(wasmbin.SectionFunction, vec([]byte{0})),
			section(wasmbin.SectionGlobal, vec(
				cat([]byte{i32, 0, opI32Const, 0xff, 0xff, 0xff, 0xff, 0x07, opEnd}),
				cat([]byte{0x7e, 1, opI64Const, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f, opEnd}),
				cat([]byte{0x7d, 0, opF32Const, 0, 0, 0x80, 0x3f, opEnd}),
				cat([]byte{0x7c, 0, opF64Const, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, opEnd}),
				cat([]byte{0x7b, 0, opVecPrefix, opV128Const}, make([]byte, 16), []byte{opEnd}),
				cat([]byte{funcref, 0}, refNullFunc),
				cat([]byte{funcref, 0}, refFunc0),
				cat([]byte{0x6f, 0, opRefNull, 0x6f, opEnd}),
				cat([]byte{i32, 0, opGlobalGet, 0, opEnd}),
				cat([]byte{i32, 0, opI32Const, 1, opI32Const, 2, opI32Add, opGlobalGet, 0, opI32Mul, opEnd}),
			)),
			code(body(locals())))},
		{name: "imports of each kind", wasm: module(
			section(wasmbin.SectionType, vec(typeVoid)),
			section(wasmbin.SectionImport, vec(
				cat(name("env"), name("f"), []byte{wasmbin.KindFunc, 0}),
				cat(name("env"), name("t"), []byte{wasmbin.KindTable, funcref, 1, 1, 2}),
				cat(name("env"), name("m"), []byte{wasmbin.KindMemory, 1, 1, 2}),
				cat(name("env"), name("g"), []byte{wasmbin.KindGlobal, i32, 1}),
				cat(name("env"), name("e"), []byte{wasmbin.KindTag, 0, 0}),
			)))},
		{name: "a table with an initializer", wasm: withVoidFunc(
			section(wasmbin.SectionTable, vec(cat([]byte{0x40, 0, funcref, 0, 2}, refNullFunc))),
			code(body(locals())))},
		{name: "tables of each type", wasm: module(section(wasmbin.SectionTable, vec(
			[]byte{funcref, 0, 1}, []byte{0x6f, 1, 0, 4}, []byte{0x63, funcref, 0, 0})))},
		{name: "a shared memory", wasm: module(section(wasmbin.SectionMemory, vec([]byte{3, 1, 2})))},
		{name: "typed function references", wasm: module(
			section(wasmbin.SectionType, vec(typeVoid, []byte{0x60, 2, 0x63, 0, 0x64, 0, 0})),
			section(wasmbin.SectionFunction, vec([]byte{1})),
			section(wasmbin.SectionCode, vec(body(cat(leb(2), []byte{1, 0x63, funcref}, []byte{2, 0x63, 0})))))},
		{name: "a recursion group", wasm: module(section(wasmbin.SectionType, vec(cat([]byte{0x4e}, vec(typeVoid, typeVoid)))))},
		{name: "a tag", wasm: module(section(wasmbin.SectionType, vec(typeVoid)), section(wasmbin.SectionTag, vec([]byte{0, 0})))},
		{name: "a name section", wasm: module(
			section(wasmbin.SectionType, vec(typeVoid)),
			section(wasmbin.SectionFunction, vec([]byte{0})),
			code(body(locals(2))),
			nameSection(
				cat([]byte{namesModule}, name("m")),
				cat([]byte{namesFunction}, vec(cat(leb(0), name("f")))),
				cat([]byte{namesLocal}, vec(cat(leb(0), vec(cat(leb(0), name("a")), cat(leb(1), name("b")))))),
				cat([]byte{4}, vec(cat(leb(0), name("t")))), // type names, skipped
			))},
		{name: "a function with the most locals", wasm: withVoidFunc(code(body(locals(49_999, 1))))},
		{name: "custom sections", wasm: module(
			section(wasmbin.SectionCustom, name(".debug_info"), []byte{1, 2, 3}),
			section(wasmbin.SectionCustom, name("")),
			section(wasmbin.SectionCustom, name("producers"), vec()))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := compiles(tt.wasm); err != nil {
				t.Fatalf("wazero refuses the case (fix the case): %v", err)
			}
			if err := Check(tt.wasm, DefaultLimits()); err != nil {
				t.Fatalf("wazero compiles %x; Check: %v", tt.wasm, err)
			}
		})
	}

	t.Run("spec tests", func(t *testing.T) {
		if testing.Short() {
			t.Skip("compiles some 8,000 modules")
		}
		paths := specTestModules(t)
		accepted := 0
		for _, p := range paths {
			wasm, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			// These compile without harm: wazero's authors run them all.
			if compiles(wasm) != nil {
				continue
			}
			accepted++
			if err := Check(wasm, DefaultLimits()); err != nil {
				t.Errorf("wazero compiles %s; Check: %v", p, err)
			}
		}
		t.Logf("%d of %d modules compile, and pass Check", accepted, len(paths))
	})
}

// specTestModules returns the modules of the spec test corpus that comes
// with the wazero module, or skips the test if the module's source is
// not at hand (a vendored build).
func specTestModules(t *testing.T) []string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("cannot locate the wazero module: %v", err)
	}
	var paths []string
	root := filepath.Join(dir, "internal", "integration_test", "spectest")
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".wasm") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil || len(paths) == 0 {
		t.Skipf("no spec test modules under %s: %v", root, err)
	}
	return paths
}
