package worker

import (
	"errors"
	"fmt"

	"github.com/eddy-stream/eddy/dataflow"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// Hot swap, the worker's part (docs/rfcs/2026-12-02-hot-swap.md): the
// leader lists the swaps to prepare in every heartbeat answer while they
// are being prepared; the worker prepares each once, in the background
// (fetch, compile, instantiate and open per task, compare the declared
// states), and reports the outcome in every heartbeat while the leader
// still lists it. The tasks install what was prepared at the barrier of
// the swap savepoint.

// preparedSwap is a swap this worker was asked to prepare for one
// deployment.
type preparedSwap struct {
	attempt uint32
	done    bool   // prepared or refused
	reason  string // why refused; empty once prepared
	// triggered: a trigger of the swap's savepoint reached the
	// deployment, which now consumes what was prepared at the barrier.
	triggered bool
}

// applySwaps starts preparing the swaps of resp not seen yet, and drops
// those the leader no longer lists and never triggered (refused, timed
// out, or given up). Called by apply with w.mu held.
func (w *Worker) applySwaps(resp *eddyv1.HeartbeatResponse) []func() {
	listed := map[jobAttempt]map[uint64]bool{}
	var start []func()
	for _, sp := range resp.GetPrepareSwaps() {
		key := jobAttempt{sp.GetJobId(), sp.GetAttempt()}
		if listed[key] == nil {
			listed[key] = map[uint64]bool{}
		}
		listed[key][sp.GetSwapId()] = true
		r := w.jobs[key]
		if r == nil || r.run == nil || isClosed(r.done) {
			continue // not started yet: the next answer repeats it
		}
		if r.swaps == nil {
			r.swaps = map[uint64]*preparedSwap{}
		}
		if r.swaps[sp.GetSwapId()] != nil {
			continue
		}
		ps := &preparedSwap{attempt: sp.GetAttempt()}
		r.swaps[sp.GetSwapId()] = ps
		start = append(start, func() { w.prepareSwap(r, ps, sp) })
	}
	for _, tr := range resp.GetTriggerCheckpoints() {
		if id := tr.GetSwapId(); id != 0 {
			key := jobAttempt{tr.GetJobId(), tr.GetAttempt()}
			if listed[key] == nil {
				listed[key] = map[uint64]bool{}
			}
			listed[key][id] = true
			if r := w.jobs[key]; r != nil && r.swaps[id] != nil {
				r.swaps[id].triggered = true
			}
		}
	}
	for key, r := range w.jobs {
		for id, ps := range r.swaps {
			if listed[key][id] || !ps.done {
				continue
			}
			delete(r.swaps, id)
			if !ps.triggered && r.run != nil {
				run := r.run
				start = append(start, func() { run.DropSwap(int64(id)) })
			}
		}
	}
	return start
}

// prepareSwap fetches and compiles the swap's module and prepares every
// local task of its node, then reports the outcome with the next
// heartbeat.
func (w *Worker) prepareSwap(r *running, ps *preparedSwap, sp *eddyv1.SwapPrepare) {
	log := w.log.With("job", sp.GetJobId(), "attempt", sp.GetAttempt(), "swap", sp.GetSwapId(), "node", sp.GetNode())
	err := func() error {
		m, err := w.module(r.ctx, sp.GetJobId(), sp.GetModule())
		if err != nil {
			return err
		}
		return r.run.PrepareSwap(r.ctx, dataflow.Swap{ID: int64(sp.GetSwapId()), Node: sp.GetNode(), Module: m,
			Config: sp.GetConfigJson(), AllowDroppedState: sp.GetAllowDroppedState()})
	}()
	if err != nil && r.ctx.Err() != nil {
		err = errors.New("the deployment ended while the swap was being prepared")
	}
	w.mu.Lock()
	ps.done = true
	if err != nil {
		ps.reason = oneLine(err.Error())
	}
	w.mu.Unlock()
	if err != nil {
		log.Warn("swap refused", "err", err)
	} else {
		log.Info("swap prepared", "module", sp.GetModule().GetRef())
	}
	w.kick()
}

// swapReports lists the outcomes of the swaps prepared so far, for the
// next heartbeat. Called with w.mu held.
func (w *Worker) swapReports() []*eddyv1.SwapPrepared {
	var out []*eddyv1.SwapPrepared
	for key, r := range w.jobs {
		for id, ps := range r.swaps {
			if ps.done {
				out = append(out, &eddyv1.SwapPrepared{JobId: key.job, Attempt: key.attempt, SwapId: id, Ok: ps.reason == "", Reason: ps.reason})
			}
		}
	}
	return out
}

// oneLine keeps the first line of a message, as the user sees it.
func oneLine(msg string) string {
	for i := 0; i < len(msg); i++ {
		if msg[i] == '\n' {
			return fmt.Sprintf("%s …", msg[:i])
		}
	}
	return msg
}
