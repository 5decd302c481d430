package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hostileModule is an upload that declares counts or sizes its bytes
// cannot hold, or that would cost the process memory beyond the limits.
type hostileModule struct {
	name  string
	wasm  []byte
	words []string // all must appear in the one-line error
	// unchecked is what Compile cost before modules were checked
	// (host/internal/wasmcheck), as measured with wazero 1.12 on linux/amd64.
	unchecked string
}

const max32 = 0xffffffff

// hostileModules are modules of 15 to 30 bytes, and operators valid but
// for one declaration, each of which made Compile allocate gigabytes or
// made the process run out of memory before Compile checked counts.
func hostileModules() []hostileModule {
	op := func(funcs ...wasmFunc) []byte { // a valid operator, with funcs besides the ABI's
		return wasmModule{funcs: append(abiFuncs(), funcs...), exportMemory: true}.bytes()
	}
	tables := func(n int, table []byte) []byte {
		content := uleb(uint32(n))
		for range n {
			content = append(content, table...)
		}
		return rawSection(4, content)
	}
	tooManyLocals := make([]wasmFunc, 11) // 11 * 50,000: more than the 524,288 a module may declare
	for i := range tooManyLocals {
		tooManyLocals[i].locals = 50_000
	}
	return []hostileModule{
		{name: "functions", wasm: rawModule(rawSection(3, uleb(max32))),
			words:     []string{"module x.wasm: function section declares 4294967295 functions in 5 bytes"},
			unchecked: "16 GiB allocated"},
		{name: "types", wasm: rawModule(rawSection(1, []byte{1, 0x60}, uleb(max32))),
			words:     []string{"type section: type 0 declares 4294967295 parameters with only 0 bytes left"},
			unchecked: "fatal error: runtime: out of memory (32 GiB)"},
		{name: "imports", wasm: rawModule(rawSection(2, uleb(max32))),
			words:     []string{"import section declares 4294967295 imports in 5 bytes"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "import name", wasm: rawModule(rawSection(2, []byte{1}, uleb(max32))),
			words:     []string{"import section: import 0 declares a module name of 4294967295 bytes"},
			unchecked: "4 GiB allocated"},
		{name: "tables", wasm: rawModule(rawSection(4, uleb(max32))),
			words:     []string{"table section declares 4294967295 tables in 5 bytes"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "globals", wasm: rawModule(rawSection(6, uleb(max32))),
			words:     []string{"global section declares 4294967295 globals in 5 bytes"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "exports", wasm: rawModule(rawSection(7, uleb(max32))),
			words:     []string{"export section declares 4294967295 exports in 5 bytes"},
			unchecked: "24 GB resident in 30 s, then killed by the kernel's OOM killer"},
		{name: "export name", wasm: rawModule(rawSection(7, []byte{1}, uleb(max32))),
			words:     []string{"export section: export 0 declares a name of 4294967295 bytes"},
			unchecked: "4 GiB allocated"},
		{name: "element segments", wasm: rawModule(rawSection(9, uleb(max32))),
			words:     []string{"element section declares 4294967295 element segments in 5 bytes"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "element function indices", wasm: rawModule(rawSection(9, []byte{1, 0, 0x41, 0, 0x0b}, uleb(max32))),
			words:     []string{"element section: segment 0 declares 4294967295 function indices"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "element expressions", wasm: rawModule(rawSection(9, []byte{1, 5, 0x70}, uleb(max32))),
			words:     []string{"element section: segment 0 declares 4294967295 expressions"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "function bodies", wasm: rawModule(rawSection(10, uleb(max32))),
			words:     []string{"code section declares 4294967295 function bodies in 5 bytes"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "function body size", wasm: rawModule(rawSection(10, []byte{1}, uleb(max32), []byte{0})),
			words:     []string{"code section: function 0 declares a body of 4294967295 bytes with only 1 byte left"},
			unchecked: "4 GiB allocated and written, 6 s"},
		{name: "locals", wasm: rawModule(rawSection(10, []byte{1, 7, 1}, uleb(max32), []byte{0x7f, 0x0b})),
			words:     []string{"code section: function 0 declares 4294967295 locals, over the limit of 50000"},
			unchecked: "fatal error: runtime: out of memory (32 GiB)"},
		{name: "data segments", wasm: rawModule(rawSection(11, uleb(max32))),
			words:     []string{"data section declares 4294967295 data segments in 5 bytes"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "data segment size", wasm: rawModule(rawSection(11, []byte{1, 1}, uleb(max32))),
			words:     []string{"data section: segment 0 declares contents of 4294967295 bytes"},
			unchecked: "4 GiB allocated"},
		{name: "custom section size", wasm: rawModule([]byte{0}, uleb(max32), []byte{1, 'x'}),
			words:     []string{"does not compile: custom section at offset 0x8 declares 4294967295 bytes with only 2 bytes left in the module"},
			unchecked: "4 GiB allocated"},
		{name: "module name", wasm: rawModule(rawSection(0, []byte{4}, []byte("name"), []byte{0, 5}, uleb(max32))),
			words:     []string{"name section: subsection 0 declares a module name of 4294967295 bytes"},
			unchecked: "4 GiB allocated"},
		{name: "function names", wasm: rawModule(rawSection(0, []byte{4}, []byte("name"), []byte{1, 5}, uleb(max32))),
			words:     []string{"name section: the function name map declares 4294967295 entries"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "local names", wasm: rawModule(rawSection(0, []byte{4}, []byte("name"), []byte{2, 7, 1, 0}, uleb(max32))),
			words:     []string{"name section: the local name map of function 0 declares 4294967295 entries"},
			unchecked: "fatal error: runtime: out of memory"},
		{name: "table minimum", wasm: withSection(op(), tables(1, append([]byte{0x70, 0}, uleb(1<<27)...))),
			words:     []string{"table section: table 0 declares a minimum of 134217728 elements, over the limit of 1048576"},
			unchecked: "accepted; 1 GiB allocated for the probe instance, and again for every instance"},
		{name: "initialized tables", wasm: withSection(op(), tables(8, append(append([]byte{0x40, 0, 0x70, 0}, uleb(1<<27)...), 0xd2, 0, 0x0b))),
			words:     []string{"table section: table 0 declares a minimum of 134217728 elements"},
			unchecked: "accepted; 8 GiB allocated and written for the probe instance, 6 s"},
		{name: "locals of a function", wasm: op(wasmFunc{locals: 60_000}),
			words:     []string{"code section: function 5 declares 60000 locals, over the limit of 50000"},
			unchecked: "accepted; each local costs the compilers some 70 bytes"},
		{name: "locals of all functions", wasm: op(tooManyLocals...),
			words:     []string{"code section: the functions up to function 15 declare 550000 locals in all, over the limit of 524288"},
			unchecked: "accepted: 4,000,000 locals in a 1 KB module cost 290 MiB"},
		{name: "memory minimum", wasm: rawModule(rawSection(5, []byte{1, 0}, uleb(1025))),
			words:     []string{"memory section: memory 0 declares a minimum of 1025 pages of 64 KiB, over the limit of 1024"},
			unchecked: "refused by wazero, for the same reason"},
	}
}

// TestCompileRefusesHostileModules: each module is refused with one line
// that names the section and the count, and Compile allocates almost
// nothing doing so. (Should the check regress, the test process runs out
// of memory, as the engine did.)
func TestCompileRefusesHostileModules(t *testing.T) {
	e := newTestEngine(t, Config{}) // MemoryLimit 64 MiB: 1024 pages
	for _, h := range hostileModules() {
		t.Run(h.name, func(t *testing.T) {
			alloc, err := allocated(func() error {
				m, err := e.Compile(context.Background(), "x.wasm", h.wasm)
				if err == nil {
					_ = m.Close(context.Background())
				}
				return err
			})
			checkRefusal(t, err, "module x.wasm: ", h)
			// TotalAlloc counts every byte allocated, freed or not, so
			// it bounds the peak.
			if alloc > 64<<20 {
				t.Errorf("Compile allocated %d MiB (%s before the check), want < 64 MiB", alloc>>20, h.unchecked)
			}
		})
	}
	checkEchoWorks(t, e)
}

// TestLoadRefusesHostileModules: Load reads the file and compiles it
// through the same check.
func TestLoadRefusesHostileModules(t *testing.T) {
	e := newTestEngine(t, Config{})
	dir := t.TempDir()
	for _, h := range hostileModules() {
		t.Run(h.name, func(t *testing.T) {
			path := filepath.Join(dir, "x.wasm")
			if err := os.WriteFile(path, h.wasm, 0o644); err != nil {
				t.Fatal(err)
			}
			alloc, err := allocated(func() error {
				m, err := e.Load(context.Background(), path)
				if err == nil {
					_ = m.Close(context.Background())
				}
				return err
			})
			h.words = []string{strings.TrimPrefix(h.words[0], "module x.wasm: ")}
			checkRefusal(t, err, "module "+path+": ", h)
			if alloc > 64<<20 {
				t.Errorf("Load allocated %d MiB, want < 64 MiB", alloc>>20)
			}
		})
	}
}

func checkRefusal(t *testing.T, err error, prefix string, h hostileModule) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want an error containing %q", h.words)
	}
	if !errors.Is(err, ErrInvalidModule) {
		t.Errorf("error %q does not wrap ErrInvalidModule", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || strings.Contains(msg, "\n") || !containsAll(msg, h.words...) {
		t.Errorf("error = %q, want one line starting with %q and containing %q", msg, prefix, h.words)
	}
}

// allocated runs f and returns the bytes allocated meanwhile.
func allocated(f func() error) (uint64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}
