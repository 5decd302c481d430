package dataflow

// Hot swap, the dataflow's part (docs/rfcs/2026-12-02-hot-swap.md, steps
// 3 and 5): PrepareSwap instantiates and opens the new version of a node
// once per local task, on the caller's goroutine, and leaves it in the
// task's swap slot; at the aligned barrier of the swap's savepoint the
// task installs it, after its snapshot and before it forwards the
// barrier, so that every record before the barrier went through the old
// version and every record after it goes through the new one. Keyed state
// and timers stay where they are: they belong to the task's state store,
// addressed by operator uid (the node's name) and state name, which the
// new instance is bound to.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eddy-stream/eddy/host"
)

// Swap is one prepared replacement of a Wasm node's module.
type Swap struct {
	// ID names the swap (it increases per job): barriers of the swap's
	// savepoint carry it, and DropSwap discards by it.
	ID int64
	// Node is a Wasm node of the job (keyed or not).
	Node string
	// Module is the new version, compiled and validated (Engine.Load or
	// Compile).
	Module *host.Module
	// Config is the node's configuration for the new version, a JSON
	// object ("{}" when empty).
	Config []byte
	// AllowDroppedState lets the new version leave out states the running
	// one declared. Their entries stay in the task's store, unread; later
	// snapshots carry them on (see RATIONALE.md, "Dropped state stays").
	AllowDroppedState bool
}

// swapSlot is where a Wasm stage of one task meets PrepareSwap: the stage
// publishes what a new instance of its node needs once its own instance
// is open, PrepareSwap leaves prepared instances, and the task takes one
// at the swap's barrier.
type swapSlot struct {
	node string
	task string // the task's TaskSpec.ID, for errors
	// ready is closed once the fields under mu that the stage publishes
	// are set, or the task ended.
	ready     chan struct{}
	readyOnce sync.Once

	mu struct {
		sync.Mutex
		// ended: the task stopped; what is prepared was closed, and
		// nothing more may be.
		ended bool
		// ctx is the task's: a new instance lives as long as the task, and
		// its gate waits end with it; it also carries the tenant's
		// instance limits (host.WithInstanceLimits).
		ctx context.Context
		// cfg is the running instance's configuration (name, logger,
		// gate; Keyed on a keyed node, whose store is bound at install).
		cfg host.InstanceConfig
		// declared are the running instance's states.
		declared []host.StateDecl
		prepared map[int64]*preparedSwap
	}
}

// preparedSwap is an opened instance of a swap's new version, waiting
// for the barrier.
type preparedSwap struct {
	inst     *host.Instance
	module   *host.Module
	config   []byte
	declared []host.StateDecl
	dropped  []string // states of the running version it leaves unread
}

func newSwapSlot(node, task string) *swapSlot {
	s := &swapSlot{node: node, task: task, ready: make(chan struct{})}
	s.mu.prepared = map[int64]*preparedSwap{}
	return s
}

// opened publishes the running instance's configuration and states; the
// stage calls it once its instance opened.
func (s *swapSlot) opened(ctx context.Context, cfg host.InstanceConfig, declared []host.StateDecl) {
	s.mu.Lock()
	s.mu.ctx, s.mu.cfg, s.mu.declared = ctx, cfg, declared
	s.mu.Unlock()
	s.readyOnce.Do(func() { close(s.ready) })
}

// end closes what is prepared and refuses anything more: the task
// stopped.
func (s *swapSlot) end() {
	s.mu.Lock()
	s.mu.ended = true
	prepared := s.mu.prepared
	s.mu.prepared = nil
	s.mu.ctx = nil
	s.mu.Unlock()
	for _, p := range prepared {
		_ = p.inst.Close()
	}
	s.readyOnce.Do(func() { close(s.ready) })
}

// put leaves p for swap id, replacing (and closing) what an earlier call
// prepared for it. It fails, closing p, if the task ended.
func (s *swapSlot) put(id int64, p *preparedSwap) error {
	s.mu.Lock()
	if s.mu.ended {
		s.mu.Unlock()
		_ = p.inst.Close()
		return fmt.Errorf("node %s: task %s ended", s.node, s.task)
	}
	old := s.mu.prepared[id]
	s.mu.prepared[id] = p
	s.mu.Unlock()
	if old != nil {
		_ = old.inst.Close()
	}
	return nil
}

// drop closes what is prepared for swap id, if anything.
func (s *swapSlot) drop(id int64) {
	s.mu.Lock()
	p := s.mu.prepared[id]
	delete(s.mu.prepared, id)
	s.mu.Unlock()
	if p != nil {
		_ = p.inst.Close()
	}
}

// take hands the task what is prepared for swap id (nil if nothing) and
// closes what is prepared for older swaps, which can no longer happen;
// the slot then describes the new version, for the next swap.
func (s *swapSlot) take(id int64) *preparedSwap {
	s.mu.Lock()
	p := s.mu.prepared[id]
	var stale []*preparedSwap
	for k, q := range s.mu.prepared {
		if k <= id {
			delete(s.mu.prepared, k)
			if k < id {
				stale = append(stale, q)
			}
		}
	}
	if p != nil {
		s.mu.declared = p.declared
	}
	s.mu.Unlock()
	for _, q := range stale {
		_ = q.inst.Close()
	}
	return p
}

// swapSlots creates the slots of the Wasm nodes of the deployment's
// tasks, by node and, for each task, by node.
func (j *Job) swapSlots(dep *deployment) (byNode map[string][]*swapSlot, byTask map[string]map[string]*swapSlot) {
	byNode, byTask = map[string][]*swapSlot{}, map[string]map[string]*swapSlot{}
	for _, c := range j.chains {
		for s := 0; s < c.parallelism; s++ {
			id := c.taskID(s)
			if !dep.local[id] {
				continue
			}
			for _, v := range c.vertices {
				if !j.swappable(v) {
					continue
				}
				slot := newSwapSlot(v.node.Name, id)
				byNode[v.node.Name] = append(byNode[v.node.Name], slot)
				if byTask[id] == nil {
					byTask[id] = map[string]*swapSlot{}
				}
				byTask[id][v.node.Name] = slot
			}
		}
	}
	return byNode, byTask
}

// swappable: v runs a Wasm module as an operator (not a native one).
func (j *Job) swappable(v *vertex) bool {
	w := v.node.Wasm
	if w == nil {
		return false
	}
	_, native := j.opts.NativeOperators[w.Module]
	return !native
}

// checkSwapNode says why node cannot be swapped, if it cannot.
func (j *Job) checkSwapNode(node string) error {
	for _, v := range j.vertices {
		if v.node.Name != node {
			continue
		}
		if v.node.Wasm == nil {
			return fmt.Errorf("node %s is not a Wasm node", node)
		}
		if !j.swappable(v) {
			return fmt.Errorf("node %s runs a built-in operator, not a Wasm module", node)
		}
		return nil
	}
	return fmt.Errorf("job %s has no node %s", j.spec.Name, node)
}

// PrepareSwap prepares every local task of s.Node for swap s.ID: for
// each, a new instance of s.Module with the running instance's
// configuration (name, logger, gate, the tenant's limits), opened with
// s.Config — its eddy_open runs now, before the barrier, and cannot touch
// state — and its declared states checked against the running
// instance's (host.CheckStateCompat). It returns nil once every local
// task of the node holds a prepared instance (at once if the deployment
// has none), or the first refusal, one line a user can act on, in which
// case nothing of s stays prepared. A task still opening is waited for,
// as long as ctx allows.
//
// It runs on the caller's goroutine and never blocks the tasks; safe to
// call while they run. Preparing an id again replaces what was prepared.
func (r *Running) PrepareSwap(ctx context.Context, s Swap) error {
	if err := r.job.checkSwapNode(s.Node); err != nil {
		return err
	}
	if s.Module == nil {
		return fmt.Errorf("node %s: swap %d: no module", s.Node, s.ID)
	}
	if s.Module.IsAggregate() {
		return fmt.Errorf("node %s: module %s is an aggregate module, which folds windows: it cannot replace an operator", s.Node, s.Module.Name())
	}
	if n := r.job.spec.Node(s.Node); n != nil {
		if err := checkInputs(n, s.Module); err != nil {
			return fmt.Errorf("node %s: swap %d: %w", s.Node, s.ID, err)
		}
	}
	slots := r.swaps[s.Node]
	prepared := make([]*preparedSwap, 0, len(slots))
	fail := func(err error) error {
		for _, p := range prepared {
			_ = p.inst.Close()
		}
		r.DropSwap(s.ID) // an earlier preparation of the same id too
		return err
	}
	for _, slot := range slots {
		p, err := slot.prepare(ctx, s, r.done)
		if err != nil {
			return fail(err)
		}
		prepared = append(prepared, p)
	}
	for i, slot := range slots {
		if err := slot.put(s.ID, prepared[i]); err != nil {
			prepared = prepared[i+1:] // put closed its own; DropSwap those before
			return fail(err)
		}
	}
	return nil
}

// prepare makes one task's instance of s's new version.
func (slot *swapSlot) prepare(ctx context.Context, s Swap, runDone <-chan struct{}) (*preparedSwap, error) {
	select {
	case <-slot.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("node %s: task %s is not running yet: %w", s.Node, slot.task, ctx.Err())
	case <-runDone:
		return nil, fmt.Errorf("node %s: the deployment ended", s.Node)
	}
	slot.mu.Lock()
	ended, taskCtx, cfg, running := slot.mu.ended, slot.mu.ctx, slot.mu.cfg, slot.mu.declared
	slot.mu.Unlock()
	if ended {
		return nil, fmt.Errorf("node %s: task %s ended", s.Node, slot.task)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inst, err := s.Module.NewInstance(taskCtx, cfg)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", s.Node, err)
	}
	if err := inst.Open(s.Config); err != nil {
		_ = inst.Close()
		return nil, fmt.Errorf("node %s: %w", s.Node, err)
	}
	next := inst.Declared()
	if err := host.CheckStateCompat(running, next, s.AllowDroppedState); err != nil {
		_ = inst.Close()
		return nil, fmt.Errorf("node %s: %w", s.Node, err)
	}
	return &preparedSwap{inst: inst, module: s.Module, config: slices.Clone(s.Config), declared: next,
		dropped: host.DroppedStates(running, next)}, nil
}

// DropSwap discards what PrepareSwap prepared for swap id (a refused or
// abandoned swap), closing the instances. Unknown ids are ignored.
func (r *Running) DropSwap(id int64) {
	for _, slots := range r.swaps {
		for _, s := range slots {
			s.drop(id)
		}
	}
}

// swapper is a stage that can take a prepared instance: the Wasm
// operators.
type swapper interface {
	// install makes p's instance the stage's, at the task's watermark wm,
	// and returns the old instance, which the caller closes.
	install(p *preparedSwap, wm int64) (*host.Instance, error)
}

// installSwap is the swap at barrier b, on the task's goroutine, after
// its snapshot: the stage of b.swapNode takes the instance prepared for
// b.swapID. It returns the old instance, to be closed once the barrier
// went on, and the pause (from the barrier's start to now). A task with
// nothing prepared for the swap fails: it cannot run the version the
// savepoint is taken for (a restarted worker, say), and the coordinator
// restarts the attempt.
func (t *task) installSwap(b *barrier, start time.Time) (*host.Instance, time.Duration, error) {
	began := time.Now()
	slot := t.swaps[b.swapNode]
	p := slot.take(b.swapID)
	if p == nil {
		return nil, 0, mark(fmt.Errorf("node %s: swap %d was not prepared on this worker", b.swapNode, b.swapID), errFatal)
	}
	var sw swapper
	for _, st := range t.stages {
		if st.v.node.Name == b.swapNode {
			sw, _ = st.op.(swapper)
		}
	}
	if sw == nil { // cannot happen: slots are made for Wasm operators only
		_ = p.inst.Close()
		return nil, 0, mark(fmt.Errorf("node %s: swap %d: the node's operator cannot be swapped", b.swapNode, b.swapID), errFatal)
	}
	old, err := sw.install(p, t.wm)
	if err != nil {
		_ = p.inst.Close()
		return nil, 0, mark(fmt.Errorf("node %s: swap %d: %w", b.swapNode, b.swapID, err), errFatal)
	}
	now := time.Now()
	pause := now.Sub(start)
	// install is the switch alone; the pause adds the alignment and the
	// capture before it.
	attrs := []any{"node", b.swapNode, "swap", b.swapID, "checkpoint", b.id, "module", p.module.Name(), "pause", pause, "install", now.Sub(began)}
	if len(p.dropped) > 0 {
		attrs = append(attrs, "dropped_states", p.dropped)
	}
	t.log.Info("module swapped", attrs...)
	return old, pause, nil
}

// setSwapSlot gives a Wasm operator its swap slot.
func setSwapSlot(op any, slot *swapSlot) {
	switch w := op.(type) {
	case *wasmOperator:
		w.swap = slot
	case *keyedWasmOperator:
		w.swap = slot
	case *twoInputWasmOperator:
		w.swap = slot
	}
}
