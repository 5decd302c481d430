package fsm

import (
	"time"
)

// Hot swap (docs/rfcs/2026-12-02-hot-swap.md): the FSM's part is the
// swap's record, the one swap in flight per job, and the node overrides a
// completed swap leaves behind, so that every later attempt (and every
// leader) deploys the version the job was swapped to.

// SwapState is where a hot swap is. The names match the API's.
type SwapState string

// Swap states.
const (
	// SwapPreparing: the workers of the node prepare the new version.
	SwapPreparing SwapState = "PREPARING"
	// SwapSwapping: prepared everywhere; the swap savepoint is in flight.
	SwapSwapping SwapState = "SWAPPING"
	// SwapSwapped: the swap savepoint completed; the node runs the new
	// version (Job.Overrides). Armed until the next checkpoint completes.
	SwapSwapped SwapState = "SWAPPED"
	// SwapRefused: the prepare phase refused the new version.
	SwapRefused SwapState = "REFUSED"
	// SwapFailed: the swap did not complete; the job keeps the old version.
	SwapFailed SwapState = "FAILED"
	// SwapRolledBack: a task failed while the swap was armed; the job is
	// restored from the swap savepoint with the old version.
	SwapRolledBack SwapState = "ROLLED_BACK"
)

// Terminal reports whether a swap in this state is over (SWAPPED is over
// even while armed: another swap may begin).
func (s SwapState) Terminal() bool {
	return s != SwapPreparing && s != SwapSwapping
}

// MaxSwapHistory bounds Job.Swaps: the oldest records are dropped.
const MaxSwapHistory = 50

// NodeOverride is what a completed swap changed about one node: the
// module and configuration it runs instead of the spec's.
type NodeOverride struct {
	Node   string    `json:"node"`
	Module ModuleRef `json:"module"`
	// Config is the node's configuration as a JSON object.
	Config []byte `json:"config,omitempty"`
}

// Swap is one hot swap of a job: its record in the job's history.
type Swap struct {
	// ID increases per job (Job.SwapSeq), from 1.
	ID   uint64 `json:"id"`
	Node string `json:"node"`
	// Attempt is the attempt the swap was begun in; it applies to that
	// attempt only.
	Attempt int `json:"attempt"`
	// From and To are the node's module before and after; equal when only
	// the configuration changes. FromConfig and ToConfig likewise (JSON).
	From       ModuleRef `json:"from"`
	To         ModuleRef `json:"to"`
	FromConfig []byte    `json:"from_config,omitempty"`
	ToConfig   []byte    `json:"to_config,omitempty"`
	// AllowDroppedState: a state the running version declared and the new
	// one does not is dropped instead of refusing the swap.
	AllowDroppedState bool      `json:"allow_dropped_state,omitempty"`
	State             SwapState `json:"state"`
	Began             time.Time `json:"began"`
	Ended             time.Time `json:"ended,omitzero"`
	// Savepoint is the id of the swap savepoint once triggered;
	// SavepointLocation its manifest once completed.
	Savepoint         uint64 `json:"savepoint,omitempty"`
	SavepointLocation string `json:"savepoint_location,omitempty"`
	// Pause is the longest time a task of the node held its input for the
	// swap, as the tasks measured it.
	Pause time.Duration `json:"pause,omitempty"`
	// Reason says why the swap was refused, failed or rolled back.
	Reason string `json:"reason,omitempty"`
	// Armed: SWAPPED and no checkpoint completed since; a task failure
	// now rolls the job back to the swap savepoint with From.
	Armed bool `json:"armed,omitempty"`
}

// Command types of hot swaps.
const (
	TypeBeginSwap CommandType = "begin_swap"
	TypeEndSwap   CommandType = "end_swap"
)

// BeginSwap starts a hot swap of one node of a running job: it appends a
// Swap in state PREPARING to Job.Swaps with the next Job.SwapSeq. The job
// must be RUNNING as Attempt with no swap in flight (ErrJobState
// otherwise). From and FromConfig are what the node runs now (the leader
// reads them from the spec and Job.Overrides); To must name a registered
// module of the job's tenant with that digest. Apply result: Job.
type BeginSwap struct {
	JobID             string    `json:"job_id"`
	Attempt           int       `json:"attempt"`
	Node              string    `json:"node"`
	From              ModuleRef `json:"from"`
	To                ModuleRef `json:"to"`
	FromConfig        []byte    `json:"from_config,omitempty"`
	ToConfig          []byte    `json:"to_config,omitempty"`
	AllowDroppedState bool      `json:"allow_dropped_state,omitempty"`
}

// EndSwap ends the job's swap in flight with id SwapID before its
// savepoint completed: State is SwapRefused (a worker refused the new
// version, or the prepare timed out: the job is untouched) or SwapFailed.
// A swap that already ended is left alone (the result is the job, no
// error), so that a leader may repeat it. Apply result: Job.
type EndSwap struct {
	JobID  string    `json:"job_id"`
	SwapID uint64    `json:"swap_id"`
	State  SwapState `json:"state"`
	Reason string    `json:"reason"`
}

func (*BeginSwap) Type() CommandType { return TypeBeginSwap }
func (*EndSwap) Type() CommandType   { return TypeEndSwap }
