package fsm

import "errors"

// Errors returned (wrapped with context) by Decode, Apply and the queries.
// Match them with errors.Is.
var (
	// ErrUnsupportedVersion: a command or snapshot of a format this code
	// does not know (written by a newer version).
	ErrUnsupportedVersion = errors.New("fsm: unsupported format version")
	// ErrUnknownCommand: a command type this code does not know.
	ErrUnknownCommand = errors.New("fsm: unknown command type")
	// ErrMalformed: bytes that do not decode, or a command whose fields are
	// invalid whatever the state (an empty id, a negative size).
	ErrMalformed = errors.New("fsm: malformed command")
	// ErrCorruptSnapshot: a snapshot that does not decode or violates an
	// invariant.
	ErrCorruptSnapshot = errors.New("fsm: corrupt snapshot")
	// ErrIndexOrder: a command applied at a log index not above the last
	// one applied.
	ErrIndexOrder = errors.New("fsm: log index not increasing")

	ErrTenantNotFound = errors.New("fsm: tenant not found")
	ErrTenantExists   = errors.New("fsm: tenant already exists")
	// ErrTenantInUse: a tenant that cannot be deleted (the default tenant,
	// or one with jobs that have not ended).
	ErrTenantInUse         = errors.New("fsm: tenant in use")
	ErrTokenNotFound       = errors.New("fsm: token not found")
	ErrTokenExists         = errors.New("fsm: token already exists")
	ErrModuleNotFound      = errors.New("fsm: module not found")
	ErrWorkerNotFound      = errors.New("fsm: worker not found")
	ErrJobNotFound         = errors.New("fsm: job not found")
	ErrCoordinatorNotFound = errors.New("fsm: coordinator not found")
	// ErrCheckpointNotFound: a checkpoint id that is neither in flight nor
	// among the job's completed checkpoints and savepoints.
	ErrCheckpointNotFound = errors.New("fsm: checkpoint not found")
	// ErrSwapNotFound: a swap id above every id the job used.
	ErrSwapNotFound = errors.New("fsm: swap not found")

	// ErrJobState: the command does not apply to the job in its current
	// state (placing a running job, cancelling a finished one, triggering a
	// checkpoint while another is in flight).
	ErrJobState = errors.New("fsm: command not valid in the job's state")
	// ErrStaleAttempt: a report or decision about an attempt of a job other
	// than its current one.
	ErrStaleAttempt = errors.New("fsm: stale job attempt")
	// ErrInvalidPlacement: a deployment that does not cover the job's tasks
	// exactly, names a dead or unknown worker, or overfills a worker.
	ErrInvalidPlacement = errors.New("fsm: invalid placement")
)
