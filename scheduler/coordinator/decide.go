package coordinator

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/scheduler/placement"
)

// This file is the coordinator's deterministic core: functions from the
// replicated state, the leader's in-memory heartbeat view and the time to
// the commands to propose and the instructions to answer. They do no I/O,
// read no clock and start nothing; leader.go and cluster.go call them.

// round is the input of one round of the leader's decisions.
type round struct {
	now time.Time
	// since is when this leader's term started: a worker it has not heard
	// from yet counts as heard from then, so that every worker gets a full
	// timeout to find a new leader.
	since    time.Time
	workers  []fsm.Worker // every worker, with UsedSlots
	jobs     []fsm.Job    // every job, in submission order
	lastSeen map[string]time.Time
	timeout  time.Duration
	restart  RestartStrategy
	// quotas are the tenants' quotas by tenant id (a tenant absent: no
	// limit).
	quotas map[string]fsm.Quota
}

// quotasOf indexes the tenants' quotas for a round.
func quotasOf(tenants []fsm.Tenant) map[string]fsm.Quota {
	out := make(map[string]fsm.Quota, len(tenants))
	for _, t := range tenants {
		out[t.ID] = t.Quota
	}
	return out
}

// tenantSlotsMessage is the status of a job that fits the cluster's free
// slots or not, but not its tenant's: it waits for its own tenant's jobs
// to end, not for the cluster.
func tenantSlotsMessage(tenant string, quota, used, needed int) string {
	return fmt.Sprintf("waiting for tenant %s's slots: quota slots=%d, %d in use, the job needs %d", tenant, quota, used, needed)
}

// plan is the output of a round: commands to propose in order, and when to
// decide again if nothing changes before (zero: nothing is timed).
type plan struct {
	commands []fsm.Command
	wakeAt   time.Time
	// finalize and collect are the checkpoint I/O to start (see
	// checkpointPlan), once a round decides no command.
	finalize []string
	collect  []string
}

func (p *plan) wake(at time.Time) {
	if p.wakeAt.IsZero() || at.Before(p.wakeAt) {
		p.wakeAt = at
	}
}

// decide runs one round. Workers found silent come first and alone: the
// jobs they held change state, and the next round places them from that
// state.
func decide(r round) plan {
	var p plan
	for _, w := range r.workers {
		if w.State != fsm.WorkerAlive {
			continue
		}
		seen, ok := r.lastSeen[w.ID]
		if !ok || seen.Before(r.since) {
			seen = r.since
		}
		deadline := seen.Add(r.timeout)
		if r.now.Before(deadline) {
			p.wake(deadline)
			continue
		}
		p.commands = append(p.commands, &fsm.WorkerDown{
			ID:     w.ID,
			Reason: fmt.Sprintf("no heartbeat for %s", r.timeout),
		})
	}
	if len(p.commands) > 0 {
		return plan{commands: p.commands}
	}

	candidates := make([]placement.Worker, 0, len(r.workers))
	for _, w := range r.workers {
		if w.State == fsm.WorkerAlive {
			candidates = append(candidates, placement.Worker{ID: w.ID, Slots: w.Slots, Used: w.UsedSlots})
		}
	}
	// Slots each tenant's running jobs hold; a job placed in this round
	// adds its own, as it does to its workers' used slots.
	tenantUsed := map[string]int{}
	for i := range r.jobs {
		tenantUsed[r.jobs[i].Tenant] += r.jobs[i].HeldSlots()
	}
	for _, j := range r.jobs {
		switch j.State {
		case fsm.JobRestarting:
			if msg, giveUp := r.restart.giveUp(j); giveUp {
				p.commands = append(p.commands, &fsm.FailJob{JobID: j.ID, Message: msg})
				continue
			}
			if at := j.Updated.Add(r.restart.delay(j.Restarts)); r.now.Before(at) {
				p.wake(at)
				continue
			}
		case fsm.JobWaitingForSlots:
		default:
			continue
		}
		// The tenant's quota first: a job held back by it waits for the
		// tenant's own jobs, whatever the cluster has free, and says so.
		if q := r.quotas[j.Tenant].Slots; q > 0 && tenantUsed[j.Tenant]+len(j.Tasks) > q {
			if msg := tenantSlotsMessage(j.Tenant, q, tenantUsed[j.Tenant], len(j.Tasks)); j.State != fsm.JobWaitingForSlots || j.Message != msg {
				p.commands = append(p.commands, &fsm.JobWaiting{JobID: j.ID, Message: msg})
			}
			continue
		}
		deployment, err := placement.Place(j.Tasks, candidates)
		var short *placement.InsufficientSlotsError
		switch {
		case errors.As(err, &short):
			if msg := short.Error(); j.State != fsm.JobWaitingForSlots || j.Message != msg {
				p.commands = append(p.commands, &fsm.JobWaiting{JobID: j.ID, Message: msg})
			}
		case err != nil:
			// The FSM checked the tasks at submission; this cannot happen
			// unless the two disagree, and then the job can never run.
			p.commands = append(p.commands, &fsm.FailJob{JobID: j.ID, Message: "cannot place the job: " + err.Error()})
		default:
			p.commands = append(p.commands, &fsm.PlaceJob{JobID: j.ID, Attempt: j.Attempt + 1, Deployment: deployment})
			tenantUsed[j.Tenant] += len(j.Tasks)
			for i := range candidates {
				for _, wid := range deployment {
					if wid == candidates[i].ID {
						candidates[i].Used++
					}
				}
			}
		}
	}
	return p
}

// delay is the wait before the attempt that follows the restarts-th
// failure (restarts >= 1).
func (r RestartStrategy) delay(restarts int) time.Duration {
	if r.Kind != RestartExponential || restarts <= 1 {
		return r.Delay
	}
	d := r.Delay
	for i := 1; i < restarts && d < r.MaxDelay; i++ {
		d *= 2
	}
	return min(d, r.MaxDelay)
}

// giveUp reports whether a restarting job is failed for good instead, and
// the message to fail it with: the cause of the last failure, which the
// FSM keeps as the job's message.
func (r RestartStrategy) giveUp(j fsm.Job) (string, bool) {
	switch {
	case r.Kind == RestartNone:
		return j.Message, true // the cause says it all: nothing was retried
	case r.MaxAttempts > 0 && j.Restarts > r.MaxAttempts:
		restarts := "restarts"
		if r.MaxAttempts == 1 {
			restarts = "restart"
		}
		return fmt.Sprintf("failed after %d %s: %s", r.MaxAttempts, restarts, j.Message), true
	}
	return "", false
}

// taskKey names one task of one attempt of a job.
type taskKey struct {
	job     string
	attempt int
	task    string
}

func keyOf(r *eddyv1.TaskRef) taskKey {
	return taskKey{job: r.GetJobId(), attempt: int(r.GetAttempt()), task: r.GetTaskId()}
}

func (k taskKey) ref() *eddyv1.TaskRef {
	return &eddyv1.TaskRef{JobId: k.job, Attempt: uint32(k.attempt), TaskId: k.task}
}

func compareKeys(a, b taskKey) int {
	return cmp.Or(cmp.Compare(a.job, b.job), cmp.Compare(a.attempt, b.attempt), cmp.Compare(a.task, b.task))
}

func terminalTask(s eddyv1.TaskState) bool {
	return s == eddyv1.TaskState_TASK_STATE_FINISHED || s == eddyv1.TaskState_TASK_STATE_FAILED ||
		s == eddyv1.TaskState_TASK_STATE_CANCELED
}

// placedHere reports whether the job runs attempt k.attempt now with task
// k.task on worker.
func placedHere(j *fsm.Job, k taskKey, worker string) bool {
	return j != nil && j.State == fsm.JobRunning && j.Attempt == k.attempt && j.Deployment[k.task] == worker
}

func finished(j *fsm.Job, task string) bool {
	_, found := slices.BinarySearch(j.FinishedTasks, task)
	return found
}

// reportCommands returns the commands that record what a heartbeat reports
// and the FSM does not know yet: finished tasks, and failed or canceled
// tasks of the running attempt (a worker cancels a task on its own only
// when it lost the leader for too long, and the attempt must then start
// again). One failure per attempt is enough: the first restarts the job.
func reportCommands(worker string, reports []*eddyv1.TaskReport, jobs map[string]*fsm.Job) []fsm.Command {
	var cmds []fsm.Command
	failed := map[string]bool{}
	for _, r := range reports {
		k := keyOf(r.GetTask())
		j := jobs[k.job]
		if !placedHere(j, k, worker) || failed[k.job] {
			continue
		}
		switch r.GetState() {
		case eddyv1.TaskState_TASK_STATE_FINISHED:
			if !finished(j, k.task) {
				cmds = append(cmds, &fsm.TaskFinished{JobID: k.job, Attempt: k.attempt, TaskID: k.task})
			}
		case eddyv1.TaskState_TASK_STATE_FAILED:
			failed[k.job] = true
			// A task that could not restore from a checkpoint marks it bad
			// first, so that the next attempt restores from the one before.
			if id, ok := badCheckpoint(j, r.GetFailedRestoreCheckpoint()); ok {
				cmds = append(cmds, &fsm.CheckpointFailed{JobID: k.job, ID: id, Reason: r.GetError()})
			}
			cmds = append(cmds, &fsm.TaskFailed{JobID: k.job, Attempt: k.attempt, TaskID: k.task, Message: r.GetError()})
		case eddyv1.TaskState_TASK_STATE_CANCELED:
			if !finished(j, k.task) {
				failed[k.job] = true
				cmds = append(cmds, &fsm.TaskFailed{JobID: k.job, Attempt: k.attempt, TaskID: k.task,
					Message: "canceled by worker " + worker + " without being told to"})
			}
		}
	}
	return cmds
}

// instructions computes the answer to a heartbeat: the difference between
// what the worker reports and what the FSM says it should run, and the
// checkpoints to trigger and commit. jobs are all jobs in submission
// order; workers maps worker ids to workers (for data addresses); storage
// gives a job's checkpoint storage URL (nil: none).
func instructions(worker string, reports []*eddyv1.TaskReport, jobs []fsm.Job, workers map[string]fsm.Worker, storage func(*fsm.Job) string) *eddyv1.HeartbeatResponse {
	resp := &eddyv1.HeartbeatResponse{}
	byID := make(map[string]*fsm.Job, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	reported := make(map[taskKey]bool, len(reports))
	var cancel, release []taskKey
	cancelJobs := map[string]bool{}
	for _, r := range reports {
		k := keyOf(r.GetTask())
		reported[k] = true
		j := byID[k.job]
		if terminalTask(r.GetState()) {
			if released(j, k, worker, r.GetState()) {
				release = append(release, k)
			}
			continue
		}
		if placedHere(j, k, worker) {
			continue
		}
		cancel = append(cancel, k)
		if j == nil || j.State.Terminal() {
			cancelJobs[k.job] = true
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if j.State != fsm.JobRunning {
			continue
		}
		var start []string
		for _, task := range j.Tasks {
			if j.Deployment[task] == worker && !finished(j, task) && !reported[taskKey{j.ID, j.Attempt, task}] {
				start = append(start, task)
			}
		}
		if len(start) > 0 {
			d := deployment(j, start, workers)
			if storage != nil {
				d.CheckpointStorage = storage(j)
			}
			resp.Deployments = append(resp.Deployments, d)
		}
	}
	checkpointInstructions(resp, worker, jobs)
	slices.SortFunc(cancel, compareKeys)
	slices.SortFunc(release, compareKeys)
	for _, k := range cancel {
		resp.CancelTasks = append(resp.CancelTasks, k.ref())
	}
	for _, k := range release {
		resp.Released = append(resp.Released, k.ref())
	}
	for _, id := range slices.Sorted(maps.Keys(cancelJobs)) {
		resp.CancelJobs = append(resp.CancelJobs, id)
	}
	return resp
}

// released reports whether the FSM needs no more of a terminal report: it
// recorded it, or the attempt is over anyway.
func released(j *fsm.Job, k taskKey, worker string, state eddyv1.TaskState) bool {
	if !placedHere(j, k, worker) {
		return true
	}
	// The attempt still runs: a FINISHED report is recorded once the FSM
	// lists the task; a FAILED or CANCELED one ends the attempt when
	// recorded, so while it runs the report is still needed.
	return state == eddyv1.TaskState_TASK_STATE_FINISHED && finished(j, k.task)
}

// deployment builds a job attempt's deployment for the tasks one worker
// starts.
func deployment(j *fsm.Job, start []string, workers map[string]fsm.Worker) *eddyv1.Deployment {
	d := &eddyv1.Deployment{
		JobId:    j.ID,
		Attempt:  uint32(j.Attempt),
		Tenant:   j.Tenant,
		SpecYaml: j.Spec,
		TaskIds:  start,
	}
	for _, m := range j.Modules {
		d.Modules = append(d.Modules, &eddyv1.ModuleRef{Ref: m.Ref, Name: m.Name, Version: uint32(m.Version), Sha256: m.SHA256})
	}
	for _, task := range j.Tasks {
		wid := j.Deployment[task]
		d.Placements = append(d.Placements, &eddyv1.TaskPlacement{
			TaskId:      task,
			WorkerId:    wid,
			DataAddress: workers[wid].Address,
		})
	}
	deploymentOverrides(d, j)
	d.RestoreFrom, d.RestoreCheckpoint = restoreFrom(j)
	return d
}
