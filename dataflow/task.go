package dataflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/eddy-stream/eddy/host"
)

// message is what travels through an input queue: a batch, or the end of
// one producer's stream.
type message struct {
	batch *Batch
	eos   bool
}

// stage is one non-source vertex of a chain with the batch it writes into.
type stage struct {
	v   *vertex
	op  Operator
	out *Batch
}

// task runs one subtask of a chain in one goroutine: it pulls batches from
// its source or input queue and pushes each through the chain's stages with
// plain calls.
type task struct {
	job     *Job
	chain   *chain
	subtask int
	gates   [][]chan message

	name   string
	source Source
	stages []stage
	rr     []int // round-robin position per output chain
}

func (t *task) info(v *vertex) TaskInfo {
	return TaskInfo{Job: t.job.spec.Name, Node: v.node.Name, Subtask: t.subtask, Parallelism: v.parallelism}
}

func (t *task) run(ctx context.Context) (err error) {
	names := make([]string, len(t.chain.vertices))
	for i, v := range t.chain.vertices {
		names[i] = v.node.Name
	}
	t.name = fmt.Sprintf("%s[%d]", strings.Join(names, "→"), t.subtask)
	log := t.job.log.With("task", t.name)
	defer func() {
		if cerr := t.close(); cerr != nil && err == nil {
			err = cerr
		}
		if err != nil && ctx.Err() == nil {
			log.Error("task failed", "err", err)
		}
		if err != nil {
			err = fmt.Errorf("task %s: %w", t.name, err)
		}
	}()
	if err := t.open(ctx); err != nil {
		return err
	}
	t.rr = make([]int, len(t.chain.outputs))
	for i := range t.rr {
		t.rr[i] = t.subtask // spread the first batches of each producer
	}
	if t.source != nil {
		err = t.runSource(ctx)
	} else {
		err = t.runGate(ctx)
	}
	if err != nil {
		return err
	}
	if err := t.finish(ctx); err != nil {
		return err
	}
	return t.sendEOS(ctx)
}

func (t *task) open(ctx context.Context) error {
	j := t.job
	for _, v := range t.chain.vertices {
		n := v.node
		switch {
		case n.Source != nil:
			src, err := j.opts.Connectors.NewSource(n.Source, j.spec.Dir())
			if err != nil {
				return err
			}
			t.source = src
			if err := src.Open(ctx, t.info(v)); err != nil {
				return fmt.Errorf("open source %s: %w", n.Name, err)
			}
			continue
		case n.Sink != nil:
			snk, err := j.opts.Connectors.NewSink(n.Sink, j.spec.Dir())
			if err != nil {
				return err
			}
			t.stages = append(t.stages, stage{v: v, op: &sinkOperator{sink: snk}})
		default:
			var op Operator
			if native, ok := j.opts.NativeOperators[n.Wasm.Module]; ok {
				op = native()
			} else {
				op = &wasmOperator{module: j.modules[n.Wasm.Module], config: j.configs[v]}
			}
			t.stages = append(t.stages, stage{v: v, op: op})
		}
		st := &t.stages[len(t.stages)-1]
		st.out = NewBatch(j.spec.BatchSize)
		if err := st.op.Open(ctx, t.info(v)); err != nil {
			t.stages = t.stages[:len(t.stages)-1]
			_ = st.op.Close()
			return fmt.Errorf("open %s: %w", n.Name, err)
		}
	}
	return nil
}

func (t *task) close() error {
	var errs []error
	if t.source != nil {
		errs = append(errs, t.source.Close())
	}
	for _, st := range t.stages {
		errs = append(errs, st.op.Close())
	}
	return errors.Join(errs...)
}

func (t *task) runSource(ctx context.Context) error {
	bs := t.job.spec.BatchSize
	stats := t.chain.head().stats
	// The source batch is reused when a stage consumes it synchronously;
	// when the chain is just the source it is sent downstream, so fresh.
	var reuse *Batch
	if len(t.stages) > 0 {
		reuse = NewBatch(bs)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := reuse
		if b == nil {
			b = NewBatch(bs)
		} else {
			b.Reset()
		}
		err := t.source.Next(ctx, b, bs)
		if b.Len() > 0 {
			stats.Out.Add(int64(b.Len()))
			if perr := t.push(ctx, b, 0); perr != nil {
				return perr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("source %s: %w", t.chain.head().node.Name, err)
		}
	}
}

func (t *task) runGate(ctx context.Context) error {
	gate := t.gates[t.chain.id][t.subtask]
	open := t.chain.producers[t.subtask]
	for open > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-gate:
			if m.eos {
				open--
				continue
			}
			if err := t.push(ctx, m.batch, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// push runs b through stages[from:] and sends what comes out of the last
// one downstream.
func (t *task) push(ctx context.Context, b *Batch, from int) error {
	for k := from; k < len(t.stages); k++ {
		st := &t.stages[k]
		st.v.stats.In.Add(int64(b.Len()))
		st.out.Reset()
		if err := st.op.Process(ctx, b, st.out); err != nil {
			return fmt.Errorf("%s: %w", st.v.node.Name, err)
		}
		st.v.stats.Out.Add(int64(st.out.Len()))
		b = st.out
		if b.Len() == 0 {
			return nil
		}
	}
	if len(t.chain.outputs) == 0 {
		return nil
	}
	if len(t.stages) > 0 && b == t.stages[len(t.stages)-1].out {
		// The batch leaves this goroutine: the stage gets a new one.
		t.stages[len(t.stages)-1].out = NewBatch(t.job.spec.BatchSize)
	}
	return t.send(ctx, message{batch: b})
}

// finish flushes every stage in chain order: what a stage emits at the end
// still flows through the stages after it.
func (t *task) finish(ctx context.Context) error {
	for k := range t.stages {
		st := &t.stages[k]
		out := NewBatch(t.job.spec.BatchSize)
		if err := st.op.Finish(ctx, out); err != nil {
			return fmt.Errorf("%s: finish: %w", st.v.node.Name, err)
		}
		if out.Len() == 0 {
			continue
		}
		st.v.stats.Out.Add(int64(out.Len()))
		if k+1 < len(t.stages) {
			if err := t.push(ctx, out, k+1); err != nil {
				return err
			}
		} else if len(t.chain.outputs) > 0 {
			if err := t.send(ctx, message{batch: out}); err != nil {
				return err
			}
		}
	}
	return nil
}

// send delivers m to every output chain: to the same subtask on a forward
// edge, round-robin by batch otherwise. Fan-out shares the batch, which is
// read-only from here on.
func (t *task) send(ctx context.Context, m message) error {
	for i, c := range t.chain.outputs {
		target := t.subtask
		if !t.chain.forward(c) {
			target = t.rr[i] % c.parallelism
			t.rr[i]++
		}
		if err := t.deliver(ctx, t.gates[c.id][target], m); err != nil {
			return err
		}
	}
	return nil
}

func (t *task) sendEOS(ctx context.Context) error {
	for _, c := range t.chain.outputs {
		if t.chain.forward(c) {
			if err := t.deliver(ctx, t.gates[c.id][t.subtask], message{eos: true}); err != nil {
				return err
			}
			continue
		}
		for _, g := range t.gates[c.id] {
			if err := t.deliver(ctx, g, message{eos: true}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *task) deliver(ctx context.Context, gate chan message, m message) error {
	select {
	case gate <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
