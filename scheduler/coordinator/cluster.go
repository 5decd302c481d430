package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/scheduler/raftnode"
)

// clusterServer serves Cluster on the leader; every other member answers
// UNAVAILABLE with a NotLeader detail naming the leader's API address.
type clusterServer struct {
	eddyv1.UnimplementedClusterServer
	c *Coordinator
}

// leaderOnly returns the ready term, or the status a non-leader answers.
func (c *Coordinator) leaderOnly(ctx context.Context) (*term, error) {
	t, ok, err := c.leading(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, c.notLeader()
	}
	return t, nil
}

func (s *clusterServer) RegisterWorker(ctx context.Context, req *eddyv1.RegisterWorkerRequest) (*eddyv1.RegisterWorkerResponse, error) {
	c := s.c
	t, err := c.leaderOnly(ctx)
	if err != nil {
		return nil, err
	}
	refuse := func(reason string) (*eddyv1.RegisterWorkerResponse, error) {
		c.log.Warn("worker refused", "worker", req.GetWorkerId(), "reason", reason)
		return &eddyv1.RegisterWorkerResponse{Reason: reason}, nil
	}
	switch {
	case req.GetWorkerId() == "":
		return refuse("no worker id")
	case req.GetInstanceId() == "":
		return refuse("no instance id")
	case req.GetDataAddress() == "":
		return refuse("no data address")
	case req.GetSlots() < 1:
		return refuse("a worker needs at least 1 slot")
	}
	_, err = c.propose(ctx, &fsm.RegisterWorker{
		ID:          req.GetWorkerId(),
		Address:     req.GetDataAddress(),
		Slots:       int(req.GetSlots()),
		Incarnation: req.GetInstanceId(),
	})
	if errors.Is(err, fsm.ErrMalformed) {
		return refuse(err.Error())
	}
	if err != nil {
		return nil, c.toStatus(err)
	}
	t.registered(req.GetWorkerId(), req.GetInstanceId(), c.now())
	c.log.Info("worker registered", "worker", req.GetWorkerId(), "instance", req.GetInstanceId(),
		"slots", req.GetSlots(), "data_address", req.GetDataAddress(), "version", req.GetVersion())
	return &eddyv1.RegisterWorkerResponse{
		Accepted:            true,
		HeartbeatIntervalMs: c.cfg.HeartbeatInterval.Milliseconds(),
		HeartbeatTimeoutMs:  c.cfg.HeartbeatTimeout.Milliseconds(),
	}, nil
}

func (s *clusterServer) Heartbeat(ctx context.Context, req *eddyv1.HeartbeatRequest) (*eddyv1.HeartbeatResponse, error) {
	c := s.c
	t, err := c.leaderOnly(ctx)
	if err != nil {
		return nil, err
	}
	wid := req.GetWorkerId()
	registered := func() error {
		w, err := c.fsm.Worker(wid)
		switch {
		case err != nil:
			return status.Errorf(codes.NotFound, "worker %s is not registered: register again", wid)
		case w.State != fsm.WorkerAlive:
			return status.Errorf(codes.NotFound, "worker %s was declared lost (%s) and its tasks rescheduled: cancel every task and register again", wid, w.Message)
		case w.Incarnation != req.GetInstanceId():
			return status.Errorf(codes.NotFound, "worker %s instance %s was replaced by instance %s: cancel every task and register again", wid, req.GetInstanceId(), w.Incarnation)
		}
		return nil
	}
	if err := registered(); err != nil {
		return nil, err
	}
	t.heard(wid, req.GetInstanceId(), c.now(), req.GetTasks())
	t.swapPrepared(wid, req.GetSwapPrepared())

	jobs := c.fsm.AllJobs()
	byID := make(map[string]*fsm.Job, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	// Before the call may be held: the worker ships its lines with the
	// call it has open.
	c.logs.ingest(req.GetInstanceId(), req.GetLogs(), func(job string) bool { return byID[job] != nil })
	poke := false
	for _, r := range req.GetTasks() {
		if byID[r.GetTask().GetJobId()] != nil {
			c.logs.taskFailed(r, c.now())
		}
		poke = poke || terminalTask(r.GetState())
	}
	if poke {
		c.logs.poke()
	}
	if cmds := reportCommands(wid, req.GetTasks(), byID); len(cmds) > 0 {
		for _, cmd := range cmds {
			if _, err := c.propose(ctx, cmd); err != nil {
				if errors.Is(err, raftnode.ErrNotLeader) || errors.Is(err, raftnode.ErrShutdown) || ctx.Err() != nil {
					return nil, c.toStatus(err)
				}
				// Refused (the job moved on meanwhile) or unknown outcome:
				// the report stays unreleased and comes again.
				c.log.Debug("task report not recorded", "worker", wid, "err", err)
				continue
			}
			c.logReport(wid, cmd)
		}
	}
	index, err := c.holdHeartbeat(ctx, t, req)
	if err != nil {
		return nil, err
	}
	if err := registered(); err != nil { // as it may have changed meanwhile
		return nil, err
	}
	// The state is read after its index, so that the answer is at least as
	// new as the index it names.
	jobs = c.fsm.AllJobs()
	workers := map[string]fsm.Worker{}
	for _, w := range c.fsm.Workers() {
		workers[w.ID] = w
	}
	resp := instructions(wid, req.GetTasks(), jobs, workers, func(j *fsm.Job) string {
		cfg, err := c.checkpointConfig(j)
		if err != nil {
			return ""
		}
		return cfg.storage
	})
	setTaskLimits(resp.GetDeployments(), quotasOf(c.fsm.Tenants()))
	c.swapInstructions(resp, wid, jobs)
	resp.StateIndex = index
	resp.HeartbeatIntervalMs = c.cfg.HeartbeatInterval.Milliseconds()
	if n := len(resp.Deployments) + len(resp.CancelTasks) + len(resp.CancelJobs); n > 0 {
		c.log.Debug("heartbeat instructions", "worker", wid, "deployments", len(resp.Deployments),
			"cancel_tasks", len(resp.CancelTasks), "cancel_jobs", len(resp.CancelJobs))
	}
	return resp, nil
}

// holdHeartbeat holds a heartbeat that asks for it (wait_ms) while the
// FSM is at the index of the worker's previous answer, for at most
// wait_ms and the heartbeat interval (the leader hears from the worker no
// less often than without holding), and returns the FSM's index then.
// The answer is a function of the FSM and of the reports, and a worker
// cancels a held call when its reports change: nothing is answered late.
func (c *Coordinator) holdHeartbeat(ctx context.Context, t *term, req *eddyv1.HeartbeatRequest) (uint64, error) {
	wait := min(time.Duration(req.GetWaitMs())*time.Millisecond, c.cfg.HeartbeatInterval)
	if wait <= 0 || req.GetStateIndex() == 0 {
		return c.fsm.AppliedIndex(), nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := c.fsm.Changed()
		if index := c.fsm.AppliedIndex(); index != req.GetStateIndex() {
			return index, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return c.fsm.AppliedIndex(), nil
		case <-t.ctx.Done():
			return 0, c.notLeader()
		case <-ctx.Done():
			return 0, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// AckCheckpoint records a task's acknowledgement of the checkpoint in
// flight of its job attempt; the leader's loop finalizes the checkpoint
// once every task acknowledged it.
func (s *clusterServer) AckCheckpoint(ctx context.Context, req *eddyv1.AckCheckpointRequest) (*eddyv1.AckCheckpointResponse, error) {
	c := s.c
	t, err := c.leaderOnly(ctx)
	if err != nil {
		return nil, err
	}
	refuse := func(format string, args ...any) (*eddyv1.AckCheckpointResponse, error) {
		reason := fmt.Sprintf(format, args...)
		c.log.Debug("checkpoint acknowledgement dropped", "job", req.GetJobId(), "attempt", req.GetAttempt(),
			"checkpoint", req.GetCheckpointId(), "task", req.GetTaskId(), "reason", reason)
		return &eddyv1.AckCheckpointResponse{Reason: reason}, nil
	}
	j, err := c.fsm.FindJob(req.GetJobId())
	if err != nil {
		return refuse("job %s not found", req.GetJobId())
	}
	if !slices.Contains(j.Tasks, req.GetTaskId()) {
		return nil, status.Errorf(codes.InvalidArgument, "job %s has no task %q", j.ID, req.GetTaskId())
	}
	declined := req.GetDeclineReason()
	if req.GetManifestKey() == "" && declined == "" {
		return nil, status.Errorf(codes.InvalidArgument, "checkpoint %d of job %s: task %s acknowledged without a manifest", req.GetCheckpointId(), j.ID, req.GetTaskId())
	}
	p := j.PendingCheckpoint
	switch {
	case j.State != fsm.JobRunning || j.Attempt != int(req.GetAttempt()):
		return refuse("attempt %d of job %s is not running", req.GetAttempt(), j.ID)
	case p == nil || p.ID != req.GetCheckpointId():
		return refuse("checkpoint %d of job %s is not in flight", req.GetCheckpointId(), j.ID)
	}
	if declined != "" {
		if acks := t.acks(j.ID, p.ID); acks == nil {
			return refuse("checkpoint %d of job %s was triggered by a previous leader", p.ID, j.ID)
		}
		reason := fmt.Sprintf("task %s declined it: %s", req.GetTaskId(), declined)
		if _, err := c.propose(ctx, &fsm.CheckpointFailed{JobID: j.ID, ID: p.ID, Reason: reason}); err != nil {
			if errors.Is(err, fsm.ErrCheckpointNotFound) {
				return refuse("checkpoint %d of job %s ended meanwhile", p.ID, j.ID)
			}
			return nil, c.toStatus(err)
		}
		c.log.Warn("checkpoint declined", "job", j.ID, "attempt", p.Attempt, "checkpoint", p.ID, "task", req.GetTaskId(),
			"worker", req.GetWorkerId(), "reason", declined)
		return &eddyv1.AckCheckpointResponse{Accepted: true}, nil
	}
	ok, n := t.ack(j.ID, p.ID, req.GetTaskId(), checkpointAck{
		manifest:    req.GetManifestKey(),
		fullSize:    int64(min(req.GetFullSizeBytes(), math.MaxInt64)),
		incremental: int64(min(req.GetIncrementalSizeBytes(), math.MaxInt64)),
		duration:    time.Duration(max(req.GetDurationMs(), 0)) * time.Millisecond,
		worker:      req.GetWorkerId(),
		swapPause:   time.Duration(max(req.GetSwapPauseUs(), 0)) * time.Microsecond,
	})
	if !ok {
		return refuse("checkpoint %d of job %s was triggered by a previous leader", p.ID, j.ID)
	}
	c.log.Debug("checkpoint acknowledged", "job", j.ID, "attempt", p.Attempt, "checkpoint", p.ID, "task", req.GetTaskId(),
		"worker", req.GetWorkerId(), "acknowledged", n, "tasks", len(j.Tasks))
	if n >= len(j.Tasks) {
		t.wake()
	}
	return &eddyv1.AckCheckpointResponse{Accepted: true}, nil
}

func (c *Coordinator) logReport(worker string, cmd fsm.Command) {
	switch cmd := cmd.(type) {
	case *fsm.TaskFinished:
		c.log.Info("task finished", "worker", worker, "job", cmd.JobID, "attempt", cmd.Attempt, "task", cmd.TaskID)
	case *fsm.TaskFailed:
		c.log.Warn("task failed", "worker", worker, "job", cmd.JobID, "attempt", cmd.Attempt, "task", cmd.TaskID, "error", cmd.Message)
	case *fsm.CheckpointFailed:
		c.log.Warn("checkpoint cannot be restored from: the next attempt restores from the one before", "worker", worker,
			"job", cmd.JobID, "checkpoint", cmd.ID, "error", cmd.Reason)
	default:
		c.log.Info(fmt.Sprint(cmd.Type()), "worker", worker)
	}
}

func (s *clusterServer) FetchModule(ctx context.Context, req *eddyv1.FetchModuleRequest) (*eddyv1.FetchModuleResponse, error) {
	c := s.c
	if _, err := c.leaderOnly(ctx); err != nil {
		return nil, err
	}
	absent := status.Errorf(codes.NotFound, "module %s of job %s not found for worker %s", req.GetSha256(), req.GetJobId(), req.GetWorkerId())
	w, err := c.fsm.Worker(req.GetWorkerId())
	if err != nil || w.Incarnation != req.GetInstanceId() || w.State != fsm.WorkerAlive {
		return nil, absent
	}
	j, err := c.fsm.FindJob(req.GetJobId())
	if err != nil || !slices.Contains(slices.Collect(maps.Values(j.Deployment)), w.ID) ||
		!jobModule(&j, req.GetSha256()) {
		return nil, absent
	}
	data, err := c.deps.Store.Get(ctx, ModuleKey(j.Tenant, req.GetSha256()))
	if err != nil {
		if errors.Is(err, ErrBlobNotFound) {
			return nil, status.Errorf(codes.DataLoss, "module %s of job %s is registered but its bytes are missing from the module store", req.GetSha256(), j.ID)
		}
		return nil, status.Errorf(codes.Unavailable, "read module %s: %v", req.GetSha256(), err)
	}
	return &eddyv1.FetchModuleResponse{Wasm: data}, nil
}
