package wasmcheck

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// FuzzCheck feeds Check arbitrary bytes, as an upload would. Check must
// never panic, and must refuse with one line; and a module it accepts
// must compile in wazero (configured as the host's checker, with every
// feature) within memory proportional to its size, which is what Check
// is for. A module wazero allocates gigabytes for would take the fuzzer
// down, which reports it as well.
func FuzzCheck(f *testing.F) {
	for _, r := range refusals() {
		f.Add(r.wasm)
	}
	for _, p := range testkit.WasmModules(f) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 4096 { // larger ones are too slow to mutate usefully
			f.Add(b)
		}
	}
	// The most locals a module may declare, all in 30 bytes of code.
	var funcs, bodies [][]byte
	for _, n := range []uint32{50_000, 50_000, 50_000, 50_000, 50_000, 50_000, 50_000, 50_000, 50_000, 50_000, 24_288} {
		funcs = append(funcs, []byte{0})
		bodies = append(bodies, body(locals(n)))
	}
	f.Add(module(section(wasmbin.SectionType, vec(typeVoid)), section(wasmbin.SectionFunction, vec(funcs...)), section(wasmbin.SectionCode, vec(bodies...))))

	compiles := newWazero(f)
	lim := DefaultLimits()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if err := Check(wasm, lim); err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Check error %q: want one line", err)
			}
			return
		}
		// What the host runs is the module with its tables capped: that
		// must not panic, and must pass Check as the original did.
		capped, _, err := CapTables(wasm, lim.TableElements)
		if err == nil {
			if err := Check(capped, lim); err != nil {
				t.Fatalf("Check accepts the module but not CapTables' result: %v", err)
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_ = compiles(wasm)
		runtime.ReadMemStats(&after)
		// 2,000 bytes per byte is more than any module needs (a Go
		// module: 40); 64 MiB covers the locals a small module may
		// declare.
		if alloc, budget := after.TotalAlloc-before.TotalAlloc, uint64(64<<20+2000*len(wasm)); alloc > budget {
			t.Fatalf("wazero allocated %d bytes compiling a %d-byte module that Check accepts (budget %d)", alloc, len(wasm), budget)
		}
	})
}
