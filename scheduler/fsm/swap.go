package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	// PrevOverride is the node's override that the swap's completion
	// replaced (nil: the node ran the spec's module), so that a rollback
	// restores exactly the overrides of before the swap.
	PrevOverride *NodeOverride `json:"prev_override,omitempty"`
}

// Command types of hot swaps.
const (
	TypeBeginSwap CommandType = "begin_swap"
	TypeEndSwap   CommandType = "end_swap"
)

// BeginSwap starts a hot swap of one node of a running job: it appends a
// Swap in state PREPARING to Job.Swaps with the next Job.SwapSeq. The job
// must be RUNNING (ErrJobState) as Attempt (ErrStaleAttempt) with no swap
// in flight (ErrJobState); a swap still armed for rollback is disarmed,
// since a rollback goes back one step only. From and FromConfig are what the node runs now (the leader
// reads them from the spec and Job.Overrides); To must name a registered
// module of the job's tenant with that digest (ErrModuleNotFound). The
// configurations are JSON objects, or empty for none. Apply result: Job.
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
// A PREPARING swap may end either way and leaves the job as it was (no
// task switched yet). A SWAPPING swap may only fail: its savepoint fails
// and the job restarts, since some tasks may have switched at the barrier
// already. A swap that already ended is left alone (the result is the
// job, no error), so that a leader may repeat it; an id the job never
// used is ErrSwapNotFound. Apply result: Job.
type EndSwap struct {
	JobID  string    `json:"job_id"`
	SwapID uint64    `json:"swap_id"`
	State  SwapState `json:"state"`
	Reason string    `json:"reason"`
}

func init() {
	newCommand[TypeBeginSwap] = func() Command { return &BeginSwap{} }
	newCommand[TypeEndSwap] = func() Command { return &EndSwap{} }
}

func (*BeginSwap) Type() CommandType { return TypeBeginSwap }
func (*EndSwap) Type() CommandType   { return TypeEndSwap }

// maxConfigLen bounds a node configuration carried by a swap: it is
// replicated in every swap record and override.
const maxConfigLen = 256 << 10

// checkConfig: empty, or a JSON object of at most maxConfigLen bytes.
func checkConfig(what string, config []byte) error {
	if len(config) == 0 {
		return nil
	}
	if len(config) > maxConfigLen {
		return fmt.Errorf("%s of %d bytes, want at most %d: %w", what, len(config), maxConfigLen, ErrMalformed)
	}
	if t := bytes.TrimSpace(config); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return fmt.Errorf("%s is not a JSON object: %w", what, ErrMalformed)
	}
	return nil
}

func (c *BeginSwap) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if err := checkAttempt(c.Attempt); err != nil {
		return fmt.Errorf("job %s: %w", c.JobID, err)
	}
	if err := checkID("node", c.Node); err != nil {
		return fmt.Errorf("job %s swap: %w", c.JobID, err)
	}
	for _, f := range []struct {
		what   string
		ref    ModuleRef
		config []byte
	}{{"from", c.From, c.FromConfig}, {"to", c.To, c.ToConfig}} {
		if err := checkModuleRef(f.ref); err != nil {
			return fmt.Errorf("job %s swap of node %s: %s: %w", c.JobID, c.Node, f.what, err)
		}
		if err := checkConfig(f.what+" config", f.config); err != nil {
			return fmt.Errorf("job %s swap of node %s: %w", c.JobID, c.Node, err)
		}
	}
	return nil
}

func (c *EndSwap) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if c.SwapID == 0 {
		return fmt.Errorf("job %s: swap id 0: %w", c.JobID, ErrMalformed)
	}
	if c.State != SwapRefused && c.State != SwapFailed {
		return fmt.Errorf("job %s swap %d ends as %q, want %s or %s: %w", c.JobID, c.SwapID, c.State, SwapRefused, SwapFailed, ErrMalformed)
	}
	return nil
}

// ---- Job helpers --------------------------------------------------------

// SwapInFlight returns the job's swap that is PREPARING or SWAPPING, if
// any: the last of Job.Swaps.
func (j *Job) SwapInFlight() (Swap, bool) {
	if s := j.inFlightSwap(); s != nil {
		return s.clone(), true
	}
	return Swap{}, false
}

// Override returns the override of node, if a completed swap left one.
func (j *Job) Override(node string) (NodeOverride, bool) {
	i, found := j.overrideIndex(node)
	if !found {
		return NodeOverride{}, false
	}
	return j.Overrides[i].clone(), true
}

func (j *Job) lastSwap() *Swap {
	if len(j.Swaps) == 0 {
		return nil
	}
	return &j.Swaps[len(j.Swaps)-1]
}

func (j *Job) inFlightSwap() *Swap {
	if s := j.lastSwap(); s != nil && !s.State.Terminal() {
		return s
	}
	return nil
}

// armedSwap returns the swap a task failure would roll back, if any.
func (j *Job) armedSwap() *Swap {
	if s := j.lastSwap(); s != nil && s.Armed {
		return s
	}
	return nil
}

func (j *Job) overrideIndex(node string) (int, bool) {
	return slices.BinarySearchFunc(j.Overrides, node, func(o NodeOverride, node string) int { return strings.Compare(o.Node, node) })
}

// setOverride installs o (nil: removes the node's override) and returns
// the override it replaced, if any.
func (j *Job) setOverride(node string, o *NodeOverride) *NodeOverride {
	i, found := j.overrideIndex(node)
	var prev *NodeOverride
	if found {
		p := j.Overrides[i].clone()
		prev = &p
	}
	switch {
	case o != nil && found:
		j.Overrides[i] = o.clone()
	case o != nil:
		j.Overrides = slices.Insert(j.Overrides, i, o.clone())
	case found:
		j.Overrides = slices.Delete(j.Overrides, i, i+1)
		if len(j.Overrides) == 0 {
			j.Overrides = nil
		}
	}
	return prev
}

func (o NodeOverride) clone() NodeOverride {
	o.Config = slices.Clone(o.Config)
	return o
}

func (s Swap) clone() Swap {
	s.FromConfig = slices.Clone(s.FromConfig)
	s.ToConfig = slices.Clone(s.ToConfig)
	if s.PrevOverride != nil {
		p := s.PrevOverride.clone()
		s.PrevOverride = &p
	}
	return s
}

func cloneSwaps(swaps []Swap) []Swap {
	if swaps == nil {
		return nil
	}
	out := make([]Swap, len(swaps))
	for i, s := range swaps {
		out[i] = s.clone()
	}
	return out
}

func cloneOverrides(overrides []NodeOverride) []NodeOverride {
	if overrides == nil {
		return nil
	}
	out := make([]NodeOverride, len(overrides))
	for i, o := range overrides {
		out[i] = o.clone()
	}
	return out
}

// ---- Apply ----------------------------------------------------------------

func (a *applier) applySwap(cmd Command) (any, bool, error) {
	switch c := cmd.(type) {
	case *BeginSwap:
		res, err := a.beginSwap(c)
		return res, true, err
	case *EndSwap:
		res, err := a.endSwap(c)
		return res, true, err
	}
	return nil, false, nil
}

func (a *applier) beginSwap(c *BeginSwap) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Attempt != j.Attempt:
		return nil, fmt.Errorf("job %s swap of node %s: attempt %d, current is %d: %w", j.ID, c.Node, c.Attempt, j.Attempt, ErrStaleAttempt)
	case j.State != JobRunning:
		return nil, fmt.Errorf("job %s swap of node %s: state %s: %w", j.ID, c.Node, j.State, ErrJobState)
	}
	if s := j.inFlightSwap(); s != nil {
		return nil, fmt.Errorf("job %s swap of node %s: swap %d of node %s is %s: %w", j.ID, c.Node, s.ID, s.Node, s.State, ErrJobState)
	}
	if err := a.registeredModule(j.Tenant, c.To); err != nil {
		return nil, fmt.Errorf("job %s swap of node %s: %w", j.ID, c.Node, err)
	}
	if s := j.armedSwap(); s != nil {
		s.Armed = false
	}
	j.SwapSeq++
	j.Swaps = append(j.Swaps, Swap{
		ID:                j.SwapSeq,
		Node:              c.Node,
		Attempt:           c.Attempt,
		From:              c.From,
		To:                c.To,
		FromConfig:        slices.Clone(c.FromConfig),
		ToConfig:          slices.Clone(c.ToConfig),
		AllowDroppedState: c.AllowDroppedState,
		State:             SwapPreparing,
		Began:             a.at,
	})
	// Only the new swap can be in flight, so the oldest ones dropped here
	// have all ended.
	if over := len(j.Swaps) - MaxSwapHistory; over > 0 {
		j.Swaps = slices.Delete(j.Swaps, 0, over)
	}
	return j.clone(), nil
}

func (a *applier) endSwap(c *EndSwap) (any, error) {
	j, err := a.job(c.JobID)
	if err != nil {
		return nil, err
	}
	if c.SwapID > j.SwapSeq {
		return nil, fmt.Errorf("job %s swap %d: the last swap is %d: %w", j.ID, c.SwapID, j.SwapSeq, ErrSwapNotFound)
	}
	s := j.inFlightSwap()
	if s == nil || s.ID != c.SwapID {
		// It ended already (or so long ago that it left the history).
		return j.clone(), nil
	}
	reason := clip(c.Reason)
	switch {
	case s.State == SwapPreparing:
		a.endSwapAs(j, s, c.State, reason)
	case c.State == SwapRefused:
		return nil, fmt.Errorf("job %s swap %d refused: it is %s, past its prepare phase: %w", j.ID, s.ID, s.State, ErrJobState)
	default:
		msg := fmt.Sprintf("swap %d failed: %s", s.ID, c.Reason)
		a.endSwapAs(j, s, SwapFailed, reason)
		a.failPending(j, msg)
		a.restart(j, msg)
	}
	return j.clone(), nil
}

func (a *applier) endSwapAs(j *Job, s *Swap, state SwapState, reason string) {
	a.counts.job(j.ID).count(state)
	s.State = state
	s.Ended = a.at
	s.Reason = reason
	s.Armed = false
}

// registeredModule checks that ref names a registered version of a module
// of tenant with that digest.
func (a *applier) registeredModule(tenant string, ref ModuleRef) error {
	versions := a.st.modules[moduleKey{tenant, ref.Name}]
	if ref.Version < 1 || ref.Version > len(versions) || versions[ref.Version-1].SHA256 != ref.SHA256 {
		return fmt.Errorf("module %s@%d with sha256 %s of tenant %q: %w", ref.Name, ref.Version, ref.SHA256, tenant, ErrModuleNotFound)
	}
	return nil
}

// abandon ends what the job's attempt has in flight because the attempt
// or the job ends: the checkpoint and the swap fail with reason. An armed
// swap is disarmed: a restart for a lost worker is not the new version's
// fault, so the next attempt runs the new version again, and a failure in
// that attempt is no longer blamed on it (see RATIONALE.md, "Hot swap").
func (a *applier) abandon(j *Job, reason string) {
	a.failPending(j, reason)
	if s := j.inFlightSwap(); s != nil {
		a.endSwapAs(j, s, SwapFailed, clip(reason))
	}
	if s := j.armedSwap(); s != nil {
		s.Armed = false
	}
}

// swapOfTrigger returns the swap that the savepoint c carries out (nil for
// a checkpoint of no swap), or why c cannot; triggerCheckpoint calls it
// before it changes anything.
func (a *applier) swapOfTrigger(j *Job, c *TriggerCheckpoint) (*Swap, error) {
	if c.Swap == 0 {
		return nil, nil
	}
	s := j.inFlightSwap()
	switch {
	case s == nil || s.ID != c.Swap:
		return nil, fmt.Errorf("job %s savepoint %d: swap %d not in flight: %w", j.ID, c.ID, c.Swap, ErrJobState)
	case s.State != SwapPreparing:
		return nil, fmt.Errorf("job %s savepoint %d: swap %d is %s, not %s: %w", j.ID, c.ID, s.ID, s.State, SwapPreparing, ErrJobState)
	case s.Attempt != c.Attempt:
		return nil, fmt.Errorf("job %s savepoint %d: swap %d of attempt %d: %w", j.ID, c.ID, s.ID, s.Attempt, ErrJobState)
	}
	return s, nil
}

// swapCompleted applies a completed checkpoint to the job's swaps: the
// swap savepoint done completes its swap and arms it; any later
// checkpoint disarms it, since the job then no longer restores from the
// swap savepoint.
func (a *applier) swapCompleted(j *Job, done Checkpoint, pause time.Duration) {
	if s := j.armedSwap(); s != nil && done.ID > s.Savepoint {
		s.Armed = false
	}
	if done.Swap == 0 {
		return
	}
	s := j.inFlightSwap()
	if s == nil || s.ID != done.Swap {
		return // unreachable while the trigger checks hold
	}
	a.counts.job(j.ID).count(SwapSwapped)
	s.State = SwapSwapped
	s.Ended = a.at
	s.SavepointLocation = done.Location
	s.Pause = pause
	s.Armed = true
	s.PrevOverride = j.setOverride(s.Node, &NodeOverride{Node: s.Node, Module: s.To, Config: s.ToConfig})
}

// rollBack reverts the job's armed swap, if any, because a task failed
// with cause: the node gets back the override it had before the swap (none
// if it ran the spec's module). The caller restarts the job; the next
// attempt restores from the swap savepoint, which is the latest
// restorable one because no checkpoint completed since (else the swap
// would not be armed). It returns the job's message, "" without a
// rollback.
//
// A task failing while the swap savepoint is in flight (SWAPPING) rolls
// back too: the tasks of the node may have switched at its barrier and
// failed on their first records with the new version, before the
// savepoint could complete. No override was set yet; the next attempt
// restores from the checkpoint before the swap, with the old version.
func (a *applier) rollBack(j *Job, cause string) string {
	if s := j.inFlightSwap(); s != nil && s.State == SwapSwapping {
		a.endSwapAs(j, s, SwapRolledBack, clip(cause))
		return fmt.Sprintf("rolled back swap %d of node %s: %s", s.ID, s.Node, cause)
	}
	s := j.armedSwap()
	if s == nil {
		return ""
	}
	a.endSwapAs(j, s, SwapRolledBack, clip(cause))
	j.setOverride(s.Node, s.PrevOverride)
	return fmt.Sprintf("rolled back swap %d of node %s: %s", s.ID, s.Node, cause)
}

// checkSwaps checks the invariants of a job's swap records in a snapshot.
func checkSwaps(j *Job) error {
	if len(j.Swaps) > MaxSwapHistory {
		return fmt.Errorf("%d swaps, at most %d are kept", len(j.Swaps), MaxSwapHistory)
	}
	for i, s := range j.Swaps {
		last := i == len(j.Swaps)-1
		switch {
		case s.ID == 0 || s.ID > j.SwapSeq || i > 0 && s.ID <= j.Swaps[i-1].ID:
			return fmt.Errorf("swap %d out of sequence (last id %d)", s.ID, j.SwapSeq)
		case !slices.Contains([]SwapState{SwapPreparing, SwapSwapping, SwapSwapped, SwapRefused, SwapFailed, SwapRolledBack}, s.State):
			return fmt.Errorf("swap %d in state %q", s.ID, s.State)
		case !last && !s.State.Terminal():
			return fmt.Errorf("swap %d is %s but not the last", s.ID, s.State)
		case !last && s.Armed:
			return fmt.Errorf("swap %d is armed but not the last", s.ID)
		case s.Armed && s.State != SwapSwapped:
			return fmt.Errorf("swap %d armed while %s", s.ID, s.State)
		}
	}
	swapping := uint64(0)
	if s := j.inFlightSwap(); s != nil && s.State == SwapSwapping {
		swapping = s.ID
	}
	var pendingSwap uint64
	if p := j.PendingCheckpoint; p != nil {
		pendingSwap = p.Swap
	}
	if swapping != pendingSwap {
		return fmt.Errorf("the swap in SWAPPING is %d, the checkpoint in flight carries swap %d (0: none)", swapping, pendingSwap)
	}
	for i, o := range j.Overrides {
		if o.Node == "" || i > 0 && o.Node <= j.Overrides[i-1].Node {
			return fmt.Errorf("overrides not sorted by node")
		}
	}
	return nil
}
