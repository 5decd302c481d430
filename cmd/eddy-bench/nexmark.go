package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/examples/nexmark"
	"github.com/eddy-stream/eddy/state"
)

// flinkPerCore is Flink 2.0's Nexmark throughput per core (nexmark/nexmark
// GUIDE_V2.md: 8 TaskManagers × 1 slot, RocksDB), events/s.
var flinkPerCore = map[string]float64{
	"q0": 379e3, "q1": 395e3, "q2": 414e3, "q3": 219e3, "q4": 28e3, "q5": 75e3,
	"q7": 23e3, "q8": 162e3, "q11": 46e3, "q12": 194e3,
}

// benchNexmark runs each query of examples/nexmark on events events at
// parallelism p, on Pebble state, into a discarding sink, once with the
// Wasm module and once with the same logic as native Go operators, and
// prints events per second of CPU time (user + system of this process,
// which runs the whole job: Nexmark's measure, not wall time) next to
// Flink's per-core figure.
func benchNexmark(root string, events int64, p int, only string) error {
	ctx := context.Background()
	engine, done, err := newBenchEngine(ctx)
	if err != nil {
		return err
	}
	defer done()
	dir := filepath.Join(root, "examples", "nexmark")
	fmt.Printf("nexmark: %d events per query, parallelism %d, Pebble state, discarding sink; events/s per core = events / CPU seconds of the process\n", events, p)
	fmt.Printf("%-5s %14s %14s %8s %12s %10s %10s %12s %10s %10s\n", "query", "wasm ev/s/core", "native", "wasm/nat", "Flink 2.0", "wasm/Flink", "wall s", "results", "wasm B/ev", "native B/ev")
	for _, q := range nexmark.Queries {
		if only != "" && !slices.Contains(strings.Split(only, ","), q) {
			continue
		}
		var figures, allocs [2]float64
		var wall time.Duration
		var results int64
		for variant := range 2 {
			spec, err := nexmark.Load(dir, q, events, p, "")
			if err != nil {
				return err
			}
			opts := dataflow.Options{Connectors: connectors.Registry{}, Engine: engine, WindowOperator: window.New}
			if variant == 1 {
				if opts.NativeOperators, err = nexmark.Native(spec); err != nil {
					return err
				}
			}
			stateDir, err := os.MkdirTemp("", "eddy-bench-nexmark")
			if err != nil {
				return err
			}
			backend, err := state.OpenPebble(state.DefaultPebbleConfig(stateDir))
			if err != nil {
				return err
			}
			opts.StateBackends = func(string) (state.Backend, error) { return backend, nil }
			job, err := dataflow.NewJob(ctx, spec, opts)
			if err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
			alloc0 := allocated()
			cpu0, t0 := cpuTime(), time.Now()
			var stats *dataflow.Summary
			// Labelled, so that -cpuprofile splits by query and variant
			// (pprof -tagfocus=variant=native -tagfocus=query=q0); the
			// job's goroutines inherit the labels.
			pprof.Do(ctx, pprof.Labels("query", q, "variant", [2]string{"wasm", "native"}[variant]), func(ctx context.Context) {
				stats, err = job.Run(ctx)
			})
			cpu, took := cpuTime()-cpu0, time.Since(t0)
			allocs[variant] = float64(allocated()-alloc0) / float64(events)
			backend.Close()
			os.RemoveAll(stateDir)
			if err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
			figures[variant] = float64(events) / cpu.Seconds()
			if variant == 0 {
				wall = took
				for _, s := range stats.Nodes {
					if s.Kind == "sink" {
						results += s.In
					}
				}
			}
		}
		flink := flinkPerCore[q]
		fmt.Printf("%-5s %14.0f %14.0f %8.2f %12.0f %10.2f %10.1f %12d %10.0f %10.0f\n", q, figures[0], figures[1], figures[0]/figures[1], flink, figures[0]/flink, wall.Seconds(), results, allocs[0], allocs[1])
	}
	return nil
}

// allocated is the bytes this process allocated on the heap so far: per
// event, it says what the garbage collector has to keep up with, and it
// does not drift with the machine's load as times do.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
