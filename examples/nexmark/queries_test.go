package nexmark_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/examples/nexmark"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/state/statetest"
)

// testEvents events 1 ms apart in event time (a minute: six tumbling
// windows, thirty sliding ones) moved back by up to a second, within the
// specs' four seconds of out-of-orderness, so no record is late.
const testEvents = 60000

func engine(t *testing.T) *host.Engine {
	t.Helper()
	cfg := host.DefaultConfig()
	cfg.CacheDir = filepath.Join(os.TempDir(), "eddy-test-wasm-cache")
	e, err := host.NewEngine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// TestQueries runs every query's spec as written (but for the number of
// events, their spacing and disorder, and the sink) at parallelism 1 on
// memory state and 3 on Pebble, and with the native Go operators of
// `make bench-nexmark` in place of the Wasm module at 2, and compares the
// output with the reference computed from the same events without Eddy.
func TestQueries(t *testing.T) {
	e := engine(t)
	for _, q := range nexmark.Queries {
		for _, run := range []struct {
			p       int
			backend string
			native  bool
		}{{1, jobspec.BackendMemory, false}, {3, jobspec.BackendPebble, false}, {2, jobspec.BackendMemory, true}} {
			name := fmt.Sprintf("%s/p%d", q, run.p)
			if run.native {
				name += "/native"
			}
			t.Run(name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), q+".jsonl")
				spec, err := nexmark.Load(".", q, testEvents, run.p, out)
				if err != nil {
					t.Fatal(err)
				}
				for i := range spec.Nodes {
					if g := spec.Nodes[i].Source; g != nil {
						g.Generator.Interval = jobspec.Duration(time.Millisecond)
						g.Generator.Disorder = jobspec.Duration(time.Second)
					}
				}
				backend := statetest.Memory(t)
				if run.backend == jobspec.BackendPebble {
					backend = statetest.Pebble(t)
				}
				opts := dataflow.Options{
					Connectors:     connectors.Registry{},
					Engine:         e,
					StateBackends:  func(string) (state.Backend, error) { return backend, nil },
					WindowOperator: window.New,
				}
				if run.native {
					if opts.NativeOperators, err = nexmark.Native(spec); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				lines, err := nexmark.Run(ctx, spec, opts, out)
				if err != nil {
					t.Fatal(err)
				}
				model, err := nexmark.Model(spec)
				if err != nil {
					t.Fatal(err)
				}
				if len(lines) == 0 {
					t.Fatalf("%s wrote nothing", q)
				}
				if err := nexmark.Check(q, model, testEvents, lines); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d lines, as the reference", name, len(lines))
			})
		}
	}
}
