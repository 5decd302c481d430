package nexmark

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/examples/nexmark/native"
)

// Run runs spec (from Load, its sink writing to out) to its end with opts
// and returns the lines the sink wrote.
func Run(ctx context.Context, spec *jobspec.Spec, opts dataflow.Options, out string) ([][]byte, error) {
	job, err := dataflow.NewJob(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	if _, err := job.Run(ctx); err != nil {
		return nil, err
	}
	return readLines(out)
}

// readLines reads the lines of out and of the files beside it whose name
// starts with its own (a file sink's parts).
func readLines(out string) ([][]byte, error) {
	dir, base := filepath.Split(out)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var lines [][]byte
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), base) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
			}
		}
	}
	return lines, nil
}

// Native replaces every wasm node of spec with the same logic as a native
// Go operator (examples/nexmark/native), for dataflow.Options.NativeOperators:
// the node's module becomes "native:<node>". The two-input parts of q3
// and q4 stay Wasm.
func Native(spec *jobspec.Spec) (map[string]func() stream.Operator, error) {
	ops := map[string]func() stream.Operator{}
	for i := range spec.Nodes {
		n := &spec.Nodes[i]
		if n.Wasm == nil || n.Wasm.Config["query"] == "q3" || n.Wasm.Config["query"] == "q4" {
			continue // the two-input parts of q3 and q4 stay Wasm (nexmark_join.c has no native twin)
		}
		cfg, err := native.ParseConfig(n.Wasm.Config)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		ref := "native:" + n.Name
		ops[ref] = func() stream.Operator { return native.New(cfg) }
		n.Wasm = &jobspec.WasmSpec{Module: ref, Config: n.Wasm.Config, Line: n.Wasm.Line}
	}
	return ops, nil
}
