package nexmark

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
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
