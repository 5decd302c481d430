package fsm

import (
	"maps"
	"slices"
	"strconv"
	"time"
)

// DefaultTenant is the tenant that exists in every fresh FSM.
const DefaultTenant = "default"

// Tenant is the unit of isolation: modules and jobs belong to exactly one.
type Tenant struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// Quota is what the tenant may use; the zero Quota bounds nothing
	// beyond the cluster's defaults.
	Quota Quota `json:"quota,omitzero"`
}

// Coordinator is a member of the Raft group as known to clients: followers
// look up the leader's API address here to forward or redirect requests.
type Coordinator struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	APIAddress  string `json:"api_address"`
}

// Module is one registered version of an operator module. The bytes live in
// the blob store under SHA256; the FSM records only their identity.
type Module struct {
	Tenant  string `json:"tenant"`
	Name    string `json:"name"`
	Version int    `json:"version"` // 1, 2, ... per (tenant, name)
	// SHA256 is the lowercase hex digest of the module's bytes.
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
}

// Ref is the module's reference as a job spec writes it: "name@version".
func (m Module) Ref() string { return m.Name + "@" + strconv.Itoa(m.Version) }

// ModuleRef is a module reference of a job spec pinned at submission to one
// registered version, so that every task of every attempt runs the same
// bytes even after newer versions are uploaded.
type ModuleRef struct {
	// Ref is the reference as the spec writes it: "name" or "name@version".
	Ref     string `json:"ref"`
	Name    string `json:"name"`
	Version int    `json:"version"`
	SHA256  string `json:"sha256"`
}

// WorkerState says whether the leader considers a worker usable.
type WorkerState string

// Worker states.
const (
	WorkerAlive WorkerState = "ALIVE"
	WorkerDead  WorkerState = "DEAD"
)

// Worker is a process offering slots to run tasks.
type Worker struct {
	ID string `json:"id"`
	// Address is where other workers and the coordinator reach its data and
	// control services.
	Address string `json:"address"`
	Slots   int    `json:"slots"`
	// Incarnation identifies one run of the worker process. A worker that
	// registers again with another incarnation has lost its tasks.
	Incarnation string      `json:"incarnation"`
	State       WorkerState `json:"state"`
	// Message says why a dead worker is dead.
	Message    string    `json:"message,omitempty"`
	Registered time.Time `json:"registered"`
	Updated    time.Time `json:"updated"`

	// UsedSlots is derived by queries (tasks of running jobs deployed here
	// that have not finished); it is not part of the replicated state.
	UsedSlots int `json:"-"`
}

// FreeSlots is the number of slots a new task could use: zero for a dead
// worker.
func (w Worker) FreeSlots() int {
	if w.State != WorkerAlive || w.UsedSlots >= w.Slots {
		return 0
	}
	return w.Slots - w.UsedSlots
}

// JobState is the lifecycle state of a job. The names match the API's.
type JobState string

// Job states.
const (
	// JobWaitingForSlots: submitted (or restarting) and not placed, because
	// there are too few free slots; Message says how many it needs.
	JobWaitingForSlots JobState = "WAITING_FOR_SLOTS"
	// JobRunning: placed; Deployment says where each task runs.
	JobRunning JobState = "RUNNING"
	// JobRestarting: a task failed or its worker was lost; the leader will
	// place the job again (after its restart backoff) or fail it.
	JobRestarting JobState = "RESTARTING"
	JobFinished   JobState = "FINISHED"
	JobFailed     JobState = "FAILED"
	JobCanceled   JobState = "CANCELED"
)

// Terminal reports whether a job in this state will never run again.
func (s JobState) Terminal() bool {
	return s == JobFinished || s == JobFailed || s == JobCanceled
}

// Job is a submitted job and its current deployment.
type Job struct {
	// ID is assigned by the FSM: "job-<n>", n counting the cluster's jobs
	// (see SubmitJob.Numbered).
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	// Spec is the job spec as submitted; the FSM does not interpret it.
	Spec []byte `json:"spec,omitempty"`
	// Modules are the spec's module references, pinned at submission.
	Modules []ModuleRef `json:"modules,omitempty"`
	// RequestID is the client's idempotency key of the submission, if any:
	// another SubmitJob of the tenant with the same key returns this job.
	RequestID string `json:"request_id,omitempty"`
	// FromSavepoint is the savepoint the job was submitted with: attempts
	// restore from it until the job has a completed checkpoint of its own.
	// Empty: from empty state.
	FromSavepoint string `json:"from_savepoint,omitempty"`
	// Tasks are the job's task ids, each needing one slot, as computed from
	// the spec when the job was submitted.
	Tasks   []string `json:"tasks,omitempty"`
	State   JobState `json:"state"`
	Message string   `json:"message,omitempty"`
	// Attempt counts placements: 0 until first placed, then 1, 2, ... Task
	// reports name the attempt they belong to; reports of older attempts are
	// refused.
	Attempt int `json:"attempt"`
	// Restarts counts transitions from RUNNING to RESTARTING.
	Restarts int `json:"restarts"`
	// Deployment maps each task id to the worker id running it in the
	// current attempt. Workers reconcile against the deployments of RUNNING
	// jobs: a task not in one of them must stop.
	Deployment map[string]string `json:"deployment,omitempty"`
	// FinishedTasks are the tasks of the current attempt that have finished,
	// sorted; a finished task no longer holds its slot.
	FinishedTasks []string `json:"finished_tasks,omitempty"`
	// SubmitIndex is the log index of the SubmitJob command; jobs are listed
	// in this order.
	SubmitIndex uint64    `json:"submit_index"`
	Submitted   time.Time `json:"submitted"`
	Updated     time.Time `json:"updated"`

	// CheckpointStorage is the URL of the job's checkpoint storage, fixed at
	// submission; empty for jobs submitted before it was recorded (the
	// leader's default applies).
	CheckpointStorage string `json:"checkpoint_storage,omitempty"`
	// Checkpoints are the job's retained completed checkpoints, oldest
	// first (at most the Retain of the latest CheckpointCompleted);
	// Savepoints its completed savepoints, oldest first, all kept. The
	// latest of either that is not Bad is what the next attempt restores
	// from.
	Checkpoints []Checkpoint `json:"checkpoints,omitempty"`
	Savepoints  []Checkpoint `json:"savepoints,omitempty"`
	// CheckpointSeq is the id of the last checkpoint triggered: ids
	// increase per job, across attempts and leaders.
	CheckpointSeq uint64 `json:"checkpoint_seq,omitempty"`
	// PendingCheckpoint is the checkpoint in flight (at most one), if any.
	PendingCheckpoint *Checkpoint `json:"pending_checkpoint,omitempty"`
	// FailedCheckpoints are the most recent failed checkpoints, oldest
	// first, at most MaxFailedCheckpoints: for the job's status.
	FailedCheckpoints []Checkpoint `json:"failed_checkpoints,omitempty"`
	// CheckpointEnded is when the last checkpoint completed or failed: the
	// minimum pause counts from it.
	CheckpointEnded time.Time `json:"checkpoint_ended,omitzero"`
	// CheckpointsToDelete are the ids of checkpoints no longer retained
	// (superseded, failed, or copied into a savepoint) whose files the
	// leader still has to delete; it clears them with CheckpointsDeleted.
	CheckpointsToDelete []uint64 `json:"checkpoints_to_delete,omitempty"`

	// Overrides are the nodes whose module or configuration a completed
	// hot swap changed, sorted by node: deployments apply them to the spec.
	Overrides []NodeOverride `json:"overrides,omitempty"`
	// Swaps is the job's hot-swap history, oldest first, at most
	// MaxSwapHistory; the swap in flight, if any, is the last.
	Swaps []Swap `json:"swaps,omitempty"`
	// SwapSeq is the id of the last swap begun.
	SwapSeq uint64 `json:"swap_seq,omitempty"`
}

// MaxFailedCheckpoints bounds Job.FailedCheckpoints.
const MaxFailedCheckpoints = 10

// Checkpoint is a checkpoint or savepoint of a job: in flight, completed or
// failed.
type Checkpoint struct {
	ID      uint64 `json:"id"`
	Attempt int    `json:"attempt"`
	// Savepoint: a user-triggered savepoint, not a periodic checkpoint.
	Savepoint bool `json:"savepoint,omitempty"`
	// Swap is the id of the hot swap this savepoint carries out (a
	// savepoint of kind swap); 0 for any other.
	Swap uint64 `json:"swap,omitempty"`
	// Location is the key of the checkpoint manifest in the job's
	// checkpoint storage (for a savepoint, the one in its self-contained
	// copy); set once completed.
	Location  string    `json:"location,omitempty"`
	Triggered time.Time `json:"triggered,omitzero"`
	// Completed is when it completed or failed.
	Completed time.Time     `json:"completed,omitzero"`
	Duration  time.Duration `json:"duration,omitempty"`
	// FullSize is the bytes of state the checkpoint references;
	// IncrementalSize the bytes uploaded for it.
	FullSize        int64 `json:"full_size,omitempty"`
	IncrementalSize int64 `json:"incremental_size,omitempty"`
	// Error says why a failed checkpoint failed.
	Error string `json:"error,omitempty"`
	// Bad says why restoring from a completed checkpoint failed: it is not
	// restored from again.
	Bad string `json:"bad,omitempty"`
}

// LatestRestorable returns the completed checkpoint or savepoint with the
// highest id that is not bad.
func (j *Job) LatestRestorable() (Checkpoint, bool) {
	var best Checkpoint
	found := false
	for _, list := range [][]Checkpoint{j.Checkpoints, j.Savepoints} {
		for _, c := range list {
			if c.Bad == "" && (!found || c.ID > best.ID) {
				best, found = c, true
			}
		}
	}
	return best, found
}

// LatestCompleted returns the completed checkpoint or savepoint with the
// highest id, bad or not.
func (j *Job) LatestCompleted() (Checkpoint, bool) {
	var best Checkpoint
	found := false
	for _, list := range [][]Checkpoint{j.Checkpoints, j.Savepoints} {
		for _, c := range list {
			if !found || c.ID > best.ID {
				best, found = c, true
			}
		}
	}
	return best, found
}

func (j *Job) clone() Job {
	c := *j
	c.Spec = slices.Clone(j.Spec)
	c.Modules = slices.Clone(j.Modules)
	c.Tasks = slices.Clone(j.Tasks)
	c.Deployment = maps.Clone(j.Deployment)
	c.FinishedTasks = slices.Clone(j.FinishedTasks)
	c.Checkpoints = slices.Clone(j.Checkpoints)
	c.Savepoints = slices.Clone(j.Savepoints)
	if j.PendingCheckpoint != nil {
		p := *j.PendingCheckpoint
		c.PendingCheckpoint = &p
	}
	c.FailedCheckpoints = slices.Clone(j.FailedCheckpoints)
	c.CheckpointsToDelete = slices.Clone(j.CheckpointsToDelete)
	c.Overrides = cloneOverrides(j.Overrides)
	c.Swaps = cloneSwaps(j.Swaps)
	return c
}

// holdsSlots reports whether the job's unfinished tasks occupy slots.
func (j *Job) holdsSlots() bool { return j.State == JobRunning }

func (j *Job) taskFinished(task string) bool {
	_, found := slices.BinarySearch(j.FinishedTasks, task)
	return found
}

func (j *Job) hasTask(task string) bool { return slices.Contains(j.Tasks, task) }
