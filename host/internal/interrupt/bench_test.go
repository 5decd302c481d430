package interrupt

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

// benchModule has loop kernels for BenchmarkLoops, all func(n i32) -> i32:
// "scan" counts the '"' bytes among the first n of memory, as a JSON
// scanner's inner loop would; "calls" calls "triangle" (8 iterations) n
// times, the shape of a loop over a small looping helper.
var benchModule = testModule{
	types:   [][]byte{funcType([]byte{i32}, []byte{i32})},
	funcs:   []byte{0, 0, 0},
	memory:  []byte{0x00, 0x01},
	exports: [][]byte{export("scan", wasmbin.KindFunc, 0), export("triangle", wasmbin.KindFunc, 1), export("calls", wasmbin.KindFunc, 2)},
	bodies: [][]byte{
		body([]byte{0x01, 0x02, i32}, []byte{
			0x02, 0x40, 0x03, 0x40,
			0x20, 0x01, 0x20, 0x00, 0x4f, 0x0d, 0x01, // br_if 1 (i >= n)
			0x20, 0x02, 0x20, 0x01, 0x2d, 0x00, 0x00, 0x41, 0x22, 0x46, 0x6a, 0x21, 0x02, // count += mem[i] == '"'
			0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // i++
			0x0c, 0x00, 0x0b, 0x0b,
			0x20, 0x02,
		}),
		spinModule.bodies[1], // triangle
		body([]byte{0x01, 0x02, i32}, []byte{
			0x02, 0x40, 0x03, 0x40,
			0x20, 0x01, 0x20, 0x00, 0x4f, 0x0d, 0x01, // br_if 1 (i >= n)
			0x20, 0x02, 0x41, 0x08, 0x10, 0x01, 0x6a, 0x21, 0x02, // acc += triangle(8)
			0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // i++
			0x0c, 0x00, 0x0b, 0x0b,
			0x20, 0x02,
		}),
	},
}

// BenchmarkLoops measures what the loop check costs per iteration: the
// same kernels as they came ("plain"), instrumented, and as they came but
// stopped by wazero's own WithCloseOnContextDone, which the instrumenting
// replaces.
func BenchmarkLoops(b *testing.B) {
	ctx := context.Background()
	instrumented, err := Instrument(benchModule.bytes())
	if err != nil {
		b.Fatal(err)
	}
	// WithCloseOnContextDone checks only calls whose context can be done.
	deadlineCtx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	for _, kernel := range []struct {
		fn         string
		n          uint64
		iterations float64 // loop iterations per call
	}{{"scan", 1 << 16, 1 << 16}, {"calls", 1 << 12, 1 << 12 * 9}} {
		for _, variant := range []struct {
			name               string
			wasm               []byte
			closeOnContextDone bool
		}{
			{"plain", benchModule.bytes(), false},
			{"instrumented", instrumented, false},
			{"closeOnContextDone", benchModule.bytes(), true},
		} {
			b.Run(kernel.fn+"/"+variant.name, func(b *testing.B) {
				ctx, r := ctx, wazero.Runtime(nil)
				if variant.closeOnContextDone {
					ctx = deadlineCtx
					r = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
					b.Cleanup(func() { _ = r.Close(ctx) })
				} else {
					r = newRuntime(b)
				}
				mod, err := r.Instantiate(ctx, variant.wasm)
				if err != nil {
					b.Fatal(err)
				}
				fn := mod.ExportedFunction(kernel.fn)
				stack := make([]uint64, 1)
				for b.Loop() {
					stack[0] = kernel.n
					if err := fn.CallWithStack(ctx, stack); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/kernel.iterations, "ns/iteration")
			})
		}
	}
}

// BenchmarkInstrument measures the decoding and rewriting of a Go-built
// module of nearly 3 MB, what an upload of a Go operator costs the host.
func BenchmarkInstrument(b *testing.B) {
	wasm, err := os.ReadFile("../../../udfs/build/card-stats-go.wasm")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := Instrument(wasm); err != nil {
			b.Fatal(err)
		}
	}
}
