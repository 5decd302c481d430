package dataflow

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// BenchmarkSwapInstall measures what a task of the swapped node does at
// the barrier beyond its snapshot: take the prepared instance from its
// slot, bind it to the store and switch (installSwap's work), and close
// the old instance (after the broadcast). Preparing each new instance is
// outside the timing: PrepareSwap does it before the barrier.
//
//	go test -run '^$' -bench SwapInstall ./dataflow/
func BenchmarkSwapInstall(b *testing.B) {
	ctx := context.Background()
	e, err := host.NewEngine(ctx, host.Config{CacheDir: filepath.Join(os.TempDir(), "eddy-test-wasm-cache")})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	v1, err := e.Load(ctx, "../udfs/build/counter-c.wasm")
	if err != nil {
		b.Fatal(err)
	}
	v2, err := e.Load(ctx, "../udfs/build/counter-plus-c.wasm")
	if err != nil {
		b.Fatal(err)
	}
	backend, err := state.NewMemory(state.MemoryConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Close()
	st, err := backend.OpenTask(state.Scope{Tenant: "t", Job: "j", Operator: "counts"}, 128, state.Range{Start: 0, End: 128})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	slot := newSwapSlot("counts", "counts[0]")
	op := &keyedWasmOperator{wasmOperator: &wasmOperator{module: v1, config: []byte("{}"), swap: slot}, store: st}
	op.inst, err = v1.NewInstance(ctx, host.InstanceConfig{Name: "j/counts[0]", State: st})
	if err != nil {
		b.Fatal(err)
	}
	if err := op.inst.Open(nil); err != nil {
		b.Fatal(err)
	}
	cfg := host.InstanceConfig{Name: "j/counts[0]", Keyed: true}
	slot.opened(ctx, cfg, op.inst.Declared())
	rec := []abi.Record{{Key: []byte("k"), Value: []byte("{}")}}
	var install, closing time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		p, err := slot.prepare(ctx, Swap{ID: int64(i + 1), Node: "counts", Module: []*host.Module{v2, v1}[i%2], Config: []byte("{}")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := slot.put(int64(i+1), p); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		began := time.Now()
		old, err := op.install(slot.take(int64(i+1)), 0)
		if err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		_ = old.Close()
		end := time.Now()
		install += mid.Sub(began)
		closing += end.Sub(mid)
		b.StopTimer()
		if err := op.inst.Process(rec, nil); err != nil { // the new one counts on
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(install.Nanoseconds())/float64(b.N), "ns-install/op")
	b.ReportMetric(float64(closing.Nanoseconds())/float64(b.N), "ns-close-old/op")
}
