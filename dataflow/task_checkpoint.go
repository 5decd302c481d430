package dataflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// mailbox carries a running deployment's checkpoint triggers and
// completions to one task, whose goroutine reads them between two
// batches: operators, sources and sinks are only ever called from there.
type mailbox struct {
	mu       sync.Mutex
	triggers []Trigger
	complete int64
	took     []takenCheckpoint // durable snapshots, for a listening source
	signal   chan struct{}     // one pending wake-up
}

type takenCheckpoint struct {
	id  int64
	pos []byte
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

func (mb *mailbox) post(f func()) {
	mb.mu.Lock()
	f()
	mb.mu.Unlock()
	select {
	case mb.signal <- struct{}{}:
	default:
	}
}

func (mb *mailbox) trigger(t Trigger) { mb.post(func() { mb.triggers = append(mb.triggers, t) }) }

func (mb *mailbox) completed(id int64) { mb.post(func() { mb.complete = max(mb.complete, id) }) }

// taken tells the task that its snapshot of checkpoint id, in which its
// source was at pos, is durable (the upload's goroutine, before it
// acknowledges).
func (mb *mailbox) taken(id int64, pos []byte) {
	mb.post(func() { mb.took = append(mb.took, takenCheckpoint{id, pos}) })
}

func (mb *mailbox) take() ([]Trigger, int64, []takenCheckpoint) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	ts, took := mb.triggers, mb.took
	mb.triggers, mb.took = nil, nil
	return ts, mb.complete, took
}

// checkMailbox reads the mailbox if something was posted.
func (t *task) checkMailbox(ctx context.Context) error {
	if t.mailbox == nil {
		return nil
	}
	select {
	case <-t.mailbox.signal:
		return t.readMailbox(ctx)
	default:
		return nil
	}
}

// readMailbox tells a listening source of the checkpoints whose snapshot
// became durable, commits the sink up to the newest completed checkpoint,
// tells a listening source of it, and injects the barriers of new
// triggers (source tasks), in order. A checkpoint's snapshot is posted as
// taken before the task acknowledges it, so before it can complete: the
// source hears of it first.
func (t *task) readMailbox(ctx context.Context) error {
	triggers, complete, took := t.mailbox.take()
	for _, tc := range took {
		if t.listener != nil {
			t.listener.CheckpointTaken(tc.id, tc.pos)
		}
	}
	if complete > t.committed && t.sinkTx != nil {
		if err := t.sinkTx.Commit(ctx, complete); err != nil {
			return fmt.Errorf("%s: commit checkpoint %d: %w", t.sinkNode, complete, err)
		}
		t.job.log.Debug("sink committed", "task", t.name, "checkpoint", complete)
	}
	if complete > t.committed && t.listener != nil {
		if err := t.listener.CheckpointCompleted(ctx, complete); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Informational (see CheckpointListener): the checkpoint is
			// what a restore reads.
			t.job.log.Warn("source could not act on a completed checkpoint", "task", t.name, "checkpoint", complete, "err", err)
		}
	}
	t.committed = max(t.committed, complete)
	for _, tr := range triggers {
		if t.source == nil || tr.ID <= t.injected {
			continue
		}
		t.injected = tr.ID
		now := time.Now()
		b := &barrier{id: tr.ID, savepoint: tr.Savepoint, triggered: now.UnixMilli(), swapID: tr.SwapID, swapNode: tr.SwapNode}
		if err := t.checkpoint(ctx, b, now); err != nil {
			return err
		}
	}
	return nil
}

// alignedCheckpoint takes the checkpoint whose barrier every input
// channel delivered, then replays what alignment held back.
func (t *task) alignedCheckpoint(ctx context.Context) error {
	b := t.align.cur
	if err := t.checkpoint(ctx, &b, t.alignStart); err != nil {
		return err
	}
	t.align.release()
	return nil
}

// errFatal marks a snapshot failure the task cannot go on from: the
// source or sink is in an unknown state. Other failures (storage down)
// only decline the checkpoint.
var errFatal = errors.New("fatal")

// checkpoint takes the synchronous part of the task's snapshot at barrier
// b (capture), forwards b on every output at once and goes on; the
// upload, the task manifest and the acknowledgement follow on the task's
// uploads goroutine. A snapshot that fails for want of storage declines
// the checkpoint (logged; it never completes) and the task goes on.
//
// At a swap's barrier, the task of the swap's node installs the new
// version between its capture and the broadcast (installSwap). It cannot
// decline that checkpoint and go on: the swap would then have happened at
// no savepoint, so a failed capture fails the task (the coordinator
// restarts the attempt from the latest completed checkpoint, with the old
// version).
func (t *task) checkpoint(ctx context.Context, b *barrier, start time.Time) error {
	swapping := t.swaps[b.swapNode] != nil // a task of the swap's node
	var retired *host.Instance
	if t.cp != nil {
		s, err := t.capture(ctx, b, start)
		switch {
		case err == nil:
			if swapping {
				if retired, s.swapPause, err = t.installSwap(b, start); err != nil {
					s.discard()
					t.uploads.release()
					return err
				}
			}
			t.uploads.start(s)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errFatal):
			return err
		case swapping:
			return mark(fmt.Errorf("node %s: swap %d: checkpoint %d: %w", b.swapNode, b.swapID, b.id, err), errFatal)
		default:
			t.job.log.Warn("checkpoint declined", "task", t.name, "checkpoint", b.id, "err", err)
		}
	}
	err := t.broadcast(ctx, message{kind: msgBarrier, barrier: b})
	if retired != nil {
		// After the broadcast: closing the old version holds up nothing
		// downstream. It is not Finished: eddy_close is the end of the
		// input, which this is not.
		if cerr := retired.Close(); cerr != nil {
			t.log.Warn("close the swapped-out instance", "err", cerr)
		}
	}
	return err
}

// capture is the synchronous part of the task's snapshot of checkpoint b,
// taken at the barrier, before the task forwards it or processes anything
// after it: the source's position, the sink's PreCommit (which must stage
// exactly the output before the barrier), and a capture of the keyed
// state of every keyed node (state.CaptureSnapshot: a Pebble checkpoint,
// or the entries of the memory backend in a local file). It first waits
// for room among the task's uploads (maxUploads).
func (t *task) capture(ctx context.Context, b *barrier, start time.Time) (_ *pendingSnapshot, err error) {
	began := time.Now()
	if err := t.uploads.reserve(ctx, b.id); err != nil {
		return nil, err
	}
	s := &pendingSnapshot{id: b.id, start: start, manifest: checkpoint.TaskManifest{Version: checkpoint.Version, Checkpoint: b.id, Savepoint: b.savepoint, Task: t.id,
		Subtask: t.subtask, Parallelism: t.chain.parallelism, Watermark: t.wm, Nodes: map[string]checkpoint.NodeSnapshot{}}}
	defer func() {
		if err != nil {
			s.discard()
			t.uploads.release()
		}
	}()
	m := &s.manifest
	if t.source != nil {
		head := t.chain.head()
		pos, err := t.source.(stream.Checkpointed).Position() // checked at open
		if err != nil {
			return nil, mark(fmt.Errorf("checkpoint %d: source %s: position: %w", b.id, head.node.Name, err), errFatal)
		}
		// Cloned, as the staged names: the upload reads them on another
		// goroutine while the source and sink go on.
		m.Source = &checkpoint.SourceSnapshot{Node: head.node.Name, Subtask: t.subtask, Parallelism: head.parallelism, Position: bytes.Clone(pos), MaxTimestamp: t.maxTs}
	}
	if t.sinkTx != nil {
		staged, err := t.sinkTx.PreCommit(ctx, b.id)
		if err != nil {
			return nil, mark(fmt.Errorf("checkpoint %d: sink %s: pre-commit: %w", b.id, t.sinkNode, err), errFatal)
		}
		m.Sink = &checkpoint.SinkSnapshot{Node: t.sinkNode, Staged: slices.Clone(staged)}
	}
	k := 0
	for _, v := range t.chain.vertices {
		m.Nodes[v.node.Name] = checkpoint.NodeSnapshot{}
		if !v.node.Keyed() {
			continue
		}
		c, err := stateSnapshots.capture(ctx, t.stores[k])
		k++
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: state of %s: %w", b.id, v.node.Name, err)
		}
		s.states = append(s.states, nodeCapture{node: v.node.Name, capture: c})
	}
	s.sync = time.Since(began)
	return s, nil
}

// restoreErr marks a failure to read the checkpoint a task restores from.
func (t *task) restoreErr(err error) error {
	return &checkpoint.RestoreError{Checkpoint: t.restore.id, Err: err}
}

// restoreSource checks that a checkpointing task's source can be rewound
// and, when restoring, seeks it to its subtask's position.
func (t *task) restoreSource(v *vertex) error {
	if t.cp == nil {
		return nil
	}
	src, ok := t.source.(stream.Checkpointed)
	if !ok {
		return fmt.Errorf("source %s cannot be rewound (its connector does not implement checkpoints): run the job without checkpoints", v.node.Name)
	}
	if t.restore == nil {
		return nil
	}
	var found *checkpoint.SourceSnapshot
	known := false
	for _, m := range t.restore.manifests {
		if s := m.Source; s != nil && s.Node == v.node.Name {
			known = true
			if s.Subtask == t.subtask {
				found = s
				break
			}
		}
	}
	switch {
	case found != nil:
	case known:
		return t.restoreErr(fmt.Errorf("source %s: no position for subtask %d", v.node.Name, t.subtask))
	default:
		return nil // a source the checkpoint does not know starts from its beginning
	}
	if err := src.Seek(found.Position); err != nil {
		return t.restoreErr(fmt.Errorf("source %s: seek: %w", v.node.Name, err))
	}
	t.maxTs = found.MaxTimestamp
	return nil
}

// restoreState loads into st the state of v from every task manifest whose
// key groups overlap st's.
func (t *task) restoreState(ctx context.Context, v *vertex, st state.Store) error {
	if t.restore == nil {
		return nil
	}
	maxP := t.job.spec.MaxParallelism
	mine := state.KeyGroupRange(t.subtask, v.parallelism, maxP)
	var raws []json.RawMessage
	for _, m := range t.restore.manifests {
		ns, ok := m.Nodes[v.node.Name]
		if !ok || len(ns.State) == 0 {
			continue
		}
		theirs := state.KeyGroupRange(m.Subtask, m.Parallelism, maxP)
		if theirs.Start < mine.End && mine.Start < theirs.End {
			raws = append(raws, ns.State)
		}
	}
	if len(raws) == 0 {
		return nil
	}
	if err := stateSnapshots.restore(ctx, st, t.cp.Store, t.restore.prefix, raws); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return t.restoreErr(fmt.Errorf("state of %s: %w", v.node.Name, err))
	}
	return nil
}

// restoreSink brings a staging sink's output back to the checkpoint:
// what the subtasks whose output this one takes over (old subtask i mod
// the parallelism) staged is published, anything newer dropped.
func (t *task) restoreSink(ctx context.Context) error {
	if t.sinkTx == nil {
		return nil
	}
	var staged []string
	if t.restore != nil {
		p := t.chain.parallelism
		for _, m := range t.restore.manifests {
			if s := m.Sink; s != nil && s.Node == t.sinkNode && m.Subtask%p == t.subtask {
				staged = append(staged, s.Staged...)
			}
		}
	}
	if err := t.sinkTx.Abort(ctx, staged); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if t.restore == nil {
			return fmt.Errorf("%s: discard output of an earlier attempt: %w", t.sinkNode, err)
		}
		return t.restoreErr(fmt.Errorf("sink %s: %w", t.sinkNode, err))
	}
	t.committed = t.restoredID()
	return nil
}

func (t *task) restoredID() int64 {
	if t.restore == nil {
		return 0
	}
	return t.restore.id
}

// restoreWatermark is the event time a restored task starts at: the
// lowest of the watermarks of the tasks of the checkpoint that ran its
// head node over (some of) the same input — the same subtask at the same
// parallelism, else those whose key groups overlap (keyed), else all.
func (t *task) restoreWatermark() int64 {
	if t.restore == nil {
		return math.MinInt64
	}
	head := t.chain.head()
	maxP := t.job.spec.MaxParallelism
	wm, found := int64(math.MaxInt64), false
	for _, m := range t.restore.manifests {
		if _, ok := m.Nodes[head.node.Name]; !ok {
			continue
		}
		switch {
		case m.Parallelism == t.chain.parallelism:
			if m.Subtask != t.subtask {
				continue
			}
		case head.node.Keyed():
			mine := state.KeyGroupRange(t.subtask, t.chain.parallelism, maxP)
			theirs := state.KeyGroupRange(m.Subtask, m.Parallelism, maxP)
			if theirs.Start >= mine.End || mine.Start >= theirs.End {
				continue
			}
		}
		wm, found = min(wm, m.Watermark), true
	}
	if !found || wm == math.MaxInt64 {
		return math.MinInt64
	}
	return wm
}
