// Command eddy-bench is the harness behind `make bench`: it runs the same
// pipelines with operators in native Go and as Wasm modules in one process,
// one after the other, and prints records/s and their ratios. Absolute
// figures drift on shared machines; the ratios from one run are what to
// compare.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/udfs/project/projection"
)

func main() {
	records := flag.Int("records", 2_000_000, "records per pipeline run")
	runs := flag.Int("runs", 3, "runs per variant (the median is reported)")
	root := flag.String("root", ".", "repository root (for udfs/build)")
	flag.Parse()
	if err := benchProjection(*root, *records, *runs); err != nil {
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

func (n *nativeProjection) Open(context.Context, dataflow.TaskInfo) error { return nil }
func (n *nativeProjection) Process(_ context.Context, in, out *dataflow.Batch) error {
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
func (n *nativeProjection) Finish(context.Context, *dataflow.Batch) error { return nil }
func (n *nativeProjection) Close() error                                  { return nil }

func benchProjection(root string, records, runs int) error {
	ctx := context.Background()
	cfg := host.DefaultConfig()
	cache, err := os.MkdirTemp("", "eddy-bench-cache")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	cfg.CacheDir = cache
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	engine, err := host.NewEngine(ctx, cfg)
	if err != nil {
		return err
	}
	defer engine.Close(ctx)

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
	natives := map[string]func() dataflow.Operator{
		"native:projection": func() dataflow.Operator {
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
	}
	fmt.Printf("pipeline: generator(transactions) → projection → discard, %d records, parallelism 1, median of %d runs, GOMAXPROCS %d\n",
		records, runs, runtime.GOMAXPROCS(0))
	rates := make([]float64, len(variants))
	var kept int64
	for i, v := range variants {
		spec, err := jobspec.Parse([]byte(specText(v.module)), "")
		if err != nil {
			return err
		}
		var samples []float64
		for r := 0; r < runs; r++ {
			job, err := dataflow.NewJob(ctx, spec, dataflow.Options{Connectors: connectors.Registry{}, Engine: engine, NativeOperators: natives})
			if err != nil {
				return err
			}
			sum, err := job.Run(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", v.label, err)
			}
			if i == 0 {
				kept = sum.Nodes[1].Out
			} else if sum.Nodes[1].Out != kept {
				return fmt.Errorf("%s kept %d records, native Go kept %d: the variants disagree", v.label, sum.Nodes[1].Out, kept)
			}
			samples = append(samples, float64(records)/sum.Elapsed.Seconds())
		}
		sort.Float64s(samples)
		rates[i] = samples[len(samples)/2]
		fmt.Printf("  %-14s %12.0f records/s\n", v.label, rates[i])
	}
	fmt.Printf("  ratio b/a (C module / native)  %.2f\n", rates[1]/rates[0])
	fmt.Printf("  ratio c/a (Go module / native) %.2f\n", rates[2]/rates[0])
	_ = time.Second
	return nil
}
