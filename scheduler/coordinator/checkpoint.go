package coordinator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// This file is the deterministic core of the checkpoint coordinator: when
// to trigger, fail, finalize a job's checkpoints and collect the files of
// old ones, as a function of the replicated state, what this leader heard
// (acknowledgements, running tasks, savepoint requests) and the time. The
// I/O it asks for (writing manifests, copying savepoints, deleting files)
// is in checkpointio.go; the leader's loop runs both (leader.go).

// checkpointConfig is what the leader reads of a job's spec for its
// checkpoints. Every job has one: without a checkpoint section it takes no
// periodic checkpoints, but a savepoint may still be requested.
type checkpointConfig struct {
	// periodic: the spec has a checkpoint section.
	periodic bool
	interval time.Duration
	timeout  time.Duration
	minPause time.Duration
	retain   int
	// storage is the URL of the job's checkpoint storage: the spec's, or
	// the coordinator's default.
	storage        string
	maxParallelism int
}

// checkpointConfigOf reads a job's checkpoint settings from its spec (as
// submitted, so already validated).
func checkpointConfigOf(spec []byte, defaultStorage string) (checkpointConfig, error) {
	s, err := jobspec.Parse(spec, "")
	if err != nil {
		return checkpointConfig{}, err
	}
	cfg := checkpointConfig{
		timeout:        jobspec.DefaultCheckpointTimeout.D(),
		retain:         jobspec.DefaultCheckpointRetain,
		storage:        defaultStorage,
		maxParallelism: s.MaxParallelism,
	}
	if c := s.Checkpoint; c != nil {
		cfg.periodic = true
		cfg.interval = c.Interval.D()
		cfg.minPause = c.MinPause.D()
		if c.Timeout > 0 {
			cfg.timeout = c.Timeout.D()
		}
		if c.Retain > 0 {
			cfg.retain = c.Retain
		}
		if c.Storage != "" {
			cfg.storage = c.Storage
		}
	}
	return cfg, nil
}

// inFlightView is what this leader knows of a job's checkpoint in flight:
// its id (set when this term triggered it) and the tasks that
// acknowledged it.
type inFlightView struct {
	id    uint64
	acked map[string]bool
}

// checkpointRound is the input of one round of checkpoint decisions.
type checkpointRound struct {
	now  time.Time
	jobs []fsm.Job
	// configs holds the checkpoint settings of every job whose spec reads
	// (all of them, unless the FSM and this build disagree).
	configs map[string]checkpointConfig
	// running holds the running jobs whose every unfinished task of the
	// current attempt is reported RUNNING, and since when this leader
	// sees them so.
	running map[string]time.Time
	// inFlight holds the checkpoints in flight that this term triggered.
	inFlight map[string]inFlightView
	// savepoints holds the jobs a TriggerSavepoint call waits for a new
	// savepoint of.
	savepoints map[string]bool
	// busy holds the jobs whose checkpoint files the leader is writing or
	// deleting now; collectAfter the jobs whose files could not be deleted,
	// with when to try again.
	busy         map[string]bool
	collectAfter map[string]time.Time
	// swapReady holds the jobs whose swap in flight every worker of its
	// node prepared, with the swap's id: their next checkpoint is its
	// savepoint, before any other.
	swapReady map[string]uint64
}

// checkpointPlan is the output of a round: commands to propose, the I/O to
// start, and when to decide again if nothing changes before.
type checkpointPlan struct {
	commands []fsm.Command
	// finalize: jobs whose checkpoint in flight every task acknowledged:
	// write its manifest (copy the savepoint) and commit it.
	finalize []string
	// collect: jobs with checkpoints to delete: delete their files and
	// commit CheckpointsDeleted.
	collect []string
	wakeAt  time.Time
}

func (p *checkpointPlan) wake(at time.Time) {
	if p.wakeAt.IsZero() || at.Before(p.wakeAt) {
		p.wakeAt = at
	}
}

// decideCheckpoints runs one round of checkpoint decisions. For each job,
// in order:
//   - a checkpoint in flight that this term did not trigger fails (the
//     acknowledgements went to the previous leader); one past its timeout
//     fails; one that a finished task never acknowledged fails; one that
//     every task acknowledged is finalized;
//   - otherwise, checkpoints to delete are collected first (no trigger
//     while the leader deletes files: a task could otherwise reference a
//     state file the leader is about to delete);
//   - otherwise a running job whose tasks all run, none finished, takes a
//     savepoint if one is requested, or else a checkpoint once the interval
//     passed since the last trigger (and since its tasks run) and the
//     minimum pause since the last one ended.
func decideCheckpoints(r checkpointRound) checkpointPlan {
	var p checkpointPlan
	for i := range r.jobs {
		j := &r.jobs[i]
		cfg, ok := r.configs[j.ID]
		if !ok {
			continue
		}
		if pending := j.PendingCheckpoint; pending != nil {
			decideInFlight(&p, r, j, pending, cfg)
			continue
		}
		if r.busy[j.ID] {
			continue
		}
		if len(j.CheckpointsToDelete) > 0 {
			at, later := r.collectAfter[j.ID]
			if !later || !r.now.Before(at) {
				p.collect = append(p.collect, j.ID)
				continue
			}
			p.wake(at) // and meanwhile checkpoints go on
		}
		since, ok := r.running[j.ID]
		if j.State != fsm.JobRunning || !ok || len(j.FinishedTasks) > 0 {
			continue
		}
		next := fsm.TriggerCheckpoint{JobID: j.ID, Attempt: j.Attempt, ID: j.CheckpointSeq + 1}
		if swap := r.swapReady[j.ID]; swap != 0 {
			next.Savepoint, next.Swap = true, swap
			p.commands = append(p.commands, &next)
			continue
		}
		if r.savepoints[j.ID] {
			next.Savepoint = true
			p.commands = append(p.commands, &next)
			continue
		}
		if !cfg.periodic {
			continue
		}
		at := since.Add(cfg.interval)
		if last := lastTriggered(j); !last.IsZero() {
			at = latest(at, last.Add(cfg.interval))
		}
		if !j.CheckpointEnded.IsZero() {
			at = latest(at, j.CheckpointEnded.Add(cfg.minPause))
		}
		if r.now.Before(at) {
			p.wake(at)
			continue
		}
		p.commands = append(p.commands, &next)
	}
	return p
}

func decideInFlight(p *checkpointPlan, r checkpointRound, j *fsm.Job, pending *fsm.Checkpoint, cfg checkpointConfig) {
	fail := func(reason string) {
		p.commands = append(p.commands, &fsm.CheckpointFailed{JobID: j.ID, ID: pending.ID, Reason: reason})
	}
	view, ours := r.inFlight[j.ID]
	if !ours || view.id != pending.ID {
		fail("the coordinator leader changed while it was in flight")
		return
	}
	if r.busy[j.ID] {
		return // being finalized: the outcome is committed when written
	}
	deadline := pending.Triggered.Add(cfg.timeout)
	if !r.now.Before(deadline) {
		fail(fmt.Sprintf("timed out after %s: %s", cfg.timeout, acknowledged(j, view)))
		return
	}
	for _, task := range j.Tasks {
		if !view.acked[task] && slices.Contains(j.FinishedTasks, task) {
			fail(fmt.Sprintf("task %s finished before acknowledging it", task))
			return
		}
	}
	if allAcked(j, view) {
		p.finalize = append(p.finalize, j.ID)
		return
	}
	p.wake(deadline)
}

func allAcked(j *fsm.Job, view inFlightView) bool {
	for _, task := range j.Tasks {
		if !view.acked[task] {
			return false
		}
	}
	return true
}

// acknowledged says which tasks of a job did not acknowledge its
// checkpoint in flight, for the message of a timeout.
func acknowledged(j *fsm.Job, view inFlightView) string {
	var missing []string
	for _, task := range j.Tasks {
		if !view.acked[task] {
			missing = append(missing, task)
		}
	}
	msg := fmt.Sprintf("%d of %d tasks acknowledged", len(j.Tasks)-len(missing), len(j.Tasks))
	const shown = 5
	if len(missing) > shown {
		return fmt.Sprintf("%s (not %s, ...)", msg, strings.Join(missing[:shown], ", "))
	}
	return fmt.Sprintf("%s (not %s)", msg, strings.Join(missing, ", "))
}

// lastTriggered is when the job's latest checkpoint or savepoint was
// triggered (zero if never).
func lastTriggered(j *fsm.Job) time.Time {
	var last time.Time
	for _, list := range [][]fsm.Checkpoint{j.Checkpoints, j.Savepoints, j.FailedCheckpoints} {
		for _, c := range list {
			last = latest(last, c.Triggered)
		}
	}
	return last
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lastSavepointID is the id of the job's latest savepoint, completed, failed
// or in flight (0 if none).
func lastSavepointID(j *fsm.Job) uint64 {
	var last uint64
	for _, list := range [][]fsm.Checkpoint{j.Savepoints, j.FailedCheckpoints} {
		for _, c := range list {
			if c.Savepoint {
				last = max(last, c.ID)
			}
		}
	}
	if p := j.PendingCheckpoint; p != nil && p.Savepoint {
		last = max(last, p.ID)
	}
	return last
}

// savepointOutcome finds the first savepoint of the job with an id above
// after: done reports whether it ended; then failed is empty and sp the
// completed savepoint, or failed says why it failed.
func savepointOutcome(j *fsm.Job, after uint64) (sp fsm.Checkpoint, failed string, done bool) {
	first := func(list []fsm.Checkpoint) (fsm.Checkpoint, bool) {
		var best fsm.Checkpoint
		found := false
		for _, c := range list {
			if c.Savepoint && c.ID > after && (!found || c.ID < best.ID) {
				best, found = c, true
			}
		}
		return best, found
	}
	okc, completed := first(j.Savepoints)
	fc, failedFound := first(j.FailedCheckpoints)
	switch {
	case completed && (!failedFound || okc.ID < fc.ID):
		return okc, "", true
	case failedFound:
		return fc, fc.Error, true
	}
	return fsm.Checkpoint{}, "", false
}

// restoreFrom is where an attempt restores its state from: the latest
// completed checkpoint or savepoint that is not bad, or else the savepoint
// the job was submitted with; the key of its checkpoint manifest, and its
// id (0 for the savepoint a job was submitted with: the FSM does not
// record it).
func restoreFrom(j *fsm.Job) (string, uint64) {
	if c, ok := j.LatestRestorable(); ok {
		return c.Location, c.ID
	}
	return j.FromSavepoint, 0
}

// checkpointInstructions adds to a heartbeat answer the checkpoints of the
// running job attempts that have tasks on the worker: the one in flight
// (to trigger) and the latest completed one of the attempt (to commit).
func checkpointInstructions(resp *eddyv1.HeartbeatResponse, worker string, jobs []fsm.Job) {
	for i := range jobs {
		j := &jobs[i]
		if j.State != fsm.JobRunning || !hasTaskOn(j, worker) {
			continue
		}
		if p := j.PendingCheckpoint; p != nil && p.Attempt == j.Attempt {
			tr := &eddyv1.CheckpointTrigger{JobId: j.ID, Attempt: uint32(j.Attempt), CheckpointId: p.ID,
				Kind: eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT}
			if p.Savepoint {
				tr.Kind = eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT
			}
			if s := findSwap(j, p.Swap); p.Swap != 0 && s != nil {
				tr.Kind, tr.SwapId, tr.SwapNode = eddyv1.CheckpointKind_CHECKPOINT_KIND_SWAP, s.ID, s.Node
			}
			resp.TriggerCheckpoints = append(resp.TriggerCheckpoints, tr)
		}
		if c, ok := j.LatestCompleted(); ok && c.Attempt == j.Attempt {
			resp.CompletedCheckpoints = append(resp.CompletedCheckpoints, &eddyv1.CheckpointCompletion{
				JobId: j.ID, Attempt: uint32(j.Attempt), CheckpointId: c.ID})
		}
	}
}

func hasTaskOn(j *fsm.Job, worker string) bool {
	for _, w := range j.Deployment {
		if w == worker {
			return true
		}
	}
	return false
}

// badCheckpoint returns the checkpoint that a failed task of j reports it
// could not restore from (TaskReport.failed_restore_checkpoint) if that
// is the one the running attempt restored from: the latest restorable one.
func badCheckpoint(j *fsm.Job, failedRestore uint64) (uint64, bool) {
	c, ok := j.LatestRestorable()
	if !ok || failedRestore == 0 || failedRestore != c.ID {
		return 0, false // from a savepoint of another job, from scratch, or not this attempt's
	}
	return c.ID, true
}

// checkpointInfos lists a job's checkpoints and savepoints for its status:
// in flight, completed (a bad one as failed, with why) and failed, newest
// first, at most max.
func checkpointInfos(j *fsm.Job, now time.Time, limit int) []*eddyv1.CheckpointInfo {
	var out []*eddyv1.CheckpointInfo
	info := func(c fsm.Checkpoint, state eddyv1.CheckpointState) *eddyv1.CheckpointInfo {
		ci := &eddyv1.CheckpointInfo{
			CheckpointId:         c.ID,
			Kind:                 eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT,
			State:                state,
			TriggeredUnixMs:      c.Triggered.UnixMilli(),
			FullSizeBytes:        uint64(c.FullSize),
			IncrementalSizeBytes: uint64(c.IncrementalSize),
			Path:                 c.Location,
			Error:                c.Error,
		}
		if c.Triggered.IsZero() {
			ci.TriggeredUnixMs = 0
		}
		if c.Savepoint {
			ci.Kind = eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT
			ci.Path = checkpoint.SavepointDirOf(c.Location)
		}
		switch {
		case c.Duration > 0:
			ci.DurationMs = c.Duration.Milliseconds()
		case !c.Completed.IsZero() && !c.Triggered.IsZero():
			ci.DurationMs = c.Completed.Sub(c.Triggered).Milliseconds()
		case state == eddyv1.CheckpointState_CHECKPOINT_STATE_IN_PROGRESS:
			ci.DurationMs = max(0, now.Sub(c.Triggered).Milliseconds())
		}
		if c.Bad != "" {
			ci.State = eddyv1.CheckpointState_CHECKPOINT_STATE_FAILED
			ci.Error = "cannot be restored from: " + c.Bad
		}
		return ci
	}
	if p := j.PendingCheckpoint; p != nil {
		out = append(out, info(*p, eddyv1.CheckpointState_CHECKPOINT_STATE_IN_PROGRESS))
	}
	for _, list := range [][]fsm.Checkpoint{j.Checkpoints, j.Savepoints} {
		for _, c := range list {
			out = append(out, info(c, eddyv1.CheckpointState_CHECKPOINT_STATE_COMPLETED))
		}
	}
	for _, c := range j.FailedCheckpoints {
		out = append(out, info(c, eddyv1.CheckpointState_CHECKPOINT_STATE_FAILED))
	}
	slices.SortFunc(out, func(a, b *eddyv1.CheckpointInfo) int { return cmp.Compare(b.CheckpointId, a.CheckpointId) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
