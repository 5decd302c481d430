package coordinator

import (
	"strconv"
	"strings"
	"time"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// reportIndex is the latest task reports of the workers the leader counts
// as alive, for JobStatus and ListJobs.
type reportIndex struct {
	tasks map[taskKey]*eddyv1.TaskReport
	// active holds the jobs some task of which (any attempt) a worker
	// reports as not terminal.
	active map[string]bool
}

func newReportIndex() reportIndex {
	return reportIndex{tasks: map[taskKey]*eddyv1.TaskReport{}, active: map[string]bool{}}
}

func (x reportIndex) add(r *eddyv1.TaskReport) {
	k := keyOf(r.GetTask())
	x.tasks[k] = r
	if !terminalTask(r.GetState()) {
		x.active[k.job] = true
	}
}

// apiJobState refines the FSM's job state with what workers report: a
// running attempt is DEPLOYING until every unfinished task runs, and a
// canceled job is CANCELING while a worker still reports one of its tasks.
func apiJobState(j *fsm.Job, idx reportIndex) eddyv1.JobState {
	switch j.State {
	case fsm.JobWaitingForSlots:
		return eddyv1.JobState_JOB_STATE_WAITING_FOR_SLOTS
	case fsm.JobRunning:
		for _, task := range j.Tasks {
			if finished(j, task) {
				continue
			}
			r := idx.tasks[taskKey{j.ID, j.Attempt, task}]
			if s := r.GetState(); s != eddyv1.TaskState_TASK_STATE_RUNNING && s != eddyv1.TaskState_TASK_STATE_FINISHED {
				return eddyv1.JobState_JOB_STATE_DEPLOYING
			}
		}
		return eddyv1.JobState_JOB_STATE_RUNNING
	case fsm.JobRestarting:
		return eddyv1.JobState_JOB_STATE_RESTARTING
	case fsm.JobFinished:
		return eddyv1.JobState_JOB_STATE_FINISHED
	case fsm.JobFailed:
		return eddyv1.JobState_JOB_STATE_FAILED
	case fsm.JobCanceled:
		if idx.active[j.ID] {
			return eddyv1.JobState_JOB_STATE_CANCELING
		}
		return eddyv1.JobState_JOB_STATE_CANCELED
	}
	return eddyv1.JobState_JOB_STATE_UNSPECIFIED
}

func jobSummary(j *fsm.Job, idx reportIndex) *eddyv1.JobSummary {
	s := &eddyv1.JobSummary{
		JobId:           j.ID,
		Tenant:          j.Tenant,
		Name:            j.Name,
		State:           apiJobState(j, idx),
		Message:         j.Message,
		Attempt:         uint32(j.Attempt),
		SubmittedUnixMs: j.Submitted.UnixMilli(),
	}
	if j.State.Terminal() {
		s.EndedUnixMs = j.Updated.UnixMilli()
	}
	return s
}

// jobStatus describes a job and the tasks of its current attempt: where
// each runs (from the FSM) and how it does (from the latest heartbeat of
// its worker), and its recent checkpoints (now times the one in flight).
func jobStatus(j *fsm.Job, idx reportIndex, now time.Time) *eddyv1.JobStatusResponse {
	resp := &eddyv1.JobStatusResponse{Job: jobSummary(j, idx)}
	swapStatus(resp, j)
	for _, task := range j.Tasks {
		ts := &eddyv1.TaskStatus{TaskId: task, WorkerId: j.Deployment[task], Subtask: subtaskOf(task)}
		r := idx.tasks[taskKey{j.ID, j.Attempt, task}]
		switch {
		case j.Attempt > 0 && finished(j, task) || j.State == fsm.JobFinished:
			ts.State = eddyv1.TaskState_TASK_STATE_FINISHED
			ts.Metrics = r.GetMetrics()
		case r != nil && j.Attempt > 0:
			ts.State = r.GetState()
			ts.Metrics = r.GetMetrics()
			ts.Error = r.GetError()
		case ts.WorkerId != "":
			ts.State = eddyv1.TaskState_TASK_STATE_SCHEDULED
		}
		if ts.WorkerId == "" && r != nil {
			// The attempt is over (restarting, failed, canceled): show where
			// it ran and how it ended, as far as the leader still knows.
			ts.State = r.GetState()
			ts.Metrics = r.GetMetrics()
			ts.Error = r.GetError()
		}
		resp.Tasks = append(resp.Tasks, ts)
	}
	resp.Checkpoints = checkpointInfos(j, now, maxCheckpointsShown)
	return resp
}

const maxCheckpointsShown = 10

// subtaskOf is the parallel instance in a task id ("head[3]" is 3; see
// dataflow's chain.taskID), 0 for an id without one.
func subtaskOf(task string) uint32 {
	open := strings.LastIndexByte(task, '[')
	if open < 0 || !strings.HasSuffix(task, "]") {
		return 0
	}
	n, err := strconv.ParseUint(task[open+1:len(task)-1], 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}
