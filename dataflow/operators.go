package dataflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/join"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// newOperator builds the operator of a wasm (or built-in) vertex.
func (j *Job) newOperator(v *vertex) (stream.Operator, error) {
	n := v.node
	switch {
	case n.Wasm != nil:
		if native, ok := j.opts.NativeOperators[n.Wasm.Module]; ok {
			return native(), nil
		}
		w := &wasmOperator{module: j.modules[n.Wasm.Module], config: j.configs[v]}
		if w.module.IsAggregate() {
			return nil, fmt.Errorf("module %s is an aggregate module, which folds windows: use it in a window node as aggregate: {wasm: {module: %s}}",
				n.Wasm.Module, n.Wasm.Module)
		}
		if err := checkInputs(n, w.module); err != nil {
			return nil, err
		}
		if len(n.KeyBy) > 0 {
			k := &keyedWasmOperator{wasmOperator: w, timers: w.module.HasOnTimer()}
			if n.KeyBy.PerInput() {
				return &twoInputWasmOperator{k}, nil
			}
			return k, nil
		}
		return w, nil
	case n.Join != nil:
		return join.New(j.spec, n)
	case n.Window != nil:
		if j.opts.WindowOperator == nil {
			return nil, fmt.Errorf("windows are not available in this build")
		}
		return j.opts.WindowOperator(j.spec, n, j.modules)
	}
	return nil, fmt.Errorf("node has no operator")
}

// checkInputs matches a wasm node's shape with its module's: a key_by with
// a key per input (key_by: [left, right]) needs a two-input module
// (ABI version 5, eddy_process2), and a two-input module needs one.
func checkInputs(n *jobspec.Node, m *host.Module) error {
	switch {
	case n.KeyBy.PerInput() && !m.IsTwoInput():
		return fmt.Errorf("module %s is a one-input operator (it does not export %s), but key_by %s names a key per input: give it one key_by for a union of the inputs, or a two-input module",
			m.Name(), abi.ExportProcess2, n.KeyBy)
	case !n.KeyBy.PerInput() && m.IsTwoInput():
		return fmt.Errorf("module %s is a two-input operator (it exports %s): its node needs input: [left, right] and key_by: [left_key, right_key]",
			m.Name(), abi.ExportProcess2)
	}
	return nil
}

// sinkOperator lets a sink end a chain like any other stage.
type sinkOperator struct{ sink stream.Sink }

func (s *sinkOperator) Open(ctx context.Context, info stream.TaskInfo) error {
	return s.sink.Open(ctx, info)
}
func (s *sinkOperator) Process(ctx context.Context, in, _ *stream.Batch) error {
	return s.sink.Write(ctx, in)
}
func (s *sinkOperator) Finish(ctx context.Context, _ *stream.Batch) error { return s.sink.Finish(ctx) }

// ReleasesInput is the sink's.
func (s *sinkOperator) ReleasesInput() bool { return stream.ReleasesInput(s.sink) }
func (s *sinkOperator) Close() error        { return s.sink.Close() }

// wasmOperator runs one instance of a Wasm module.
type wasmOperator struct {
	module *host.Module
	config []byte
	inst   *host.Instance
	out    *stream.Batch
	emit   func([]stream.Record)
	// swap, when set, is where PrepareSwap leaves new versions of the
	// module for this stage (swap.go).
	swap *swapSlot
}

func (w *wasmOperator) Open(ctx context.Context, info stream.TaskInfo) error {
	st, _ := info.State.(state.Store) // nil for a node that is not keyed
	cfg := host.InstanceConfig{
		Name:    fmt.Sprintf("%s/%s[%d]", info.Job, info.Node, info.Subtask),
		State:   st,
		Logger:  info.Logger,
		Gate:    info.Gate,
		Now:     info.Now,
		Metrics: host.MetricLabels{Tenant: info.Tenant, Job: info.JobID, Node: info.Node, Subtask: info.Subtask},
	}
	inst, err := w.module.NewInstance(ctx, cfg)
	if err != nil {
		return err
	}
	w.inst = inst
	// One closure for the task's life: emitted records alias guest memory
	// and are copied into whichever batch is current.
	w.emit = func(recs []stream.Record) { w.out.AddRecords(recs) }
	if err := inst.Open(w.config); err != nil {
		return err
	}
	if w.swap != nil {
		// A new version is made on another goroutine, bound to the store
		// only when it is installed, on this one.
		cfg.State, cfg.Keyed = nil, st != nil
		w.swap.opened(ctx, cfg, inst.Declared())
	}
	return nil
}

// install makes p's instance the operator's (swapper). The store is the
// task's: a new version of a node that is not keyed has none.
func (w *wasmOperator) install(p *preparedSwap, wm int64) (*host.Instance, error) {
	old := w.inst
	w.inst, w.module, w.config = p.inst, p.module, p.config
	w.inst.SetWatermark(wm)
	return old, nil
}

func (w *wasmOperator) Process(_ context.Context, in, out *stream.Batch) error {
	w.out = out
	return w.inst.Process(in.Records, w.emit)
}

// ReleasesInput: the host copies the input into guest memory (or the
// fields it extracts) and what the module emits into out.
func (w *wasmOperator) ReleasesInput() bool { return true }

func (w *wasmOperator) Finish(_ context.Context, out *stream.Batch) error {
	w.out = out
	return w.inst.Finish(w.emit)
}

func (w *wasmOperator) Close() error {
	if w.inst == nil {
		return nil
	}
	return w.inst.Close()
}

// keyedWasmOperator is a Wasm operator on a keyed node: besides records, it
// is handed the watermark (which the guest reads with current_watermark)
// and the timers it set in the task's state store, as they become due.
type keyedWasmOperator struct {
	*wasmOperator
	timers bool // the module exports eddy_on_timer; without it, it can set none
	store  state.Store

	// The batch of timers being fired, reused: keys are copied into keys
	// (the store's are valid only during its callback), ends[i] is where
	// the key of timer i ends.
	keys    []byte
	ends    []int
	times   []int64
	recs    []stream.Record
	collect func(state.Timer) error
}

var (
	_ stream.WatermarkOperator      = (*keyedWasmOperator)(nil)
	_ stream.ProcessingTimeOperator = (*keyedWasmOperator)(nil)
)

// timerBatchSize is the most timers one eddy_on_timer call is handed.
const timerBatchSize = 256

// errTimerBatchFull stops PopTimers once a batch is full; the timers after
// it stay set, and the next PopTimers hands them over.
var errTimerBatchFull = errors.New("dataflow: timer batch full")

// Timer kinds as the guest sees them: the value of a fired timer's record.
var (
	eventTimeValue      = []byte{abi.TimerEventTime}
	processingTimeValue = []byte{abi.TimerProcessingTime}
)

// install binds p's instance to the task's store before it takes over:
// keyed state and timers stay, and so do the timers the old version set
// (the new one is handed them if it exports eddy_on_timer).
func (w *keyedWasmOperator) install(p *preparedSwap, wm int64) (*host.Instance, error) {
	if err := p.inst.BindState(w.store); err != nil {
		return nil, err
	}
	old, err := w.wasmOperator.install(p, wm)
	w.timers = p.module.HasOnTimer()
	return old, err
}

// ReleasesInput: as for wasmOperator, the host copies the input into
// guest memory; keyed state and timers are read and written with keys the
// guest passes from its own memory (host/keyed.go), which the store
// copies, never with the input's bytes. Said here on its own, so that a
// change to the embedded operator's answer is a decision for this one too.
func (w *keyedWasmOperator) ReleasesInput() bool { return true }

func (w *keyedWasmOperator) Open(ctx context.Context, info stream.TaskInfo) error {
	st, ok := info.State.(state.Store)
	if !ok {
		return fmt.Errorf("node %s: keyed Wasm operator without keyed state", info.Node)
	}
	w.store = st
	w.collect = w.collectTimer
	return w.wasmOperator.Open(ctx, info)
}

// ProcessWatermark sets the guest's watermark and fires the event-time
// timers it makes due.
func (w *keyedWasmOperator) ProcessWatermark(_ context.Context, wm int64, out *stream.Batch) error {
	w.inst.SetWatermark(wm)
	return w.fire(state.EventTime, wm, out)
}

// OnProcessingTime fires the processing-time timers due at now.
func (w *keyedWasmOperator) OnProcessingTime(_ context.Context, now int64, out *stream.Batch) error {
	return w.fire(state.ProcessingTime, now, out)
}

// fire hands the guest every timer of kind due at upTo, in batches of up to
// timerBatchSize in the store's order (by time). Timers the guest sets
// while handling them are fired too if they are due already, so it repeats
// until none is.
func (w *keyedWasmOperator) fire(kind state.TimerKind, upTo int64, out *stream.Batch) error {
	if !w.timers || w.store == nil {
		return nil
	}
	value := eventTimeValue
	if kind == state.ProcessingTime {
		value = processingTimeValue
	}
	for {
		w.keys, w.ends, w.times = w.keys[:0], w.ends[:0], w.times[:0]
		err := w.store.PopTimers(kind, upTo, w.collect)
		if err != nil && !errors.Is(err, errTimerBatchFull) {
			return fmt.Errorf("%s timers: %w", kind, err)
		}
		if len(w.ends) == 0 {
			return nil
		}
		w.recs = w.recs[:0]
		start := 0
		for i, end := range w.ends {
			w.recs = append(w.recs, stream.Record{Key: w.keys[start:end:end], Value: value, Timestamp: w.times[i]})
			start = end
		}
		w.out = out
		if err := w.inst.OnTimers(w.recs, w.emit); err != nil {
			return err
		}
	}
}

func (w *keyedWasmOperator) collectTimer(t state.Timer) error {
	w.keys = append(w.keys, t.Key...)
	w.ends = append(w.ends, len(w.keys))
	w.times = append(w.times, t.Timestamp)
	if len(w.ends) == timerBatchSize {
		return errTimerBatchFull
	}
	return nil
}

// twoInputWasmOperator is a keyed Wasm operator with two inputs (a module
// of ABI version 5 on a node with key_by: [left, right]): the task hands it
// each batch with its input's index, which eddy_process2 passes on. Keyed
// state and timers are the keyed operator's, one key space for both
// inputs; the watermark is the min of both, as for every operator.
type twoInputWasmOperator struct {
	*keyedWasmOperator
}

var _ stream.TwoInputOperator = (*twoInputWasmOperator)(nil)

func (w *twoInputWasmOperator) ProcessInput(_ context.Context, input int, in, out *stream.Batch) error {
	w.out = out
	return w.inst.ProcessInput(input, in.Records, w.emit)
}
