package coordinator

import (
	"context"
	"errors"
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
}

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
	if !c.barrier(t) {
		return
	}
	t.since = c.now()
	close(t.ready)
	c.health.SetServingStatus(eddyv1.Cluster_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	c.registerSelf(t.ctx)

	var backoff time.Duration
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		changed := c.fsm.Changed()
		p := c.round(t)
		applied, err := c.applyAll(t.ctx, p.commands)
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
		}
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

// round gathers the input of one round of decisions.
func (c *Coordinator) round(t *term) plan {
	return decide(round{
		now:      c.now(),
		since:    t.since,
		workers:  c.fsm.Workers(),
		jobs:     c.fsm.AllJobs(),
		lastSeen: t.lastSeen(),
		timeout:  c.cfg.HeartbeatTimeout,
		restart:  c.cfg.Restart,
	})
}

// applyAll proposes cmds in order and returns how many were applied; it
// stops at the first refusal or failure.
func (c *Coordinator) applyAll(ctx context.Context, cmds []fsm.Command) (int, error) {
	for i, cmd := range cmds {
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
