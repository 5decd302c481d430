package fsm

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// FSM is the replicated state. It implements raft.FSM.
//
// Raft calls Apply, Snapshot and Restore from one goroutine; the query
// methods may be called from any goroutine at any time.
type FSM struct {
	mu      sync.RWMutex
	st      *state
	changed chan struct{} // closed and replaced after every change
	// counts are the metrics' counters (counters.go): guarded by mu, not
	// part of the state.
	counts counters
}

// state is everything replicated. Only apply and restore write it, with
// f.mu held.
type state struct {
	appliedIndex uint64
	tenants      map[string]*Tenant
	coordinators map[string]*Coordinator
	// modules holds every version of a module, version v at index v-1.
	modules map[moduleKey][]*Module
	workers map[string]*Worker
	jobs    map[string]*Job
	// jobSeq is the number of the latest numbered job (SubmitJob.Numbered).
	jobSeq uint64
	tokens map[string]*Token
	// audit holds the latest MaxAuditEntries entries, by Seq; auditSeq is
	// the Seq of the last one ever recorded.
	audit    []AuditEntry
	auditSeq uint64
}

type moduleKey struct{ tenant, name string }

func newState() *state {
	return &state{
		tenants:      map[string]*Tenant{DefaultTenant: {ID: DefaultTenant, Created: time.Unix(0, 0).UTC()}},
		coordinators: map[string]*Coordinator{},
		modules:      map[moduleKey][]*Module{},
		workers:      map[string]*Worker{},
		jobs:         map[string]*Job{},
		tokens:       map[string]*Token{},
	}
}

// New returns the state of an empty cluster: tenant "default" and nothing
// else.
func New() *FSM {
	return &FSM{st: newState(), changed: make(chan struct{}), counts: counters{jobs: map[string]*JobCounters{}}}
}

var _ raft.FSM = (*FSM)(nil)

// Apply implements raft.FSM. It returns the command's result (see each
// command type), or an error value when the command was refused; a refused
// command changes nothing but AppliedIndex.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	res, err := f.ApplyCommand(l.Index, l.Data)
	if err != nil {
		return err
	}
	return res
}

// ApplyCommand applies an encoded command as the entry at log index index.
// Indexes must increase from call to call. This is Apply without Raft: tests
// and tools replay logs with it.
func (f *FSM) ApplyCommand(index uint64, data []byte) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if index <= f.st.appliedIndex {
		return nil, fmt.Errorf("apply index %d after %d: %w", index, f.st.appliedIndex, ErrIndexOrder)
	}
	// A refused command still counts as applied: AppliedIndex says how far
	// the log has been processed, whatever each entry's outcome.
	f.st.appliedIndex = index
	defer f.notifyLocked()
	env, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("apply index %d: %w", index, err)
	}
	// Validation runs again here, not only in Encode: the log may hold
	// commands from proposers of another version.
	if err := env.Command.validate(); err != nil {
		return nil, fmt.Errorf("apply %s at index %d: %w", env.Type, index, err)
	}
	a := applier{st: f.st, index: index, at: env.At, counts: &f.counts}
	res, err := a.apply(env.Command)
	if err != nil {
		return nil, fmt.Errorf("apply %s at index %d: %w", env.Type, index, err)
	}
	return res, nil
}

// Changed returns a channel closed at the next change of the state (an
// applied command or a restore). Leader loops wait on it instead of polling.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

func (f *FSM) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// applier applies one command. Every handler checks everything before it
// changes anything, so that a refused command leaves the state untouched.
type applier struct {
	st     *state
	index  uint64
	at     time.Time
	counts *counters
}

func (a *applier) apply(cmd Command) (any, error) {
	if res, ok, err := a.applyTenancy(cmd); ok {
		return res, err
	}
	if res, ok, err := a.applySwap(cmd); ok {
		return res, err
	}
	switch c := cmd.(type) {
	case *CreateTenant:
		return a.createTenant(c)
	case *RegisterCoordinator:
		return a.registerCoordinator(c)
	case *RegisterModule:
		return a.registerModule(c)
	case *RegisterWorker:
		return a.registerWorker(c)
	case *WorkerDown:
		return a.workerDown(c)
	case *SubmitJob:
		return a.submitJob(c)
	case *PlaceJob:
		return a.placeJob(c)
	case *JobWaiting:
		return a.jobWaiting(c)
	case *TaskFinished:
		return a.taskFinished(c)
	case *TaskFailed:
		return a.taskFailed(c)
	case *FinishJob:
		return a.finishJob(c)
	case *FailJob:
		return a.failJob(c)
	case *CancelJob:
		return a.cancelJob(c)
	case *TriggerCheckpoint:
		return a.triggerCheckpoint(c)
	case *CheckpointCompleted:
		return a.checkpointCompleted(c)
	case *CheckpointFailed:
		return a.checkpointFailed(c)
	case *CheckpointsDeleted:
		return a.checkpointsDeleted(c)
	}
	// Unreachable while newCommand and this switch agree; an error, not a
	// panic, if they ever do not.
	return nil, fmt.Errorf("type %q: %w", cmd.Type(), ErrUnknownCommand)
}

func (a *applier) createTenant(c *CreateTenant) (any, error) {
	if _, ok := a.st.tenants[c.ID]; ok {
		return nil, fmt.Errorf("tenant %q: %w", c.ID, ErrTenantExists)
	}
	t := &Tenant{ID: c.ID, Created: a.at, Quota: c.Quota}
	a.st.tenants[c.ID] = t
	return *t, nil
}

func (a *applier) registerCoordinator(c *RegisterCoordinator) (any, error) {
	co := &Coordinator{ID: c.ID, RaftAddress: c.RaftAddress, APIAddress: c.APIAddress}
	a.st.coordinators[c.ID] = co
	return *co, nil
}

func (a *applier) tenant(id string) error {
	if _, ok := a.st.tenants[id]; !ok {
		return fmt.Errorf("tenant %q: %w", id, ErrTenantNotFound)
	}
	return nil
}

func (a *applier) registerModule(c *RegisterModule) (any, error) {
	if err := a.tenant(c.Tenant); err != nil {
		return nil, err
	}
	key := moduleKey{c.Tenant, c.Name}
	versions := a.st.modules[key]
	if n := len(versions); n > 0 && versions[n-1].SHA256 == c.SHA256 {
		return *versions[n-1], nil
	}
	if err := a.checkCountQuota(c.Tenant, TypeRegisterModule); err != nil {
		return nil, err
	}
	m := &Module{
		Tenant:  c.Tenant,
		Name:    c.Name,
		Version: len(versions) + 1,
		SHA256:  c.SHA256,
		Size:    c.Size,
		Created: a.at,
	}
	a.st.modules[key] = append(versions, m)
	return *m, nil
}

func (a *applier) registerWorker(c *RegisterWorker) (any, error) {
	w, known := a.st.workers[c.ID]
	if known && w.Incarnation != c.Incarnation {
		a.restartJobsOn(c.ID, fmt.Sprintf("worker %s restarted", c.ID))
	}
	if !known {
		w = &Worker{ID: c.ID, Registered: a.at}
		a.st.workers[c.ID] = w
	}
	w.Address = c.Address
	w.Slots = c.Slots
	w.Incarnation = c.Incarnation
	w.State = WorkerAlive
	w.Message = ""
	w.Updated = a.at
	out := *w
	out.UsedSlots = a.st.usedSlots()[w.ID]
	return out, nil
}

func (a *applier) workerDown(c *WorkerDown) (any, error) {
	w, ok := a.st.workers[c.ID]
	if !ok {
		return nil, fmt.Errorf("worker %q: %w", c.ID, ErrWorkerNotFound)
	}
	if w.State == WorkerDead {
		return []string(nil), nil
	}
	w.State = WorkerDead
	w.Message = clip(c.Reason)
	w.Updated = a.at
	msg := fmt.Sprintf("worker %s down", c.ID)
	if c.Reason != "" {
		msg += ": " + c.Reason
	}
	return a.restartJobsOn(c.ID, msg), nil
}

// restartJobsOn moves every running job with an unfinished task on worker
// to RESTARTING and returns their ids, sorted.
func (a *applier) restartJobsOn(worker, msg string) []string {
	var restarted []string
	for _, j := range a.st.jobs {
		if !j.holdsSlots() {
			continue
		}
		for task, wid := range j.Deployment {
			if wid == worker && !j.taskFinished(task) {
				a.restart(j, msg)
				restarted = append(restarted, j.ID)
				break
			}
		}
	}
	sort.Strings(restarted)
	return restarted
}

func (a *applier) restart(j *Job, msg string) {
	a.abandon(j, fmt.Sprintf("attempt %d ended: %s", j.Attempt, msg))
	j.State = JobRestarting
	j.Restarts++
	j.Message = clip(msg)
	j.Deployment = nil
	j.FinishedTasks = nil
	j.Updated = a.at
}

func (a *applier) submitJob(c *SubmitJob) (any, error) {
	if err := a.tenant(c.Tenant); err != nil {
		return nil, err
	}
	if c.RequestID != "" {
		for _, j := range a.st.jobs {
			if j.Tenant == c.Tenant && j.RequestID == c.RequestID {
				return j.clone(), nil
			}
		}
	}
	if err := a.checkCountQuota(c.Tenant, TypeSubmitJob); err != nil {
		return nil, err
	}
	for _, m := range c.Modules {
		if err := a.registeredModule(c.Tenant, m); err != nil {
			return nil, fmt.Errorf("job %q: %w", c.Name, err)
		}
	}
	seq := a.st.jobSeq
	id := "job-" + strconv.FormatUint(a.index, 10) // as before jobs were numbered
	if c.Numbered {
		for {
			seq++
			id = "job-" + strconv.FormatUint(seq, 10)
			if _, taken := a.st.jobs[id]; !taken {
				break
			}
		}
	}
	a.st.jobSeq = seq
	j := &Job{
		ID:                id,
		Tenant:            c.Tenant,
		Name:              c.Name,
		Spec:              slices.Clone(c.Spec),
		Modules:           slices.Clone(c.Modules),
		RequestID:         c.RequestID,
		FromSavepoint:     c.FromSavepoint,
		CheckpointSeq:     c.CheckpointSeq,
		CheckpointStorage: c.CheckpointStorage,
		Tasks:             slices.Clone(c.Tasks),
		State:             JobWaitingForSlots,
		Message:           "waiting for placement",
		SubmitIndex:       a.index,
		Submitted:         a.at,
		Updated:           a.at,
	}
	a.st.jobs[id] = j
	return j.clone(), nil
}

func (a *applier) job(id string) (*Job, error) {
	j, ok := a.st.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, ErrJobNotFound)
	}
	return j, nil
}

func (a *applier) placeJob(c *PlaceJob) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	if j.State != JobWaitingForSlots && j.State != JobRestarting {
		return nil, fmt.Errorf("place job %s: state %s: %w", j.ID, j.State, ErrJobState)
	}
	if c.Attempt != j.Attempt+1 {
		return nil, fmt.Errorf("place job %s as attempt %d, next is %d: %w", j.ID, c.Attempt, j.Attempt+1, ErrStaleAttempt)
	}
	if len(c.Deployment) != len(j.Tasks) {
		return nil, fmt.Errorf("place job %s: %d tasks deployed, job has %d: %w", j.ID, len(c.Deployment), len(j.Tasks), ErrInvalidPlacement)
	}
	used := a.st.usedSlots()
	for _, task := range j.Tasks { // j.Tasks, not the map: a deterministic first error
		wid, ok := c.Deployment[task]
		if !ok {
			return nil, fmt.Errorf("place job %s: task %q not deployed: %w", j.ID, task, ErrInvalidPlacement)
		}
		w, ok := a.st.workers[wid]
		if !ok {
			return nil, fmt.Errorf("place job %s: task %q on unknown worker %q: %w", j.ID, task, wid, ErrInvalidPlacement)
		}
		if w.State != WorkerAlive {
			return nil, fmt.Errorf("place job %s: task %q on dead worker %s: %w", j.ID, task, wid, ErrInvalidPlacement)
		}
		used[wid]++
		if used[wid] > w.Slots {
			return nil, fmt.Errorf("place job %s: worker %s has %d slots, would use %d: %w", j.ID, wid, w.Slots, used[wid], ErrInvalidPlacement)
		}
	}
	j.Attempt = c.Attempt
	j.State = JobRunning
	j.Message = ""
	j.Deployment = make(map[string]string, len(j.Tasks))
	for _, task := range j.Tasks {
		j.Deployment[task] = c.Deployment[task]
	}
	j.FinishedTasks = nil
	j.Updated = a.at
	return j.clone(), nil
}

func (a *applier) jobWaiting(c *JobWaiting) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	if j.State != JobWaitingForSlots && j.State != JobRestarting {
		return nil, fmt.Errorf("job %s waits for slots: state %s: %w", j.ID, j.State, ErrJobState)
	}
	msg := clip(c.Message)
	if j.State != JobWaitingForSlots || j.Message != msg {
		j.State = JobWaitingForSlots
		j.Message = msg
		j.Updated = a.at
	}
	return j.clone(), nil
}

// runningTask returns the job if it is running attempt and has task.
func (a *applier) runningTask(jobID string, attempt int, task string) (*Job, error) {
	j, err := a.job(jobID)
	if err != nil {
		return nil, err
	}
	if attempt != j.Attempt {
		return nil, fmt.Errorf("job %s task %q: attempt %d, current is %d: %w", j.ID, task, attempt, j.Attempt, ErrStaleAttempt)
	}
	if j.State != JobRunning {
		return nil, fmt.Errorf("job %s task %q: state %s: %w", j.ID, task, j.State, ErrJobState)
	}
	if !j.hasTask(task) {
		return nil, fmt.Errorf("job %s: no task %q: %w", j.ID, task, ErrMalformed)
	}
	return j, nil
}

func (a *applier) taskFinished(c *TaskFinished) (any, error) {
	j, err := a.runningTask(c.JobID, c.Attempt, c.TaskID)
	if err != nil {
		return nil, err
	}
	i, found := slices.BinarySearch(j.FinishedTasks, c.TaskID)
	if found {
		return j.clone(), nil
	}
	j.FinishedTasks = slices.Insert(j.FinishedTasks, i, c.TaskID)
	j.Updated = a.at
	if len(j.FinishedTasks) == len(j.Tasks) {
		a.abandon(j, "job finished")
		j.State = JobFinished
		j.Message = ""
	}
	return j.clone(), nil
}

func (a *applier) taskFailed(c *TaskFailed) (any, error) {
	j, err := a.runningTask(c.JobID, c.Attempt, c.TaskID)
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("task %s of attempt %d failed", c.TaskID, c.Attempt)
	if c.Message != "" {
		msg += ": " + c.Message
	}
	rolledBack := a.rollBack(j, msg)
	a.restart(j, msg)
	if rolledBack != "" {
		j.Message = clip(rolledBack)
	}
	return j.clone(), nil
}

func (a *applier) finishJob(c *FinishJob) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	if c.Attempt != j.Attempt {
		return nil, fmt.Errorf("job %s finished: attempt %d, current is %d: %w", j.ID, c.Attempt, j.Attempt, ErrStaleAttempt)
	}
	if j.State != JobRunning {
		return nil, fmt.Errorf("job %s finished: state %s: %w", j.ID, j.State, ErrJobState)
	}
	a.abandon(j, "job finished")
	j.State = JobFinished
	j.Message = ""
	j.Updated = a.at
	return j.clone(), nil
}

func (a *applier) failJob(c *FailJob) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	if j.State.Terminal() {
		return nil, fmt.Errorf("job %s failed: state %s: %w", j.ID, j.State, ErrJobState)
	}
	a.abandon(j, "job failed")
	j.State = JobFailed
	j.Message = clip(c.Message)
	j.Updated = a.at
	return j.clone(), nil
}

func (a *applier) cancelJob(c *CancelJob) (any, error) {
	j, ok := a.st.jobs[c.JobID]
	if !ok || j.Tenant != c.Tenant {
		// Another tenant's job is reported exactly like a missing one.
		return nil, fmt.Errorf("job %s: %w", c.JobID, ErrJobNotFound)
	}
	if j.State.Terminal() {
		return nil, fmt.Errorf("cancel job %s: state %s: %w", j.ID, j.State, ErrJobState)
	}
	a.abandon(j, "job canceled")
	j.State = JobCanceled
	j.Message = "canceled"
	j.Updated = a.at
	return j.clone(), nil
}

func (a *applier) triggerCheckpoint(c *TriggerCheckpoint) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Attempt != j.Attempt:
		return nil, fmt.Errorf("job %s checkpoint %d: attempt %d, current is %d: %w", j.ID, c.ID, c.Attempt, j.Attempt, ErrStaleAttempt)
	case j.State != JobRunning:
		return nil, fmt.Errorf("job %s checkpoint %d: state %s: %w", j.ID, c.ID, j.State, ErrJobState)
	case j.PendingCheckpoint != nil:
		return nil, fmt.Errorf("job %s checkpoint %d: checkpoint %d in flight: %w", j.ID, c.ID, j.PendingCheckpoint.ID, ErrJobState)
	case c.ID <= j.CheckpointSeq:
		return nil, fmt.Errorf("job %s checkpoint %d: ids must increase, the last was %d: %w", j.ID, c.ID, j.CheckpointSeq, ErrJobState)
	}
	swap, err := a.swapOfTrigger(j, c)
	if err != nil {
		return nil, err
	}
	if swap != nil {
		swap.State = SwapSwapping
		swap.Savepoint = c.ID
	}
	j.CheckpointSeq = c.ID
	j.PendingCheckpoint = &Checkpoint{ID: c.ID, Attempt: c.Attempt, Savepoint: c.Savepoint, Swap: c.Swap, Triggered: a.at}
	// Checkpoint commands leave Job.Updated alone: it times restart backoffs
	// and dates the end of terminal jobs.
	return j.clone(), nil
}

func (a *applier) checkpointCompleted(c *CheckpointCompleted) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	p := j.PendingCheckpoint
	switch {
	case p == nil || p.ID != c.ID:
		return nil, fmt.Errorf("job %s checkpoint %d completed: not in flight: %w", j.ID, c.ID, ErrCheckpointNotFound)
	case c.Attempt != p.Attempt:
		return nil, fmt.Errorf("job %s checkpoint %d completed: attempt %d, triggered in %d: %w", j.ID, c.ID, c.Attempt, p.Attempt, ErrStaleAttempt)
	case c.Savepoint != p.Savepoint:
		return nil, fmt.Errorf("job %s checkpoint %d completed: savepoint %v, triggered as %v: %w", j.ID, c.ID, c.Savepoint, p.Savepoint, ErrMalformed)
	}
	done := *p
	done.Location = c.Manifest
	done.Completed = a.at
	done.Duration = c.Duration
	done.FullSize = c.FullSize
	done.IncrementalSize = c.IncrementalSize
	j.PendingCheckpoint = nil
	j.CheckpointEnded = a.at
	a.counts.job(j.ID).CheckpointsCompleted++
	a.swapCompleted(j, done, c.SwapPause)
	if done.Savepoint {
		// The savepoint is a self-contained copy: the files it was copied
		// from are not needed for it.
		j.Savepoints = append(j.Savepoints, done)
		j.CheckpointsToDelete = insertID(j.CheckpointsToDelete, done.ID)
		return j.clone(), nil
	}
	j.Checkpoints = append(j.Checkpoints, done)
	for len(j.Checkpoints) > c.Retain {
		j.CheckpointsToDelete = insertID(j.CheckpointsToDelete, j.Checkpoints[0].ID)
		j.Checkpoints = slices.Delete(j.Checkpoints, 0, 1)
	}
	return j.clone(), nil
}

func (a *applier) checkpointFailed(c *CheckpointFailed) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	if p := j.PendingCheckpoint; p != nil && p.ID == c.ID {
		swap := p.Swap
		a.failPending(j, c.Reason)
		if s := j.inFlightSwap(); swap != 0 && s != nil && s.ID == swap {
			// Some tasks may have switched at the barrier already: only a
			// restart from the last checkpoint puts every task of the node
			// back on one version, the old one.
			reason := fmt.Sprintf("savepoint %d failed: %s", c.ID, c.Reason)
			a.endSwapAs(j, s, SwapFailed, clip(reason))
			a.restart(j, fmt.Sprintf("swap %d failed: %s", swap, reason))
		}
		return j.clone(), nil
	}
	for _, list := range [][]Checkpoint{j.Checkpoints, j.Savepoints} {
		for i := range list {
			if list[i].ID == c.ID {
				if list[i].Bad == "" {
					list[i].Bad = clip(c.Reason)
				}
				return j.clone(), nil
			}
		}
	}
	return nil, fmt.Errorf("job %s checkpoint %d failed: neither in flight nor completed: %w", j.ID, c.ID, ErrCheckpointNotFound)
}

func (a *applier) checkpointsDeleted(c *CheckpointsDeleted) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	j.CheckpointsToDelete = slices.DeleteFunc(j.CheckpointsToDelete, func(id uint64) bool { return slices.Contains(c.IDs, id) })
	if len(j.CheckpointsToDelete) == 0 {
		j.CheckpointsToDelete = nil
	}
	return j.clone(), nil
}

// failPending ends the job's checkpoint in flight, if any, as failed.
func (a *applier) failPending(j *Job, reason string) {
	p := j.PendingCheckpoint
	if p == nil {
		return
	}
	failed := *p
	failed.Completed = a.at
	failed.Error = clip(reason)
	a.counts.job(j.ID).CheckpointsFailed++
	j.FailedCheckpoints = append(j.FailedCheckpoints, failed)
	if n := len(j.FailedCheckpoints); n > MaxFailedCheckpoints {
		j.FailedCheckpoints = slices.Delete(j.FailedCheckpoints, 0, n-MaxFailedCheckpoints)
	}
	j.CheckpointsToDelete = insertID(j.CheckpointsToDelete, p.ID)
	j.PendingCheckpoint = nil
	j.CheckpointEnded = a.at
}

// insertID adds id to a sorted list of ids, once.
func insertID(ids []uint64, id uint64) []uint64 {
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids
	}
	return slices.Insert(ids, i, id)
}

// usedSlots counts, per worker, the unfinished tasks of running jobs.
func (s *state) usedSlots() map[string]int {
	used := make(map[string]int, len(s.workers))
	for _, j := range s.jobs {
		if !j.holdsSlots() {
			continue
		}
		for task, wid := range j.Deployment {
			if !j.taskFinished(task) {
				used[wid]++
			}
		}
	}
	return used
}
