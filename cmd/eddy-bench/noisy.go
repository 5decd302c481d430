package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/cpushare"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
)

// noisySpins is the busy loop tenant A's module spins per record
// (host/testdata/burn.c): about 4 ms of guest CPU per batch of 256.
const noisySpins = 5000

// benchNoisy measures the noisy-neighbour figure: tenant B's projection
// pipeline (the `pipeline` part's C variant, parallelism 1) alone, and
// while tenant A runs a CPU-bound module with parallelism 2 in the same
// process, with the worker's CPU scheduler (package cpushare, equal
// shares) and without it. The two jobs run as a worker runs deployments:
// dataflow jobs on one shared engine, each tenant's guest calls admitted
// by its gate; only the coordinator is left out.
func benchNoisy(root string, records, runs int) error {
	ctx := context.Background()
	cfg := host.DefaultConfig()
	cfg.CallTimeout = time.Minute
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	engine, err := host.NewEngine(ctx, cfg)
	if err != nil {
		return err
	}
	defer engine.Close(ctx)

	specB, err := jobspec.Parse(fmt.Appendf(nil, `name: tenant-b
nodes:
  - name: gen
    source: {generator: {kind: transactions, count: %d, seed: 7}}
  - name: proj
    input: gen
    wasm: {module: %q, config: %s}
  - name: out
    input: proj
    sink: {discard: {}}
`, records, filepath.Join(root, "udfs/build/project-c.wasm"), projectionConfig), "")
	if err != nil {
		return err
	}
	specA, err := jobspec.Parse(fmt.Appendf(nil, `name: tenant-a
parallelism: 2
nodes:
  - name: gen
    source: {generator: {kind: transactions, seed: 8}}
  - name: burn
    input: gen
    wasm: {module: %q, config: {spins: %d}}
  - name: out
    input: burn
    sink: {discard: {}}
`, filepath.Join(root, "host/testdata/burn.wasm"), noisySpins), "")
	if err != nil {
		return err
	}

	// runB runs B once, beside A when withA, and returns its records/s,
	// beside A, A's records/s over the same time, and the CPU the process
	// got meanwhile, in cores: on a shared machine it may be less than
	// GOMAXPROCS, and then B's equal share is less than it uses alone.
	runB := func(sched *cpushare.Scheduler, withA bool) (rateB, rateA, cores float64, err error) {
		var gateA, gateB stream.Gate
		if sched != nil {
			gateA, gateB = sched.Tenant("a", 1), sched.Tenant("b", 1)
		}
		actx, stopA := context.WithCancel(ctx)
		defer stopA()
		var jobA *dataflow.Job
		doneA := make(chan error, 1)
		if withA {
			jobA, err = dataflow.NewJob(ctx, specA, dataflow.Options{Connectors: connectors.Registry{}, Engine: engine, Tenant: "a", Gate: gateA})
			if err != nil {
				return 0, 0, 0, err
			}
			go func() {
				_, err := jobA.Run(actx)
				doneA <- err
			}()
			// B starts once A burns: both of A's subtasks have had a batch.
			deadline := time.Now().Add(time.Minute)
			for jobA.Stats()[1].In < 2*jobspec.DefaultBatchSize {
				if time.Now().After(deadline) {
					stopA()
					return 0, 0, 0, errors.New("tenant A processed nothing within a minute")
				}
				time.Sleep(time.Millisecond) // a poll
			}
		}
		jobB, err := dataflow.NewJob(ctx, specB, dataflow.Options{Connectors: connectors.Registry{}, Engine: engine, Tenant: "b", Gate: gateB})
		if err != nil {
			stopA()
			return 0, 0, 0, err
		}
		var aBefore int64
		if withA {
			aBefore = jobA.Stats()[1].In
		}
		cpu0 := processCPU()
		sum, err := jobB.Run(ctx)
		if err == nil {
			cores = (processCPU() - cpu0).Seconds() / sum.Elapsed.Seconds()
		}
		if withA {
			rateA = float64(jobA.Stats()[1].In-aBefore) / sum.Elapsed.Seconds()
			stopA()
			if aerr := <-doneA; aerr != nil && !errors.Is(aerr, context.Canceled) {
				return 0, 0, 0, fmt.Errorf("tenant A: %w", aerr)
			}
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("tenant B: %w", err)
		}
		return float64(records) / sum.Elapsed.Seconds(), rateA, cores, nil
	}
	median := func(xs []float64) float64 {
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}

	fmt.Printf("noisy neighbour: tenant B generator(transactions) → C projection → discard, %d records, parallelism 1; "+
		"tenant A generator → busy loop (%d spins a record) → discard, parallelism 2; one process, GOMAXPROCS %d, median of %d runs\n",
		records, noisySpins, runtime.GOMAXPROCS(0), runs)
	type result struct{ alone, beside, a, coresAlone, coresBeside float64 }
	var results [2]result
	for i, fair := range []bool{true, false} {
		var alone, beside, rateA, coresAlone, coresBeside []float64
		for range runs {
			var sched *cpushare.Scheduler
			if fair {
				if sched, err = cpushare.New(cpushare.DefaultConfig()); err != nil {
					return err
				}
			}
			x, _, cx, err := runB(sched, false)
			if err != nil {
				return err
			}
			y, a, cy, err := runB(sched, true)
			if err != nil {
				return err
			}
			alone, beside, rateA = append(alone, x), append(beside, y), append(rateA, a)
			coresAlone, coresBeside = append(coresAlone, cx), append(coresBeside, cy)
		}
		results[i] = result{median(alone), median(beside), median(rateA), median(coresAlone), median(coresBeside)}
		label := "fair sharing on (equal shares)"
		if !fair {
			label = "fair sharing off"
		}
		r := results[i]
		fmt.Printf("  %-31s B alone %9.0f rec/s, B beside A %9.0f rec/s, ratio %.2f; A beside B %7.0f rec/s; process CPU %.2f cores alone, %.2f beside\n",
			label, r.alone, r.beside, r.beside/r.alone, r.a, r.coresAlone, r.coresBeside)
	}
	fmt.Printf("  noisy neighbour: ratio Y/X = %.2f (fair sharing on); without fair sharing %.2f\n",
		results[0].beside/results[0].alone, results[1].beside/results[1].alone)
	// What an equal share allows: half the CPU the process got beside A,
	// over what B used alone. On an idle machine it is 1 (B needs one
	// core of two); on a busy one, less, and a fair scheduler reaches it
	// rather than the goal.
	r := results[0]
	fmt.Printf("  equal-share bound with the CPU this process got: min(1, %.2f/2 / %.2f) = %.2f\n",
		r.coresBeside, r.coresAlone, min(1, r.coresBeside/2/r.coresAlone))
	return nil
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
