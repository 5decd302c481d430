// Command eddy-bench is the harness behind `make bench`: it runs the same
// pipelines with operators in native Go and as Wasm modules in one process,
// one after the other, and prints records/s and their ratios. Absolute
// figures drift on shared machines; the ratios from one run are what to
// compare. It then runs a paced job with several buffer_timeout values
// and prints the end-to-end latency of its records, the
// noisy-neighbour figure of fair sharing between tenants (noisy.go), and
// last the pause of a hot swap against that of stop-with-savepoint and
// resubmit (swap.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/udfs/project/projection"
)

func main() {
	records := flag.Int("records", 2_000_000, "records per pipeline run")
	runs := flag.Int("runs", 3, "runs per variant (the median is reported)")
	root := flag.String("root", ".", "repository root (for udfs/build)")
	latencyFor := flag.Duration("latency-for", 3*time.Second, "how long each latency run lasts")
	only := flag.String("only", "", "run one part: pipeline, operator, latency, noisy, swap or nexmark (default: all)")
	nexmarkEvents := flag.Int64("nexmark-events", 2_000_000, "events per Nexmark query run (nexmark part)")
	nexmarkP := flag.Int("nexmark-parallelism", 2, "parallelism of the Nexmark jobs (nexmark part)")
	nexmarkQueries := flag.String("nexmark-queries", "", "comma-separated queries to run, e.g. q0,q5 (nexmark part; default all)")
	swap := defaultSwapOptions()
	flag.IntVar(&swap.Swaps, "swaps", swap.Swaps, "in-place swaps per state size (swap part)")
	flag.IntVar(&swap.Resubmits, "resubmits", swap.Resubmits, "stop-with-savepoint + resubmit rounds with small state (swap part)")
	flag.IntVar(&swap.LargeResubmits, "resubmits-large", swap.LargeResubmits, "stop-with-savepoint + resubmit rounds with the large state (swap part)")
	flag.Float64Var(&swap.Rate, "swap-rate", swap.Rate, "generator records/s in the swap part")
	flag.Int64Var(&swap.StateBytes, "swap-state", swap.StateBytes, "bytes of Pebble state of the large-state swap runs (0: small state only)")
	flag.DurationVar(&swap.Settle, "swap-settle", swap.Settle, "steady flow before each upgrade in the swap part")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	memProfile := flag.String("memprofile", "", "write a heap profile (what the run allocated: pprof -sample_index=alloc_space) to this file at the end")
	flag.Parse()
	// The tasks' life-cycle lines (info) are not figures.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "eddy-bench: -cpuprofile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "eddy-bench: -memprofile:", err)
			}
		}()
	}
	var err error
	switch *only {
	case "":
		err = benchProjection(*root, *records, *runs)
		if err == nil {
			err = benchOperatorOnly(*root, *records, *runs)
		}
		if err == nil {
			err = benchCounter(*root, *records/2, *runs)
		}
		if err == nil {
			err = benchLatency(*latencyFor)
		}
		if err == nil {
			err = benchNoisy(*root, *records, *runs)
		}
		if err == nil {
			err = benchNexmark(*root, *nexmarkEvents, *nexmarkP, *nexmarkQueries)
		}
		if err == nil {
			err = benchSwap(*root, swap)
		}
	case "pipeline":
		err = benchProjection(*root, *records, *runs)
	case "operator":
		err = benchOperatorOnly(*root, *records, *runs)
		if err == nil {
			err = benchCounter(*root, *records/2, *runs)
		}
	case "latency":
		err = benchLatency(*latencyFor)
	case "noisy":
		err = benchNoisy(*root, *records, *runs)
	case "swap":
		err = benchSwap(*root, swap)
	case "nexmark":
		err = benchNexmark(*root, *nexmarkEvents, *nexmarkP, *nexmarkQueries)
	default:
		err = fmt.Errorf("-only %q: want pipeline, operator, latency, noisy, swap or nexmark", *only)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "eddy-bench:", err)
		os.Exit(1)
	}
}

const projectionConfig = `{fields: [card, amount, country], where: {field: amount, op: ">", value: 100}}`

// nativeProjection is the projection udf's algorithm compiled natively:
// the baseline the Wasm builds of the same algorithm are measured against.
type nativeProjection struct {
	p   *projection.Projector
	buf []byte
}

func (n *nativeProjection) Open(context.Context, stream.TaskInfo) error { return nil }
func (n *nativeProjection) Process(_ context.Context, in, out *stream.Batch) error {
	for i := range in.Records {
		r := &in.Records[i]
		v, keep := n.p.Apply(n.buf[:0], r.Value)
		n.buf = v
		if keep {
			out.Add(r.Key, v, r.Timestamp)
		}
	}
	return nil
}
func (n *nativeProjection) Finish(context.Context, *stream.Batch) error { return nil }

// ReleasesInput: out.Add copies, as the Wasm operator's host does.
func (n *nativeProjection) ReleasesInput() bool { return true }
func (n *nativeProjection) Close() error        { return nil }

// newBenchEngine is the Wasm engine of a part, with its own compilation
// cache; done closes it and removes the cache.
func newBenchEngine(ctx context.Context) (engine *host.Engine, done func(), err error) {
	cfg := host.DefaultConfig()
	cache, err := os.MkdirTemp("", "eddy-bench-cache")
	if err != nil {
		return nil, nil, err
	}
	cfg.CacheDir = cache
	// A generous deadline: on a shared machine a batch can be descheduled
	// for a while, and a deadline hit would abort the measurement.
	cfg.CallTimeout = time.Minute
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if engine, err = host.NewEngine(ctx, cfg); err != nil {
		os.RemoveAll(cache)
		return nil, nil, err
	}
	return engine, func() { engine.Close(ctx); os.RemoveAll(cache) }, nil
}

func benchProjection(root string, records, runs int) error {
	ctx := context.Background()
	engine, done, err := newBenchEngine(ctx)
	if err != nil {
		return err
	}
	defer done()

	specText := func(module string) string {
		return fmt.Sprintf(`name: bench-projection
nodes:
  - name: gen
    source: {generator: {kind: transactions, count: %d, seed: 7}}
  - name: proj
    input: gen
    wasm: {module: %q, config: %s}
  - name: out
    input: proj
    sink: {discard: {}}
`, records, module, projectionConfig)
	}
	natives := map[string]func() stream.Operator{
		"native:projection": func() stream.Operator {
			p, err := projection.Parse([]byte(`{"fields":["card","amount","country"],"where":{"field":"amount","op":">","value":100}}`))
			if err != nil {
				panic(err)
			}
			return &nativeProjection{p: p}
		},
	}
	variants := []struct{ label, module string }{
		{"(a) native Go", "native:projection"},
		{"(b) C module", filepath.Join(root, "udfs/build/project-c.wasm")},
		{"(c) Go module", filepath.Join(root, "udfs/build/project-go.wasm")},
		{"(d) Rust module", filepath.Join(root, "udfs/build/project-rust.wasm")},
		{"(e) AS module", filepath.Join(root, "udfs/build/project-as.wasm")},
	}
	fmt.Printf("pipeline: generator(transactions) → projection → discard, %d records, parallelism 1, %d interleaved rounds (medians), GOMAXPROCS %d\n",
		records, runs, runtime.GOMAXPROCS(0))
	var kept int64
	specs := make([]*jobspec.Spec, len(variants))
	for i, v := range variants {
		if specs[i], err = jobspec.Parse([]byte(specText(v.module)), ""); err != nil {
			return err
		}
	}
	cost, ratio, err := rounds(runs, len(variants), func(i int) (float64, error) {
		v := variants[i]
		job, err := dataflow.NewJob(ctx, specs[i], dataflow.Options{Connectors: connectors.Registry{}, Engine: engine, NativeOperators: natives})
		if err != nil {
			return 0, err
		}
		sum, err := job.Run(ctx)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", v.label, err)
		}
		if i == 0 {
			kept = sum.Nodes[1].Out
		} else if sum.Nodes[1].Out != kept {
			return 0, fmt.Errorf("%s kept %d records, native Go kept %d: the variants disagree", v.label, sum.Nodes[1].Out, kept)
		}
		return float64(sum.Elapsed.Nanoseconds()) / float64(records), nil
	})
	if err != nil {
		return err
	}
	for i, v := range variants {
		fmt.Printf("  %-14s %12.0f records/s\n", v.label, 1e9/cost[i])
	}
	for i, name := range []string{"C", "Go", "Rust", "AS"} {
		fmt.Printf("  ratio %c/a (%s module / native) %.2f\n", 'b'+i, name, ratio[i+1])
	}
	return nil
}

// benchOperatorOnly times the projection stage alone on batches generated
// beforehand: the pipeline figures above include the generator, which is
// the same in every variant and dilutes the difference.
func benchOperatorOnly(root string, records, runs int) error {
	ctx := context.Background()
	gen, err := connectors.Registry{}.NewSource(&jobspec.SourceSpec{Generator: &jobspec.GeneratorSpec{Kind: jobspec.GeneratorTransactions, Count: int64(records), Seed: 7}}, ".")
	if err != nil {
		return err
	}
	if err := gen.Open(ctx, stream.TaskInfo{Parallelism: 1}); err != nil {
		return err
	}
	var batches []*stream.Batch
	for {
		b := stream.NewBatch(jobspec.DefaultBatchSize)
		err := gen.Next(ctx, b, jobspec.DefaultBatchSize)
		if b.Len() > 0 {
			batches = append(batches, b)
		}
		if err != nil {
			break
		}
	}
	engine, err := benchEngine(ctx)
	if err != nil {
		return err
	}
	defer engine.Close(ctx)
	config := []byte(`{"fields":["card","amount","country"],"where":{"field":"amount","op":">","value":100}}`)

	type variant struct {
		label   string
		process func(in, out *stream.Batch) error
	}
	p, err := projection.Parse(config)
	if err != nil {
		return err
	}
	native := &nativeProjection{p: p}
	variants := []variant{{"(a) native Go", func(in, out *stream.Batch) error { return native.Process(ctx, in, out) }}}
	for _, m := range []struct{ label, file string }{{"(b) C module", "project-c.wasm"}, {"(c) Go module", "project-go.wasm"}, {"(d) Rust module", "project-rust.wasm"}, {"(e) AS module", "project-as.wasm"}} {
		mod, err := engine.Load(ctx, filepath.Join(root, "udfs/build", m.file))
		if err != nil {
			return err
		}
		inst, err := mod.NewInstance(ctx, host.InstanceConfig{Name: "bench/" + m.file})
		if err != nil {
			return err
		}
		defer inst.Close()
		if err := inst.Open(config); err != nil {
			return err
		}
		var out *stream.Batch
		emit := func(recs []stream.Record) { out.AddRecords(recs) }
		variants = append(variants, variant{m.label, func(in, o *stream.Batch) error {
			out = o
			return inst.Process(in.Records, emit)
		}})
	}
	fmt.Printf("operator only: projection over %d pre-generated batches of %d records, %d interleaved rounds (medians)\n", len(batches), jobspec.DefaultBatchSize, runs)
	out := stream.NewBatch(jobspec.DefaultBatchSize)
	perRecord, ratio, err := rounds(runs, len(variants), func(i int) (float64, error) {
		v := variants[i]
		start := time.Now()
		// Labelled, so that -cpuprofile splits by variant (pprof -tagfocus=variant=...).
		var err error
		pprof.Do(ctx, pprof.Labels("variant", "project "+v.label), func(context.Context) {
			for _, b := range batches {
				out.Reset()
				if err = v.process(b, out); err != nil {
					return
				}
			}
		})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", v.label, err)
		}
		return float64(time.Since(start).Nanoseconds()) / float64(records), nil
	})
	if err != nil {
		return err
	}
	for i, v := range variants {
		fmt.Printf("  %-14s %8.1f ns/record %12.0f records/s\n", v.label, perRecord[i], 1e9/perRecord[i])
	}
	printRatios(ratio)
	return nil
}

// benchEngine is the Wasm engine of the harness's in-process parts: a
// minute per guest call, warnings only.
func benchEngine(ctx context.Context) (*host.Engine, error) {
	cfg := host.DefaultConfig()
	cfg.CallTimeout = time.Minute
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return host.NewEngine(ctx, cfg)
}
