package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// CommandVersion is the version of the command envelope written by Encode.
const CommandVersion = 1

// CommandType names a command on the wire. The values are stable: a log
// written by one version is replayed by the next.
type CommandType string

// Command types.
const (
	TypeCreateTenant        CommandType = "create_tenant"
	TypeRegisterCoordinator CommandType = "register_coordinator"
	TypeRegisterModule      CommandType = "register_module"
	TypeRegisterWorker      CommandType = "register_worker"
	TypeWorkerDown          CommandType = "worker_down"
	TypeSubmitJob           CommandType = "submit_job"
	TypePlaceJob            CommandType = "place_job"
	TypeJobWaiting          CommandType = "job_waiting"
	TypeTaskFinished        CommandType = "task_finished"
	TypeTaskFailed          CommandType = "task_failed"
	TypeFinishJob           CommandType = "finish_job"
	TypeFailJob             CommandType = "fail_job"
	TypeCancelJob           CommandType = "cancel_job"
	TypeTriggerCheckpoint   CommandType = "trigger_checkpoint"
	TypeCheckpointCompleted CommandType = "checkpoint_completed"
	TypeCheckpointFailed    CommandType = "checkpoint_failed"
	TypeCheckpointsDeleted  CommandType = "checkpoints_deleted"
)

// newCommand maps each known type to a constructor of its body; Decode
// refuses every other type.
var newCommand = map[CommandType]func() Command{
	TypeCreateTenant:        func() Command { return &CreateTenant{} },
	TypeRegisterCoordinator: func() Command { return &RegisterCoordinator{} },
	TypeRegisterModule:      func() Command { return &RegisterModule{} },
	TypeRegisterWorker:      func() Command { return &RegisterWorker{} },
	TypeWorkerDown:          func() Command { return &WorkerDown{} },
	TypeSubmitJob:           func() Command { return &SubmitJob{} },
	TypePlaceJob:            func() Command { return &PlaceJob{} },
	TypeJobWaiting:          func() Command { return &JobWaiting{} },
	TypeTaskFinished:        func() Command { return &TaskFinished{} },
	TypeTaskFailed:          func() Command { return &TaskFailed{} },
	TypeFinishJob:           func() Command { return &FinishJob{} },
	TypeFailJob:             func() Command { return &FailJob{} },
	TypeCancelJob:           func() Command { return &CancelJob{} },
	TypeTriggerCheckpoint:   func() Command { return &TriggerCheckpoint{} },
	TypeCheckpointCompleted: func() Command { return &CheckpointCompleted{} },
	TypeCheckpointFailed:    func() Command { return &CheckpointFailed{} },
	TypeCheckpointsDeleted:  func() Command { return &CheckpointsDeleted{} },
}

// Command is the body of one replicated command. The set is closed: only the
// types of this package implement it.
type Command interface {
	// Type is the command's wire type.
	Type() CommandType
	// validate checks what does not depend on the state.
	validate() error
}

// CreateTenant adds a tenant. Apply result: Tenant.
type CreateTenant struct {
	ID    string `json:"id"`
	Quota Quota  `json:"quota,omitzero"`
}

// RegisterCoordinator records (or updates) a member's addresses. Apply
// result: Coordinator.
type RegisterCoordinator struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	APIAddress  string `json:"api_address"`
}

// RegisterModule records a module whose bytes are already in the blob store.
// The version is the next one for (Tenant, Name), unless the latest version
// has the same digest: then that version is returned and nothing changes, so
// that retrying an upload is harmless. Apply result: Module.
type RegisterModule struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// RegisterWorker adds a worker, or marks a known one alive with a new
// address and slot count. A different Incarnation means the worker process
// restarted and lost its tasks: jobs with unfinished tasks on it restart.
// Apply result: Worker.
type RegisterWorker struct {
	ID          string `json:"id"`
	Address     string `json:"address"`
	Slots       int    `json:"slots"`
	Incarnation string `json:"incarnation"`
}

// WorkerDown marks a worker dead (the leader stopped hearing its
// heartbeats). Running jobs with unfinished tasks on it go to RESTARTING.
// Marking a dead worker dead again changes nothing. Apply result: []string,
// the ids of the jobs that went to RESTARTING, sorted.
type WorkerDown struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// SubmitJob adds a job in state WAITING_FOR_SLOTS. Its id is job-N, N the
// cluster's next job number (see Numbered). When RequestID is set and the
// tenant already has a job submitted with it, that job is the result and
// nothing changes, so that a client may retry a submission whose outcome it
// did not learn. Every module reference must name a registered version
// with that digest. Apply result: Job.
type SubmitJob struct {
	// Numbered is set by every proposer: the job's number is the next of
	// the cluster's count of jobs (job-1, job-2, …; a number an older job
	// holds is skipped). A command without it is from a log written before
	// jobs were numbered, whose ids were the log index of the submission:
	// it keeps that id, so that old logs replay to the same state.
	Numbered bool   `json:"numbered,omitempty"`
	Tenant   string `json:"tenant"`
	Name     string `json:"name"`
	Spec     []byte `json:"spec,omitempty"`
	// Tasks are the job's task ids (unique, non-empty), each needing a slot.
	Tasks []string `json:"tasks"`
	// Modules are the spec's module references, resolved by the leader.
	Modules       []ModuleRef `json:"modules,omitempty"`
	RequestID     string      `json:"request_id,omitempty"`
	FromSavepoint string      `json:"from_savepoint,omitempty"`
	// CheckpointSeq starts the job's checkpoint ids above the id of the
	// savepoint it starts from, so that they keep increasing across the
	// restore (sinks order what they staged by checkpoint id).
	CheckpointSeq uint64 `json:"checkpoint_seq,omitempty"`
	// CheckpointStorage is the URL of the job's checkpoint storage, fixed
	// at submission (the spec's, or the leader's default then), so that a
	// leader with another default does not lose the job's checkpoints.
	CheckpointStorage string `json:"checkpoint_storage,omitempty"`
}

// PlaceJob deploys a waiting or restarting job: every task onto an alive
// worker with a free slot. Attempt must be the job's current attempt plus
// one, which makes a repeated or stale decision fail instead of redeploying.
// Apply result: Job.
type PlaceJob struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Deployment maps every task of the job to a worker id.
	Deployment map[string]string `json:"deployment"`
}

// JobWaiting records that a waiting or restarting job cannot be placed yet
// (state WAITING_FOR_SLOTS) and why. Apply result: Job.
type JobWaiting struct {
	JobID   string `json:"job_id"`
	Message string `json:"message"`
}

// TaskFinished records that a task of the running attempt finished; when
// all have, the job is FINISHED. Reporting a finished task again changes
// nothing. Apply result: Job.
type TaskFinished struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	TaskID  string `json:"task_id"`
}

// TaskFailed records that a task of the running attempt failed: the job goes
// to RESTARTING. Whether and when it is placed again is the leader's restart
// strategy; it gives up with FailJob. Apply result: Job.
type TaskFailed struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	TaskID  string `json:"task_id"`
	Message string `json:"message,omitempty"`
}

// FinishJob ends a running attempt successfully, whatever its tasks
// reported. Apply result: Job.
type FinishJob struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
}

// FailJob ends a job that is not yet terminal as FAILED (for example when
// its restart strategy gives up). Apply result: Job.
type FailJob struct {
	JobID   string `json:"job_id"`
	Message string `json:"message"`
}

// CancelJob ends a job that is not yet terminal as CANCELED. Tenant must be
// the job's: one tenant cannot cancel another's job. Apply result: Job.
type CancelJob struct {
	Tenant string `json:"tenant"`
	JobID  string `json:"job_id"`
}

// TriggerCheckpoint starts checkpoint ID of the running attempt of a job:
// the job must be RUNNING as Attempt, have no checkpoint in flight, and ID
// must be above every id the job used before (Job.CheckpointSeq). Apply
// result: Job.
type TriggerCheckpoint struct {
	JobID     string `json:"job_id"`
	Attempt   int    `json:"attempt"`
	ID        uint64 `json:"id"`
	Savepoint bool   `json:"savepoint,omitempty"`
	// Swap names the job's swap in flight (state PREPARING, same attempt)
	// that this savepoint carries out: Savepoint must be set, and the swap
	// becomes SWAPPING with this checkpoint as its savepoint.
	Swap uint64 `json:"swap,omitempty"`
}

// CheckpointCompleted records that the checkpoint in flight completed: every
// task acknowledged and the leader wrote its checkpoint manifest at
// Manifest (for a savepoint, the manifest of its self-contained copy).
// Savepoint must match the trigger. A checkpoint joins Job.Checkpoints, of
// which the job keeps the latest Retain: older ones move to
// CheckpointsToDelete. A savepoint joins Job.Savepoints, and the
// checkpoint files it was copied from move to CheckpointsToDelete. Apply
// result: Job.
type CheckpointCompleted struct {
	JobID     string `json:"job_id"`
	Attempt   int    `json:"attempt"`
	ID        uint64 `json:"id"`
	Savepoint bool   `json:"savepoint,omitempty"`
	Manifest  string `json:"manifest"`
	// Duration is from the trigger to the completion.
	Duration        time.Duration `json:"duration,omitempty"`
	FullSize        int64         `json:"full_size,omitempty"`
	IncrementalSize int64         `json:"incremental_size,omitempty"`
	// Retain is how many completed checkpoints the job keeps (at least 1;
	// ignored for a savepoint).
	Retain int `json:"retain,omitempty"`
	// SwapPause is, for a swap savepoint, the longest time a task of the
	// swapped node held its input for the swap.
	SwapPause time.Duration `json:"swap_pause,omitempty"`
}

// CheckpointFailed fails the checkpoint in flight with id ID (timed out,
// its manifest could not be written, ...): it joins FailedCheckpoints and
// its files move to CheckpointsToDelete. For a completed checkpoint or
// savepoint it marks it bad instead (restoring from it failed): later
// attempts restore from the one before. Apply result: Job.
type CheckpointFailed struct {
	JobID  string `json:"job_id"`
	ID     uint64 `json:"id"`
	Reason string `json:"reason"`
}

// CheckpointsDeleted records that the leader deleted the files of the
// checkpoints IDs of Job.CheckpointsToDelete; ids not in the list are
// ignored. Apply result: Job.
type CheckpointsDeleted struct {
	JobID string   `json:"job_id"`
	IDs   []uint64 `json:"ids"`
}

func (*CreateTenant) Type() CommandType        { return TypeCreateTenant }
func (*RegisterCoordinator) Type() CommandType { return TypeRegisterCoordinator }
func (*RegisterModule) Type() CommandType      { return TypeRegisterModule }
func (*RegisterWorker) Type() CommandType      { return TypeRegisterWorker }
func (*WorkerDown) Type() CommandType          { return TypeWorkerDown }
func (*SubmitJob) Type() CommandType           { return TypeSubmitJob }
func (*PlaceJob) Type() CommandType            { return TypePlaceJob }
func (*JobWaiting) Type() CommandType          { return TypeJobWaiting }
func (*TaskFinished) Type() CommandType        { return TypeTaskFinished }
func (*TaskFailed) Type() CommandType          { return TypeTaskFailed }
func (*FinishJob) Type() CommandType           { return TypeFinishJob }
func (*FailJob) Type() CommandType             { return TypeFailJob }
func (*CancelJob) Type() CommandType           { return TypeCancelJob }
func (*TriggerCheckpoint) Type() CommandType   { return TypeTriggerCheckpoint }
func (*CheckpointCompleted) Type() CommandType { return TypeCheckpointCompleted }
func (*CheckpointFailed) Type() CommandType    { return TypeCheckpointFailed }
func (*CheckpointsDeleted) Type() CommandType  { return TypeCheckpointsDeleted }

// envelope is the wire form of a command.
type envelope struct {
	Version int         `json:"v"`
	Type    CommandType `json:"type"`
	// At is the leader's time of proposal, in milliseconds since the Unix
	// epoch: the only clock the FSM sees.
	At   int64           `json:"at"`
	Body json.RawMessage `json:"body"`
}

// maxAtMillis is the last millisecond of year 9999: later times do not
// encode in a snapshot (RFC 3339).
const maxAtMillis = 253402300799999

// Envelope is a decoded command.
type Envelope struct {
	Version int
	Type    CommandType
	At      time.Time // UTC, millisecond precision
	Command Command
}

// Encode validates cmd and encodes it, stamped with the proposal time at
// (kept to the millisecond), for Raft's log.
func Encode(cmd Command, at time.Time) ([]byte, error) {
	if cmd == nil {
		return nil, fmt.Errorf("encode: nil command: %w", ErrMalformed)
	}
	if err := cmd.validate(); err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd.Type(), err)
	}
	if ms := at.UnixMilli(); ms < 0 || ms > maxAtMillis {
		return nil, fmt.Errorf("encode %s: time %s out of range: %w", cmd.Type(), at, ErrMalformed)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd.Type(), err)
	}
	return json.Marshal(envelope{Version: CommandVersion, Type: cmd.Type(), At: at.UnixMilli(), Body: body})
}

// Decode decodes a command written by Encode. It refuses versions and types
// it does not know; it does not validate the body against any state.
func Decode(data []byte) (Envelope, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Envelope{}, fmt.Errorf("decode command: %w: %v", ErrMalformed, err)
	}
	if env.Version != CommandVersion {
		return Envelope{}, fmt.Errorf("decode command: version %d (this build reads %d): %w", env.Version, CommandVersion, ErrUnsupportedVersion)
	}
	mk, ok := newCommand[env.Type]
	if !ok {
		return Envelope{}, fmt.Errorf("decode command: type %q: %w", env.Type, ErrUnknownCommand)
	}
	if env.At < 0 || env.At > maxAtMillis {
		return Envelope{}, fmt.Errorf("decode %s: time %d out of range: %w", env.Type, env.At, ErrMalformed)
	}
	cmd := mk()
	if len(bytes.TrimSpace(env.Body)) == 0 || bytes.Equal(bytes.TrimSpace(env.Body), []byte("null")) {
		return Envelope{}, fmt.Errorf("decode %s: no body: %w", env.Type, ErrMalformed)
	}
	if err := json.Unmarshal(env.Body, cmd); err != nil {
		return Envelope{}, fmt.Errorf("decode %s: %w: %v", env.Type, ErrMalformed, err)
	}
	return Envelope{
		Version: env.Version,
		Type:    env.Type,
		At:      time.UnixMilli(env.At).UTC(),
		Command: cmd,
	}, nil
}
