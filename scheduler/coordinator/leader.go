package coordinator

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/scheduler/raftnode"
)

// term is one period of leadership: the leader's loops and its in-memory
// view of the workers, which is not replicated (heartbeats are not Raft
// commands) and starts empty at every election.
type term struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed once the barrier passed and since is set
	done   chan struct{} // closed when the loops have returned

	since time.Time // written before ready is closed, read-only after

	mu      sync.Mutex
	workers map[string]*workerView
	// ended keeps the last report of tasks that reached a terminal state,
	// after their workers stopped reporting them (released), so that
	// JobStatus still shows how they ended and their final metrics; the
	// oldest entries go beyond maxEnded.
	ended      map[taskKey]*eddyv1.TaskReport
	endedOrder []taskKey

	// The checkpoint coordinator's view (checkpoint.go), by job id: the
	// checkpoints in flight this term triggered and their
	// acknowledgements; since when each running job's tasks all run; the
	// jobs whose checkpoint files are being written or deleted, and those
	// whose old files could not be deleted (with when to try again); the
	// savepoints that TriggerSavepoint calls wait for.
	inFlight     map[string]*inFlight
	runningSince map[string]runningSince
	busy         map[string]bool
	collectAfter map[string]time.Time
	waiters      map[string]map[*savepointWaiter]bool
	// swaps holds what the workers reported of the swaps in flight.
	swaps map[swapKey]map[string]swapReport
	// kick wakes the leader's loop for something that is not a change of
	// the FSM (the last acknowledgement of a checkpoint, a savepoint
	// request, the end of checkpoint I/O).
	kick chan struct{}
	// io counts the term's checkpoint I/O goroutines; the term ends after
	// them.
	io sync.WaitGroup
}

// inFlight is a checkpoint in flight that this term triggered.
type inFlight struct {
	id   uint64
	acks map[string]checkpointAck // by task
}

type runningSince struct {
	attempt int
	since   time.Time
}

// savepointWaiter is a TriggerSavepoint call waiting for a savepoint with
// an id above after.
type savepointWaiter struct{ after uint64 }

// maxEnded bounds term.ended.
const maxEnded = 1 << 14

// workerView is what the leader heard from one worker process.
type workerView struct {
	instance string
	lastSeen time.Time
	reports  []*eddyv1.TaskReport // of the latest heartbeat
}

func newTerm(ctx context.Context, cancel context.CancelFunc) *term {
	return &term{
		ctx:     ctx,
		cancel:  cancel,
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		workers: map[string]*workerView{},
		ended:   map[taskKey]*eddyv1.TaskReport{},

		inFlight:     map[string]*inFlight{},
		runningSince: map[string]runningSince{},
		busy:         map[string]bool{},
		collectAfter: map[string]time.Time{},
		waiters:      map[string]map[*savepointWaiter]bool{},
		swaps:        map[swapKey]map[string]swapReport{},
		kick:         make(chan struct{}, 1),
	}
}

// wake wakes the leader's loop.
func (t *term) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// beginCheckpoint records that this term triggers checkpoint id of job
// (before the trigger is committed: acknowledgements can only follow it).
func (t *term) beginCheckpoint(job string, id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight[job] = &inFlight{id: id, acks: map[string]checkpointAck{}}
}

// ack records a task's acknowledgement of checkpoint id of job. It returns
// false when this term did not trigger that checkpoint, and how many tasks
// acknowledged it so far.
func (t *term) ack(job string, id uint64, task string, a checkpointAck) (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.inFlight[job]
	if f == nil || f.id != id {
		return false, 0
	}
	f.acks[task] = a
	return true, len(f.acks)
}

// acks returns the acknowledgements of checkpoint id of job.
func (t *term) acks(job string, id uint64) map[string]checkpointAck {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.inFlight[job]
	if f == nil || f.id != id {
		return nil
	}
	return maps.Clone(f.acks)
}

// checkpointView copies what decideCheckpoints needs of the term.
func (t *term) checkpointView(now time.Time, jobs []fsm.Job, idx reportIndex) checkpointRound {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := checkpointRound{
		now:          now,
		jobs:         jobs,
		running:      map[string]time.Time{},
		inFlight:     make(map[string]inFlightView, len(t.inFlight)),
		savepoints:   map[string]bool{},
		busy:         maps.Clone(t.busy),
		collectAfter: maps.Clone(t.collectAfter),
	}
	for i := range jobs {
		j := &jobs[i]
		if j.State == fsm.JobRunning && apiJobState(j, idx) == eddyv1.JobState_JOB_STATE_RUNNING {
			rs, ok := t.runningSince[j.ID]
			if !ok || rs.attempt != j.Attempt {
				rs = runningSince{attempt: j.Attempt, since: now}
				t.runningSince[j.ID] = rs
			}
			r.running[j.ID] = rs.since
		} else {
			delete(t.runningSince, j.ID)
		}
		last := lastSavepointID(j)
		for w := range t.waiters[j.ID] {
			if w.after >= last {
				r.savepoints[j.ID] = true
			}
		}
	}
	pending := make(map[string]uint64, len(jobs))
	for i := range jobs {
		if p := jobs[i].PendingCheckpoint; p != nil {
			pending[jobs[i].ID] = p.ID
		}
	}
	for job, f := range t.inFlight {
		if pending[job] != f.id {
			delete(t.inFlight, job) // ended (a new trigger registers again)
			continue
		}
		acked := make(map[string]bool, len(f.acks))
		for task := range f.acks {
			acked[task] = true
		}
		r.inFlight[job] = inFlightView{id: f.id, acked: acked}
	}
	return r
}

// startIO marks job busy with checkpoint I/O; false if it already is.
func (t *term) startIO(job string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy[job] {
		return false
	}
	t.busy[job] = true
	return true
}

// endIO ends job's checkpoint I/O; a non-zero retry postpones the next
// collection of its old files.
func (t *term) endIO(job string, retry time.Time) {
	t.mu.Lock()
	delete(t.busy, job)
	if retry.IsZero() {
		delete(t.collectAfter, job)
	} else {
		t.collectAfter[job] = retry
	}
	t.mu.Unlock()
	t.wake()
}

// waitSavepoint registers a TriggerSavepoint call waiting for a savepoint
// of job with an id above after; the returned function unregisters it.
func (t *term) waitSavepoint(job string, after uint64) func() {
	w := &savepointWaiter{after: after}
	t.mu.Lock()
	if t.waiters[job] == nil {
		t.waiters[job] = map[*savepointWaiter]bool{}
	}
	t.waiters[job][w] = true
	t.mu.Unlock()
	t.wake()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.waiters[job], w)
		if len(t.waiters[job]) == 0 {
			delete(t.waiters, job)
		}
	}
}

// registered starts a fresh view of a worker process.
func (t *term) registered(worker, instance string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.workers[worker] = &workerView{instance: instance, lastSeen: at}
}

// heard records a heartbeat.
func (t *term) heard(worker, instance string, at time.Time, reports []*eddyv1.TaskReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.workers[worker] = &workerView{instance: instance, lastSeen: at, reports: reports}
	for _, r := range reports {
		if !terminalTask(r.GetState()) {
			continue
		}
		k := keyOf(r.GetTask())
		if _, ok := t.ended[k]; !ok {
			t.endedOrder = append(t.endedOrder, k)
		}
		t.ended[k] = r
	}
	for len(t.endedOrder) > maxEnded {
		delete(t.ended, t.endedOrder[0])
		t.endedOrder = t.endedOrder[1:]
	}
}

func (t *term) lastSeen() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.workers))
	for id, v := range t.workers {
		out[id] = v.lastSeen
	}
	return out
}

func (t *term) lastHeartbeat(worker string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.workers[worker]; ok {
		return v.lastSeen
	}
	return time.Time{}
}

// index collects the latest reports of the workers that the FSM counts as
// alive in the same process instance (a lost worker's reports are stale),
// over the terminal reports kept after their release.
func (t *term) index(workers []fsm.Worker) reportIndex {
	idx := newReportIndex()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.ended {
		idx.add(r)
	}
	for _, w := range workers {
		v, ok := t.workers[w.ID]
		if !ok || w.State != fsm.WorkerAlive || v.instance != w.Incarnation {
			continue
		}
		for _, r := range v.reports {
			idx.add(r)
		}
	}
	return idx
}

// maxIdle bounds how long the leader's loop sleeps when nothing is timed:
// a safety net, since every change of the FSM wakes it anyway.
const maxIdle = time.Second

// lead runs the leader's loops for one term: after a barrier (so that the
// FSM holds everything the previous leaders committed), it registers this
// member's API address and then decides and proposes, round after round,
// whenever the FSM changes or a timer (a worker's heartbeat deadline, a
// job's restart backoff) expires.
func (c *Coordinator) lead(t *term) {
	defer close(t.done)
	defer t.io.Wait() // the term's context is canceled: they end soon
	if !c.barrier(t) {
		return
	}
	t.since = c.now()
	// Before the term serves calls: the first ones may use the token.
	c.bootstrapToken(t.ctx)
	close(t.ready)
	c.health.SetServingStatus(eddyv1.Cluster_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	c.registerSelf(t.ctx)

	var backoff time.Duration
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		changed := c.fsm.Changed()
		p := c.round(t)
		applied, err := c.applyAll(t.ctx, t, p.commands)
		if t.ctx.Err() != nil {
			return
		}
		var wait time.Duration
		switch {
		case err != nil:
			// A refused decision means this leader's view was off (or Raft
			// is in trouble); a refused command also changes the FSM's
			// index, so back off instead of deciding the same again.
			backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
			wait = backoff
			changed = nil
			c.log.Warn("leader decision not applied", "err", err, "retry_in", wait)
		case applied > 0:
			backoff = 0
			continue
		default:
			backoff = 0
			// The state settled: start the checkpoint I/O it calls for.
			c.startCheckpointIO(t, p.finalize, p.collect)
			wait = maxIdle
			if !p.wakeAt.IsZero() {
				wait = min(wait, max(p.wakeAt.Sub(c.now()), time.Millisecond))
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-t.ctx.Done():
			return
		case <-changed:
		case <-timer.C:
		case <-t.kick:
		}
	}
}

// collectRetry is how long the leader waits before it tries again to
// delete the files of old checkpoints after a failure.
const collectRetry = 5 * time.Second

// startCheckpointIO starts, each in a goroutine of the term, the
// finalization of checkpoints and the collection of old checkpoint files
// that a round asked for, skipping jobs that have I/O running already.
func (c *Coordinator) startCheckpointIO(t *term, finalize, collect []string) {
	for _, job := range finalize {
		if !t.startIO(job) {
			continue
		}
		t.io.Add(1)
		go func() {
			defer t.io.Done()
			c.finalizeCheckpoint(t.ctx, t, job)
			t.endIO(job, time.Time{})
		}()
	}
	for _, job := range collect {
		if !t.startIO(job) {
			continue
		}
		t.io.Add(1)
		go func() {
			defer t.io.Done()
			var retry time.Time
			if err := c.collectCheckpoints(t.ctx, job); err != nil && t.ctx.Err() == nil {
				retry = c.now().Add(collectRetry)
				c.log.Warn("old checkpoint files not deleted", "job", job, "err", err, "retry_in", collectRetry)
			}
			t.endIO(job, retry)
		}()
	}
}

// barrier waits until the FSM holds every committed entry; false when the
// term ended first.
func (c *Coordinator) barrier(t *term) bool {
	for {
		err := c.node.Barrier(t.ctx)
		if err == nil {
			return true
		}
		if t.ctx.Err() != nil || errors.Is(err, raftnode.ErrNotLeader) || errors.Is(err, raftnode.ErrShutdown) {
			return false
		}
		c.log.Warn("barrier after election", "err", err)
		select {
		case <-t.ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// round gathers the input of one round of decisions and runs them: the
// scheduling decisions first; when they decide nothing, the checkpoint
// decisions (otherwise those wait for the next round, which sees the
// state the scheduling commands made).
func (c *Coordinator) round(t *term) plan {
	now := c.now()
	workers := c.fsm.Workers()
	jobs := c.fsm.AllJobs()
	p := decide(round{
		now:      now,
		since:    t.since,
		workers:  workers,
		jobs:     jobs,
		lastSeen: t.lastSeen(),
		timeout:  c.cfg.HeartbeatTimeout,
		restart:  c.cfg.Restart,
		quotas:   quotasOf(c.fsm.Tenants()),
	})
	if len(p.commands) > 0 {
		return p
	}
	swapCmds, ready, swapWake := decideSwaps(now, jobs, t.swapView(jobs), c.swapWorkers)
	if !swapWake.IsZero() {
		p.wake(swapWake)
	}
	if len(swapCmds) > 0 {
		p.commands = swapCmds
		return p
	}
	r := t.checkpointView(now, jobs, t.index(workers))
	r.swapReady = ready
	r.configs = make(map[string]checkpointConfig, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if j.State.Terminal() && j.PendingCheckpoint == nil && len(j.CheckpointsToDelete) == 0 {
			continue
		}
		if cfg, err := c.checkpointConfig(j); err == nil {
			r.configs[j.ID] = cfg
		}
	}
	cp := decideCheckpoints(r)
	p.commands = cp.commands
	p.finalize, p.collect = cp.finalize, cp.collect
	if !cp.wakeAt.IsZero() {
		p.wake(cp.wakeAt)
	}
	return p
}

// applyAll proposes cmds in order and returns how many were applied; it
// stops at the first refusal or failure.
func (c *Coordinator) applyAll(ctx context.Context, t *term, cmds []fsm.Command) (int, error) {
	for i, cmd := range cmds {
		if tc, ok := cmd.(*fsm.TriggerCheckpoint); ok {
			t.beginCheckpoint(tc.JobID, tc.ID)
		}
		if _, err := c.propose(ctx, cmd); err != nil {
			return i, err
		}
		c.logDecision(cmd)
	}
	return len(cmds), nil
}

func (c *Coordinator) logDecision(cmd fsm.Command) {
	switch cmd := cmd.(type) {
	case *fsm.WorkerDown:
		c.log.Warn("worker lost", "worker", cmd.ID, "reason", cmd.Reason)
	case *fsm.PlaceJob:
		c.log.Info("job placed", "job", cmd.JobID, "attempt", cmd.Attempt, "tasks", len(cmd.Deployment))
	case *fsm.JobWaiting:
		c.log.Info("job waiting", "job", cmd.JobID, "message", cmd.Message)
	case *fsm.FailJob:
		c.log.Warn("job failed", "job", cmd.JobID, "message", cmd.Message)
	case *fsm.TriggerCheckpoint:
		c.log.Info("checkpoint triggered", "job", cmd.JobID, "attempt", cmd.Attempt, "checkpoint", cmd.ID, "savepoint", cmd.Savepoint, "swap", cmd.Swap)
	case *fsm.EndSwap:
		c.log.Warn("swap ended", "job", cmd.JobID, "swap", cmd.SwapID, "state", cmd.State, "reason", cmd.Reason)
	case *fsm.CheckpointFailed:
		c.log.Warn("checkpoint failed", "job", cmd.JobID, "checkpoint", cmd.ID, "reason", cmd.Reason)
	}
}

// registerSelf records this member's addresses in the FSM if they are not
// there yet (or changed): followers find the leader's API address there.
func (c *Coordinator) registerSelf(ctx context.Context) {
	if co, err := c.fsm.Coordinator(c.cfg.NodeID); err == nil && co.APIAddress == c.addr && co.RaftAddress == c.node.Addr() {
		return
	}
	_, err := c.propose(ctx, &fsm.RegisterCoordinator{ID: c.cfg.NodeID, RaftAddress: c.node.Addr(), APIAddress: c.addr})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("register this coordinator", "err", err)
	}
}

// keepRegistered runs on every member: when this member is in the Raft
// configuration but the FSM does not hold its current addresses (it
// restarted with another API port, or its join was committed only half),
// it asks the leader to record them, as a join would.
func (c *Coordinator) keepRegistered() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
		if co, err := c.fsm.Coordinator(c.cfg.NodeID); err == nil && co.APIAddress == c.addr && co.RaftAddress == c.node.Addr() {
			continue
		}
		if c.node.IsLeader() {
			// The term registers the leader when it starts; this retries
			// if that failed.
			c.registerSelf(c.ctx)
			continue
		}
		servers, err := c.node.Servers()
		if err != nil || !containsServer(servers, c.cfg.NodeID) {
			continue
		}
		_, leaderAddr := c.leaderAPI()
		if leaderAddr == "" || leaderAddr == c.addr {
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		err = c.askToJoin(ctx, leaderAddr)
		cancel()
		if err != nil {
			c.log.Debug("re-register with the leader", "err", err)
		}
	}
}

func containsServer(servers []raftnode.Server, id string) bool {
	for _, s := range servers {
		if s.ID == id {
			return true
		}
	}
	return false
}
