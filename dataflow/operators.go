package dataflow

import (
	"context"
	"fmt"

	"github.com/eddy-stream/eddy/host"
)

// newOperator builds the operator of a wasm (or built-in) vertex.
func (j *Job) newOperator(v *vertex) (Operator, error) {
	n := v.node
	switch {
	case n.Wasm != nil:
		if native, ok := j.opts.NativeOperators[n.Wasm.Module]; ok {
			return native(), nil
		}
		return &wasmOperator{module: j.modules[n.Wasm.Module], config: j.configs[v]}, nil
	case n.Window != nil:
		if j.opts.WindowOperator == nil {
			return nil, fmt.Errorf("windows are not available in this build")
		}
		return j.opts.WindowOperator(j.spec, n, j.modules)
	}
	return nil, fmt.Errorf("node has no operator")
}

// sinkOperator lets a sink end a chain like any other stage.
type sinkOperator struct{ sink Sink }

func (s *sinkOperator) Open(ctx context.Context, info TaskInfo) error { return s.sink.Open(ctx, info) }
func (s *sinkOperator) Process(ctx context.Context, in, _ *Batch) error {
	return s.sink.Write(ctx, in)
}
func (s *sinkOperator) Finish(ctx context.Context, _ *Batch) error { return s.sink.Finish(ctx) }
func (s *sinkOperator) Close() error                               { return s.sink.Close() }

// wasmOperator runs one instance of a Wasm module.
type wasmOperator struct {
	module *host.Module
	config []byte
	inst   *host.Instance
	out    *Batch
	emit   func([]Record)
}

func (w *wasmOperator) Open(ctx context.Context, info TaskInfo) error {
	inst, err := w.module.NewInstance(ctx, host.InstanceConfig{Name: fmt.Sprintf("%s/%s[%d]", info.Job, info.Node, info.Subtask)})
	if err != nil {
		return err
	}
	w.inst = inst
	// One closure for the task's life: emitted records alias guest memory
	// and are copied into whichever batch is current.
	w.emit = func(recs []Record) { w.out.AddRecords(recs) }
	return inst.Open(w.config)
}

func (w *wasmOperator) Process(_ context.Context, in, out *Batch) error {
	w.out = out
	return w.inst.Process(in.Records, w.emit)
}

func (w *wasmOperator) Finish(_ context.Context, out *Batch) error {
	w.out = out
	return w.inst.Finish(w.emit)
}

func (w *wasmOperator) Close() error {
	if w.inst == nil {
		return nil
	}
	return w.inst.Close()
}
