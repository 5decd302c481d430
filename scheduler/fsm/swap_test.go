package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var (
	enrichV1 = ModuleRef{Ref: "enrich@1", Name: "enrich", Version: 1, SHA256: digest("e1")}
	enrichV2 = ModuleRef{Ref: "enrich@2", Name: "enrich", Version: 2, SHA256: digest("e2")}
)

// swapJob: job-2 running as attempt 1 (oneJobRunning), versions 1 and 2
// of module enrich in the default tenant and version 1 of another
// "enrich" in tenant acme. Indexes 1-7.
var swapJob = concat(oneJobRunning, []Command{
	&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
	&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e2"), Size: 20},
	&CreateTenant{ID: "acme"},
	&RegisterModule{Tenant: "acme", Name: "enrich", SHA256: digest("acme-e1"), Size: 30},
})

// beginSwap swaps node enrich of job-2 in attempt from v1 to v2 with a new
// configuration.
func beginSwap(attempt int) *BeginSwap {
	return &BeginSwap{JobID: "job-2", Attempt: attempt, Node: "enrich", From: enrichV1, To: enrichV2,
		FromConfig: []byte(`{"threshold":1}`), ToConfig: []byte(`{"threshold":2}`)}
}

func swapSavepoint(swap, id uint64) *TriggerCheckpoint {
	return &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: id, Savepoint: true, Swap: swap}
}

func swapSavepointDone(id uint64) *CheckpointCompleted {
	return &CheckpointCompleted{JobID: "job-2", Attempt: 1, ID: id, Savepoint: true, SwapPause: 3 * time.Millisecond,
		Manifest: fmt.Sprintf("tenants/default/savepoints/job-2-%d/_manifest.json", id)}
}

// swapPreparing: swap 1 begun (index 8). swapSwapping: its savepoint 1
// triggered (index 9). swapSwapped: completed (index 10), armed.
var (
	swapPreparing = concat(swapJob, []Command{beginSwap(1)})
	swapSwapping  = concat(swapPreparing, []Command{swapSavepoint(1, 1)})
	swapSwapped   = concat(swapSwapping, []Command{swapSavepointDone(1)})
)

func lastSwap(t *testing.T, j Job) Swap {
	t.Helper()
	if len(j.Swaps) == 0 {
		t.Fatalf("job %s has no swaps", j.ID)
	}
	return j.Swaps[len(j.Swaps)-1]
}

// running checks that the job still runs attempt 1 as placed, never
// restarted.
func running(t *testing.T, j Job) {
	t.Helper()
	if j.State != JobRunning || j.Attempt != 1 || j.Restarts != 0 || len(j.Deployment) != 2 || j.Message != "" {
		t.Errorf("job %s %s attempt %d restarts %d deployment %v message %q, want running attempt 1 untouched",
			j.ID, j.State, j.Attempt, j.Restarts, j.Deployment, j.Message)
	}
}

func TestSwapCommands(t *testing.T) {
	at := func(index int) time.Time { return t0.Add(time.Duration(index) * time.Second) }
	runJobCases(t, []jobCase{
		{
			name:  "begin",
			given: swapJob,
			when:  beginSwap(1),
			then: func(t *testing.T, j Job) {
				s := lastSwap(t, j)
				if s.ID != 1 || j.SwapSeq != 1 || s.State != SwapPreparing || s.Attempt != 1 || s.Node != "enrich" ||
					s.From != enrichV1 || s.To != enrichV2 || string(s.ToConfig) != `{"threshold":2}` ||
					!s.Began.Equal(at(8)) || !s.Ended.IsZero() || s.Armed || s.Savepoint != 0 {
					t.Errorf("swap %+v, seq %d", s, j.SwapSeq)
				}
				if sw, ok := j.SwapInFlight(); !ok || sw.ID != 1 {
					t.Errorf("SwapInFlight = %+v, %v", sw, ok)
				}
				if j.Overrides != nil || j.PendingCheckpoint != nil || !j.Updated.Equal(at(3)) {
					t.Errorf("a begun swap changed the job: %+v", j)
				}
				running(t, j)
			},
		},
		{
			name:    "begin on a job that does not run",
			given:   concat(swapJob, []Command{&TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a"}}),
			when:    beginSwap(1),
			wantErr: ErrJobState,
		},
		{
			name:    "begin in a stale attempt",
			given:   swapJob,
			when:    beginSwap(2),
			wantErr: ErrStaleAttempt,
		},
		{
			name:    "begin while a swap is in flight",
			given:   swapPreparing,
			when:    &BeginSwap{JobID: "job-2", Attempt: 1, Node: "other", From: enrichV1, To: enrichV2},
			wantErr: ErrJobState,
		},
		{
			name:    "begin while a swap savepoint is in flight",
			given:   swapSwapping,
			when:    beginSwap(1),
			wantErr: ErrJobState,
		},
		{
			name:  "begin with a module of another tenant",
			given: swapJob,
			when: &BeginSwap{JobID: "job-2", Attempt: 1, Node: "enrich", From: enrichV1,
				To: ModuleRef{Ref: "enrich@1", Name: "enrich", Version: 1, SHA256: digest("acme-e1")}},
			wantErr: ErrModuleNotFound,
		},
		{
			name:  "begin with an unknown digest",
			given: swapJob,
			when: &BeginSwap{JobID: "job-2", Attempt: 1, Node: "enrich", From: enrichV1,
				To: ModuleRef{Ref: "enrich@2", Name: "enrich", Version: 2, SHA256: digest("e9")}},
			wantErr: ErrModuleNotFound,
		},
		{
			name:  "begin with an unknown version",
			given: swapJob,
			when: &BeginSwap{JobID: "job-2", Attempt: 1, Node: "enrich", From: enrichV1,
				To: ModuleRef{Ref: "enrich@3", Name: "enrich", Version: 3, SHA256: digest("e2")}},
			wantErr: ErrModuleNotFound,
		},
		{
			name:    "begin on an unknown job",
			given:   swapJob,
			when:    &BeginSwap{JobID: "job-9", Attempt: 1, Node: "enrich", From: enrichV1, To: enrichV2},
			wantErr: ErrJobNotFound,
		},
		{
			name:  "begin while the last swap is armed disarms it",
			given: swapSwapped,
			when:  &BeginSwap{JobID: "job-2", Attempt: 1, Node: "enrich", From: enrichV2, To: enrichV1},
			then: func(t *testing.T, j Job) {
				if len(j.Swaps) != 2 || j.Swaps[0].Armed || j.Swaps[0].State != SwapSwapped || j.Swaps[1].ID != 2 || j.Swaps[1].State != SwapPreparing {
					t.Errorf("swaps %+v", j.Swaps)
				}
			},
		},
		{
			name:  "the swap savepoint makes the swap SWAPPING",
			given: swapPreparing,
			when:  swapSavepoint(1, 1),
			then: func(t *testing.T, j Job) {
				s := lastSwap(t, j)
				if s.State != SwapSwapping || s.Savepoint != 1 {
					t.Errorf("swap %+v", s)
				}
				if p := j.PendingCheckpoint; p == nil || p.ID != 1 || !p.Savepoint || p.Swap != 1 {
					t.Errorf("pending %+v", p)
				}
				running(t, j)
			},
		},
		{
			name:    "a savepoint of a swap that is not in flight",
			given:   swapPreparing,
			when:    swapSavepoint(2, 1),
			wantErr: ErrJobState,
		},
		{
			name:    "a savepoint of a refused swap",
			given:   concat(swapPreparing, []Command{&EndSwap{JobID: "job-2", SwapID: 1, State: SwapRefused, Reason: "no"}}),
			when:    swapSavepoint(1, 1),
			wantErr: ErrJobState,
		},
		{
			name:    "a second savepoint of a swap",
			given:   concat(swapSwapping, []Command{&CheckpointFailed{JobID: "job-2", ID: 1, Reason: "timed out"}}),
			when:    swapSavepoint(1, 2),
			wantErr: ErrJobState,
		},
		{
			name:  "completion: SWAPPED, armed, and the node overridden",
			given: concat(swapJob, completed(1, 1, 3), []Command{beginSwap(1), swapSavepoint(1, 2)}),
			when:  swapSavepointDone(2),
			then: func(t *testing.T, j Job) {
				s := lastSwap(t, j)
				if s.State != SwapSwapped || !s.Armed || !s.Ended.Equal(at(12)) || s.Savepoint != 2 ||
					s.SavepointLocation != "tenants/default/savepoints/job-2-2/_manifest.json" || s.Pause != 3*time.Millisecond || s.PrevOverride != nil {
					t.Errorf("swap %+v", s)
				}
				if o, ok := j.Override("enrich"); !ok || len(j.Overrides) != 1 || o.Module != enrichV2 || string(o.Config) != `{"threshold":2}` {
					t.Errorf("overrides %+v", j.Overrides)
				}
				if ids(j.Savepoints) != "2" || j.Savepoints[0].Swap != 1 || j.PendingCheckpoint != nil {
					t.Errorf("savepoints %+v, pending %+v", j.Savepoints, j.PendingCheckpoint)
				}
				if _, ok := j.SwapInFlight(); ok {
					t.Error("a swapped swap is still in flight")
				}
				running(t, j)
			},
		},
		{
			name:  "a checkpoint triggered after the swap leaves it armed",
			given: swapSwapped,
			when:  completed(1, 2, 3)[0],
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); !s.Armed {
					t.Errorf("swap %+v", s)
				}
			},
		},
		{
			name:  "the next completed checkpoint disarms the swap",
			given: concat(swapSwapped, completed(1, 2, 3)[:1]),
			when:  completed(1, 2, 3)[1],
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.Armed || s.State != SwapSwapped {
					t.Errorf("swap %+v", s)
				}
				if len(j.Overrides) != 1 {
					t.Errorf("overrides %+v", j.Overrides)
				}
			},
		},
		{
			name:  "the next completed savepoint disarms the swap",
			given: concat(swapSwapped, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 2, Savepoint: true}}),
			when:  &CheckpointCompleted{JobID: "job-2", Attempt: 1, ID: 2, Savepoint: true, Manifest: "sp2"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.Armed {
					t.Errorf("swap %+v", s)
				}
			},
		},
		{
			name:  "a task failure while armed rolls back",
			given: concat(swapJob, completed(1, 1, 3), []Command{beginSwap(1), swapSavepoint(1, 2), swapSavepointDone(2)}),
			when:  &TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a", Message: "wasm trap: unreachable"},
			then: func(t *testing.T, j Job) {
				s := lastSwap(t, j)
				if s.State != SwapRolledBack || s.Armed || s.Reason != "task a of attempt 1 failed: wasm trap: unreachable" || !s.Ended.Equal(at(13)) {
					t.Errorf("swap %+v", s)
				}
				if j.Overrides != nil {
					t.Errorf("override not reverted: %+v", j.Overrides)
				}
				if j.State != JobRestarting || j.Restarts != 1 ||
					j.Message != "rolled back swap 1 of node enrich: task a of attempt 1 failed: wasm trap: unreachable" {
					t.Errorf("job %s %q", j.State, j.Message)
				}
				// The next attempt restores from the swap savepoint, not
				// from checkpoint 1 before it.
				if c, ok := j.LatestRestorable(); !ok || c.ID != 2 || c.Location != s.SavepointLocation {
					t.Errorf("restores from %+v", c)
				}
			},
		},
		{
			name:  "a task failure of a stale attempt does not roll back",
			given: swapSwapped,
			when:  &TaskFailed{JobID: "job-2", Attempt: 2, TaskID: "a"},
			// Refused as before: nothing changes.
			wantErr: ErrStaleAttempt,
		},
		{
			name: "a rollback restores the override of the swap before",
			given: concat(swapSwapped, completed(1, 2, 3), []Command{
				&BeginSwap{JobID: "job-2", Attempt: 1, Node: "enrich", From: enrichV2, To: enrichV2,
					FromConfig: []byte(`{"threshold":2}`), ToConfig: []byte(`{"threshold":3}`)},
				swapSavepoint(2, 3), swapSavepointDone(3),
			}),
			when: &TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "b", Message: "bad config"},
			then: func(t *testing.T, j Job) {
				if len(j.Swaps) != 2 || j.Swaps[0].State != SwapSwapped || j.Swaps[1].State != SwapRolledBack {
					t.Errorf("swaps %+v", j.Swaps)
				}
				if o, ok := j.Override("enrich"); !ok || o.Module != enrichV2 || string(o.Config) != `{"threshold":2}` {
					t.Errorf("overrides %+v", j.Overrides)
				}
			},
		},
		{
			name:  "a task failure after the next checkpoint does not roll back",
			given: concat(swapSwapped, completed(1, 2, 3)),
			when:  &TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a", Message: "boom"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapSwapped || len(j.Overrides) != 1 || j.Message != "task a of attempt 1 failed: boom" {
					t.Errorf("swap %+v, overrides %+v, message %q", s, j.Overrides, j.Message)
				}
			},
		},
		{
			name:  "a lost worker while armed restarts with the new version, disarmed",
			given: swapSwapped,
			when:  &WorkerDown{ID: "w1", Reason: "lost"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapSwapped || s.Armed {
					t.Errorf("swap %+v", s)
				}
				if o, ok := j.Override("enrich"); !ok || o.Module != enrichV2 || j.State != JobRestarting || j.Message != "worker w1 down: lost" {
					t.Errorf("job %s %q, overrides %+v", j.State, j.Message, j.Overrides)
				}
			},
		},
		{
			name: "no rollback in the attempt after a lost worker",
			given: concat(swapSwapped, []Command{
				&WorkerDown{ID: "w1", Reason: "lost"},
				&RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "i2"},
				&PlaceJob{JobID: "job-2", Attempt: 2, Deployment: map[string]string{"a": "w1", "b": "w1"}},
			}),
			when: &TaskFailed{JobID: "job-2", Attempt: 2, TaskID: "a", Message: "boom"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapSwapped || len(j.Overrides) != 1 {
					t.Errorf("swap %+v, overrides %+v", s, j.Overrides)
				}
			},
		},
		{
			name:  "a lost worker while SWAPPING fails the swap and keeps the old version",
			given: swapSwapping,
			when:  &WorkerDown{ID: "w1", Reason: "lost"},
			then: func(t *testing.T, j Job) {
				s := lastSwap(t, j)
				if s.State != SwapFailed || s.Reason != "attempt 1 ended: worker w1 down: lost" || !s.Ended.Equal(at(10)) || s.Armed {
					t.Errorf("swap %+v", s)
				}
				if j.Overrides != nil || j.State != JobRestarting || j.PendingCheckpoint != nil ||
					len(j.FailedCheckpoints) != 1 || j.FailedCheckpoints[0].Swap != 1 {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:  "a task failing while SWAPPING rolls the swap back: the old version, from the checkpoint before",
			given: swapSwapping,
			when:  &TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a", Message: "trap"},
			then: func(t *testing.T, j Job) {
				s := lastSwap(t, j)
				if s.State != SwapRolledBack || s.Reason != "task a of attempt 1 failed: trap" || s.Armed {
					t.Errorf("swap %+v", s)
				}
				if len(j.Overrides) != 0 || j.State != JobRestarting || j.PendingCheckpoint != nil || !strings.HasPrefix(j.Message, "rolled back swap 1 of node enrich") {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:  "a re-registered worker while PREPARING fails the swap",
			given: swapPreparing,
			when:  &RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "i2"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapFailed || s.Reason != "attempt 1 ended: worker w1 restarted" {
					t.Errorf("swap %+v", s)
				}
			},
		},
		{
			name:  "a task failure while PREPARING fails the swap without a rollback",
			given: swapPreparing,
			when:  &TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a", Message: "boom"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapFailed || s.Reason != "attempt 1 ended: task a of attempt 1 failed: boom" {
					t.Errorf("swap %+v", s)
				}
				if j.Message != "task a of attempt 1 failed: boom" || j.Overrides != nil {
					t.Errorf("job %q %+v", j.Message, j.Overrides)
				}
			},
		},
		{
			name:  "canceling fails the swap in flight",
			given: swapSwapping,
			when:  &CancelJob{Tenant: DefaultTenant, JobID: "job-2"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapFailed || s.Reason != "job canceled" {
					t.Errorf("swap %+v", s)
				}
				if j.PendingCheckpoint != nil || j.Overrides != nil {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:  "finishing disarms",
			given: swapSwapped,
			when:  &FinishJob{JobID: "job-2", Attempt: 1},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapSwapped || s.Armed {
					t.Errorf("swap %+v", s)
				}
			},
		},
		{
			name:  "a refusal leaves the job untouched",
			given: swapPreparing,
			when:  &EndSwap{JobID: "job-2", SwapID: 1, State: SwapRefused, Reason: "node enrich: state counts is a value, enrich@2 declares a map"},
			then: func(t *testing.T, j Job) {
				s := lastSwap(t, j)
				if s.State != SwapRefused || s.Reason != "node enrich: state counts is a value, enrich@2 declares a map" || !s.Ended.Equal(at(9)) {
					t.Errorf("swap %+v", s)
				}
				if j.Overrides != nil || j.PendingCheckpoint != nil || len(j.FailedCheckpoints) != 0 || !j.Updated.Equal(at(3)) {
					t.Errorf("job %+v", j)
				}
				running(t, j)
			},
		},
		{
			name:  "a PREPARING swap that fails leaves the job untouched",
			given: swapPreparing,
			when:  &EndSwap{JobID: "job-2", SwapID: 1, State: SwapFailed, Reason: "leader lost the prepare reports"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapFailed {
					t.Errorf("swap %+v", s)
				}
				running(t, j)
			},
		},
		{
			name:  "a SWAPPING swap that fails restarts the job",
			given: swapSwapping,
			when:  &EndSwap{JobID: "job-2", SwapID: 1, State: SwapFailed, Reason: "task a has no prepared instance"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapFailed || s.Reason != "task a has no prepared instance" {
					t.Errorf("swap %+v", s)
				}
				if j.State != JobRestarting || j.Attempt != 1 || j.Message != "swap 1 failed: task a has no prepared instance" ||
					j.PendingCheckpoint != nil || len(j.FailedCheckpoints) != 1 ||
					j.FailedCheckpoints[0].Error != "swap 1 failed: task a has no prepared instance" || j.Overrides != nil {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:    "a SWAPPING swap cannot be refused",
			given:   swapSwapping,
			when:    &EndSwap{JobID: "job-2", SwapID: 1, State: SwapRefused, Reason: "late"},
			wantErr: ErrJobState,
		},
		{
			name:    "ending a swap the job never had",
			given:   swapPreparing,
			when:    &EndSwap{JobID: "job-2", SwapID: 2, State: SwapRefused, Reason: "?"},
			wantErr: ErrSwapNotFound,
		},
		{
			name:  "the swap savepoint failing fails the swap and restarts",
			given: swapSwapping,
			when:  &CheckpointFailed{JobID: "job-2", ID: 1, Reason: "timed out after 10m0s: 1 of 2 tasks acknowledged"},
			then: func(t *testing.T, j Job) {
				if s := lastSwap(t, j); s.State != SwapFailed || s.Reason != "savepoint 1 failed: timed out after 10m0s: 1 of 2 tasks acknowledged" {
					t.Errorf("swap %+v", s)
				}
				if j.State != JobRestarting || j.Restarts != 1 ||
					j.Message != "swap 1 failed: savepoint 1 failed: timed out after 10m0s: 1 of 2 tasks acknowledged" ||
					len(j.FailedCheckpoints) != 1 || j.FailedCheckpoints[0].Error != "timed out after 10m0s: 1 of 2 tasks acknowledged" {
					t.Errorf("job %+v", j)
				}
			},
		},
	})
}

// Ending a swap that already ended changes nothing and is no error, so
// that a leader may repeat it.
func TestEndSwapOfEndedSwapIsNoOp(t *testing.T) {
	for _, given := range map[string][]Command{
		"refused": concat(swapPreparing, []Command{&EndSwap{JobID: "job-2", SwapID: 1, State: SwapRefused, Reason: "no"}}),
		"swapped": swapSwapped,
		"failed":  concat(swapSwapping, []Command{&WorkerDown{ID: "w1"}}),
	} {
		h := newHarness(t)
		for _, c := range given {
			h.must(c)
		}
		before, _ := h.f.MarshalState()
		res := h.must(&EndSwap{JobID: "job-2", SwapID: 1, State: SwapFailed, Reason: "again"})
		if res.(Job).ID != "job-2" {
			t.Errorf("result %+v", res)
		}
		assertUnchangedButIndex(t, h.f, before)
	}
}

func TestSwapHistoryBounded(t *testing.T) {
	h := newHarness(t)
	for _, c := range swapJob {
		h.must(c)
	}
	for id := uint64(1); id <= MaxSwapHistory+5; id++ {
		h.must(beginSwap(1))
		h.must(&EndSwap{JobID: "job-2", SwapID: id, State: SwapRefused, Reason: "no"})
	}
	h.must(beginSwap(1))
	j := job(t, h.f, DefaultTenant, "job-2")
	if len(j.Swaps) != MaxSwapHistory || j.Swaps[0].ID != 7 || j.SwapSeq != MaxSwapHistory+6 || lastSwap(t, j).State != SwapPreparing {
		t.Fatalf("%d swaps from %d, seq %d", len(j.Swaps), j.Swaps[0].ID, j.SwapSeq)
	}
	// An id that left the history ended long ago: ending it again is a
	// no-op.
	h.must(&EndSwap{JobID: "job-2", SwapID: 1, State: SwapFailed, Reason: "again"})
}

// After a rollback, the next attempt is placed, restores from the swap
// savepoint with the old version, and may swap again.
func TestRollbackThenNextAttempt(t *testing.T) {
	h := newHarness(t)
	for _, c := range concat(swapSwapped, []Command{
		&TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a", Message: "trap"},
		&PlaceJob{JobID: "job-2", Attempt: 2, Deployment: map[string]string{"a": "w1", "b": "w1"}},
	}) {
		h.must(c)
	}
	j := job(t, h.f, DefaultTenant, "job-2")
	if c, ok := j.LatestRestorable(); !ok || c.ID != 1 || c.Swap != 1 || j.Overrides != nil || j.State != JobRunning {
		t.Fatalf("attempt 2 restores from %+v with overrides %+v", c, j.Overrides)
	}
	h.must(beginSwap(2))
	h.must(&TriggerCheckpoint{JobID: "job-2", Attempt: 2, ID: 2, Savepoint: true, Swap: 2})
	if s := lastSwap(t, job(t, h.f, DefaultTenant, "job-2")); s.ID != 2 || s.State != SwapSwapping || s.Attempt != 2 {
		t.Fatalf("swap %+v", s)
	}
}

// Query results hold copies of the swap records and overrides.
func TestSwapQueriesReturnCopies(t *testing.T) {
	h := newHarness(t)
	for _, c := range concat(swapSwapped, completed(1, 2, 3), []Command{
		&BeginSwap{JobID: "job-2", Attempt: 1, Node: "enrich", From: enrichV2, To: enrichV1, FromConfig: []byte(`{"a":1}`), ToConfig: []byte(`{"b":2}`)},
		swapSavepoint(2, 3), swapSavepointDone(3),
	}) {
		h.must(c)
	}
	before, _ := h.f.MarshalState()
	j := job(t, h.f, DefaultTenant, "job-2")
	if j.Swaps[1].PrevOverride == nil {
		t.Fatal("no previous override recorded")
	}
	j.Swaps[0].ToConfig[0] = 'X'
	j.Swaps[1].FromConfig[0] = 'X'
	j.Swaps[1].PrevOverride.Config[0] = 'X'
	j.Swaps[1].PrevOverride.Node = "x"
	j.Overrides[0].Config[0] = 'X'
	o, _ := j.Override("enrich")
	o.Config[1] = 'X'
	if after, _ := h.f.MarshalState(); !bytes.Equal(before, after) {
		t.Fatal("mutating query results changed the state")
	}
}

func TestEncodeRefusesInvalidSwaps(t *testing.T) {
	good := func(edit func(c *BeginSwap)) *BeginSwap {
		c := beginSwap(1)
		edit(c)
		return c
	}
	tests := []struct {
		name string
		cmd  Command
	}{
		{"no node", good(func(c *BeginSwap) { c.Node = "" })},
		{"no attempt", good(func(c *BeginSwap) { c.Attempt = 0 })},
		{"bad job id", good(func(c *BeginSwap) { c.JobID = "" })},
		{"to without digest", good(func(c *BeginSwap) { c.To.SHA256 = "" })},
		{"to with an uppercase digest", good(func(c *BeginSwap) { c.To.SHA256 = strings.ToUpper(c.To.SHA256) })},
		{"to without reference", good(func(c *BeginSwap) { c.To.Ref = "" })},
		{"to of version 0", good(func(c *BeginSwap) { c.To.Version = 0 })},
		{"from with a bad name", good(func(c *BeginSwap) { c.From.Name = "a@1" })},
		{"config not JSON", good(func(c *BeginSwap) { c.ToConfig = []byte(`{"a":`) })},
		{"config an array", good(func(c *BeginSwap) { c.ToConfig = []byte(`[1]`) })},
		{"from config a string", good(func(c *BeginSwap) { c.FromConfig = []byte(`"x"`) })},
		{"config blank", good(func(c *BeginSwap) { c.ToConfig = []byte(`  `) })},
		{"config too long", good(func(c *BeginSwap) {
			c.ToConfig = []byte(`{"a":"` + strings.Repeat("x", maxConfigLen) + `"}`)
		})},
		{"end swap 0", &EndSwap{JobID: "job-2", State: SwapRefused}},
		{"end as swapped", &EndSwap{JobID: "job-2", SwapID: 1, State: SwapSwapped}},
		{"end as rolled back", &EndSwap{JobID: "job-2", SwapID: 1, State: SwapRolledBack}},
		{"end without job", &EndSwap{SwapID: 1, State: SwapFailed}},
		{"swap checkpoint that is no savepoint", &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1, Swap: 1}},
		{"negative pause", &CheckpointCompleted{JobID: "job-2", Attempt: 1, ID: 1, Savepoint: true, Manifest: "m", SwapPause: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Encode(tc.cmd, t0); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Encode: %v, want ErrMalformed", err)
			}
		})
	}
	// Empty configurations and padded objects are fine.
	for _, c := range []*BeginSwap{good(func(c *BeginSwap) { c.FromConfig, c.ToConfig = nil, nil }), good(func(c *BeginSwap) { c.ToConfig = []byte(" {}\n") })} {
		if _, err := Encode(c, t0); err != nil {
			t.Errorf("Encode(%s): %v", c.ToConfig, err)
		}
	}
}

// A long reason is clipped like every other message.
func TestSwapReasonIsClipped(t *testing.T) {
	h := newHarness(t)
	for _, c := range swapPreparing {
		h.must(c)
	}
	h.must(&EndSwap{JobID: "job-2", SwapID: 1, State: SwapRefused, Reason: strings.Repeat("é", maxMessageLen)})
	if s := lastSwap(t, job(t, h.f, DefaultTenant, "job-2")); len(s.Reason) > maxMessageLen+len("…") {
		t.Fatalf("reason of %d bytes kept", len(s.Reason))
	}
}
