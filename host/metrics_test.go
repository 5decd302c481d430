package host

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eddy-stream/eddy/abi"
)

// gatherWasm gathers the engine's series: family → series by node and
// export ("" for the memory gauge).
func gatherWasm(t *testing.T, e *Engine) map[string]map[[2]string]*dto.Metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[[2]string]*dto.Metric{}
	for _, mf := range mfs {
		out[mf.GetName()] = map[[2]string]*dto.Metric{}
		for _, m := range mf.GetMetric() {
			var node, export string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "node":
					node = l.GetValue()
				case "export":
					export = l.GetValue()
				}
			}
			out[mf.GetName()][[2]string{node, export}] = m
		}
	}
	return out
}

// TestInstanceMetrics: calls, their durations, traps and deadline hits are
// counted per export, memory per live instance, and the counts outlive
// the instance.
func TestInstanceMetrics(t *testing.T) {
	e := newTestEngine(t, Config{CallTimeout: 300 * time.Millisecond})
	labels := func(node string) InstanceConfig {
		return InstanceConfig{Name: "job-1/" + node + "[0]", Metrics: MetricLabels{Tenant: "acme", Job: "job-1", Node: node}}
	}
	echo, err := loadFixture(t, e, "echo").NewInstance(context.Background(), labels("echo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := echo.Open(nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := echo.Process(manyRecords(4, 10), func([]abi.Record) {}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"trap", "loop"} {
		i, err := loadFixture(t, e, name).NewInstance(context.Background(), labels(name))
		if err != nil {
			t.Fatal(err)
		}
		defer i.Close()
		if err := i.Open(nil); err != nil {
			t.Fatal(err)
		}
		if err := i.Process(manyRecords(1, 10), func([]abi.Record) {}); err == nil {
			t.Fatalf("%s: Process succeeded", name)
		}
	}

	got := gatherWasm(t, e)
	process := func(node string) [2]string { return [2]string{node, abi.ExportProcess} }
	for _, tc := range []struct {
		name   string
		family string
		series [2]string
		want   float64
	}{
		{"echo calls", "eddy_wasm_calls_total", process("echo"), 3},
		{"echo traps", "eddy_wasm_traps_total", process("echo"), 0},
		{"trap traps", "eddy_wasm_traps_total", process("trap"), 1},
		{"trap deadlines", "eddy_wasm_deadline_exceeded_total", process("trap"), 0},
		{"loop traps", "eddy_wasm_traps_total", process("loop"), 1},
		{"loop deadlines", "eddy_wasm_deadline_exceeded_total", process("loop"), 1},
	} {
		m, ok := got[tc.family][tc.series]
		if !ok {
			t.Errorf("%s: no series %v of %s", tc.name, tc.series, tc.family)
			continue
		}
		if v := m.GetCounter().GetValue(); v != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, v, tc.want)
		}
	}
	h := got["eddy_wasm_call_duration_seconds"][process("echo")].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() <= 0 {
		t.Errorf("echo duration histogram: count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	if loop := got["eddy_wasm_call_duration_seconds"][process("loop")].GetHistogram(); loop.GetSampleSum() < 0.3 {
		t.Errorf("loop's call took %vs in the histogram, want ≥ its 300ms deadline", loop.GetSampleSum())
	}
	if m := got["eddy_wasm_instance_memory_bytes"][[2]string{"echo", ""}]; m.GetGauge().GetValue() < 65536 {
		t.Errorf("echo memory %v, want ≥ one page", m.GetGauge().GetValue())
	}
	for _, l := range got["eddy_wasm_calls_total"][process("echo")].GetLabel() {
		if l.GetName() == "tenant" && l.GetValue() != "acme" || l.GetName() == "module" && l.GetValue() != "testdata/echo.wasm" {
			t.Errorf("label %s=%s", l.GetName(), l.GetValue())
		}
	}

	// Released: the counts stay, the memory gauge goes.
	if err := echo.Close(); err != nil {
		t.Fatal(err)
	}
	got = gatherWasm(t, e)
	if v := got["eddy_wasm_calls_total"][process("echo")].GetCounter().GetValue(); v != 3 {
		t.Errorf("echo calls after Close: %v, want 3", v)
	}
	if _, ok := got["eddy_wasm_instance_memory_bytes"][[2]string{"echo", ""}]; ok {
		t.Error("a closed instance still has a memory series")
	}
}

// BenchmarkCallMetrics is what counting costs a guest call: two clock
// reads and the counters.
func BenchmarkCallMetrics(b *testing.B) {
	e := newTestEngine(b, Config{})
	i, err := loadFixture(b, e, "echo").NewInstance(context.Background(), InstanceConfig{Name: "bench/echo[0]"})
	if err != nil {
		b.Fatal(err)
	}
	defer i.Close()
	if err := i.Open(nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		i.count(abi.ExportProcess, time.Since(start), false, false)
	}
}
