package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// oneJobRunning: worker w1 with two slots and job-2 (tasks a, b) running
// as attempt 1. Indexes 1-3.
var oneJobRunning = []Command{
	&RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "i1"},
	&SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a", "b"}},
	&PlaceJob{JobID: "job-2", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1"}},
}

// completed returns the commands that trigger and complete checkpoint id
// of job-2 in attempt.
func completed(attempt int, id uint64, retain int) []Command {
	return []Command{
		&TriggerCheckpoint{JobID: "job-2", Attempt: attempt, ID: id},
		&CheckpointCompleted{JobID: "job-2", Attempt: attempt, ID: id, Retain: retain,
			Manifest: fmt.Sprintf("tenants/default/jobs/job-2/chk/%d/_manifest.json", id),
			Duration: time.Duration(id) * time.Second, FullSize: int64(100 * id), IncrementalSize: int64(10 * id)},
	}
}

func concat(lists ...[]Command) []Command { return slices.Concat(lists...) }

func ids(cs []Checkpoint) string {
	var out []string
	for _, c := range cs {
		s := fmt.Sprint(c.ID)
		if c.Bad != "" {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestCheckpointCommands(t *testing.T) {
	runJobCases(t, []jobCase{
		{
			name:  "trigger",
			given: oneJobRunning,
			when:  &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1},
			then: func(t *testing.T, j Job) {
				p := j.PendingCheckpoint
				if p == nil || p.ID != 1 || p.Attempt != 1 || p.Savepoint || !p.Triggered.Equal(t0.Add(4*time.Second)) || j.CheckpointSeq != 1 {
					t.Errorf("pending %+v, seq %d", p, j.CheckpointSeq)
				}
				if !j.Updated.Equal(t0.Add(3 * time.Second)) {
					t.Errorf("a checkpoint command moved Updated to %s", j.Updated)
				}
			},
		},
		{
			name:    "at most one in flight",
			given:   concat(oneJobRunning, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1}}),
			when:    &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 2, Savepoint: true},
			wantErr: ErrJobState,
		},
		{
			name:    "ids increase",
			given:   concat(oneJobRunning, completed(1, 5, 3)),
			when:    &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 5},
			wantErr: ErrJobState,
		},
		{
			name: "a job from a savepoint starts its ids above the savepoint's",
			given: []Command{
				&RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "i1"},
				&SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a", "b"}, FromSavepoint: "tenants/default/savepoints/job-9-6/_manifest.json", CheckpointSeq: 6},
				&PlaceJob{JobID: "job-2", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1"}},
			},
			when:    &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 6},
			wantErr: ErrJobState,
		},
		{
			name:    "trigger of a stale attempt",
			given:   oneJobRunning,
			when:    &TriggerCheckpoint{JobID: "job-2", Attempt: 2, ID: 1},
			wantErr: ErrStaleAttempt,
		},
		{
			name:    "trigger of a job that does not run",
			given:   oneJobRunning[:2],
			when:    &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1},
			wantErr: ErrStaleAttempt,
		},
		{
			name:    "trigger of a finished job",
			given:   concat(oneJobRunning, []Command{&FinishJob{JobID: "job-2", Attempt: 1}}),
			when:    &TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1},
			wantErr: ErrJobState,
		},
		{
			name:  "complete",
			given: concat(oneJobRunning, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1}}),
			when: &CheckpointCompleted{JobID: "job-2", Attempt: 1, ID: 1, Retain: 3, Manifest: "m1",
				Duration: 1500 * time.Millisecond, FullSize: 2048, IncrementalSize: 512},
			then: func(t *testing.T, j Job) {
				want := Checkpoint{ID: 1, Attempt: 1, Location: "m1", Triggered: t0.Add(4 * time.Second), Completed: t0.Add(5 * time.Second),
					Duration: 1500 * time.Millisecond, FullSize: 2048, IncrementalSize: 512}
				if len(j.Checkpoints) != 1 || j.Checkpoints[0] != want {
					t.Errorf("checkpoints %+v", j.Checkpoints)
				}
				if j.PendingCheckpoint != nil || !j.CheckpointEnded.Equal(t0.Add(5*time.Second)) || len(j.CheckpointsToDelete) != 0 {
					t.Errorf("job %+v", j)
				}
				if c, ok := j.LatestRestorable(); !ok || c.ID != 1 {
					t.Errorf("latest restorable %+v %v", c, ok)
				}
			},
		},
		{
			name:    "complete a checkpoint not in flight",
			given:   concat(oneJobRunning, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1}}),
			when:    &CheckpointCompleted{JobID: "job-2", Attempt: 1, ID: 2, Retain: 3, Manifest: "m2"},
			wantErr: ErrCheckpointNotFound,
		},
		{
			name:    "complete a savepoint as a checkpoint",
			given:   concat(oneJobRunning, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1, Savepoint: true}}),
			when:    &CheckpointCompleted{JobID: "job-2", Attempt: 1, ID: 1, Retain: 3, Manifest: "m1"},
			wantErr: ErrMalformed,
		},
		{
			name:  "retention keeps the latest retain checkpoints",
			given: concat(oneJobRunning, completed(1, 1, 2), completed(1, 2, 2)),
			when:  completed(1, 3, 2)[0],
			then: func(t *testing.T, j Job) {
				if ids(j.Checkpoints) != "1 2" || len(j.CheckpointsToDelete) != 0 {
					t.Errorf("before completion: retained %s, to delete %v", ids(j.Checkpoints), j.CheckpointsToDelete)
				}
			},
		},
		{
			name:  "an older checkpoint moves to the delete list",
			given: concat(oneJobRunning, completed(1, 1, 2), completed(1, 2, 2), completed(1, 3, 2)[:1]),
			when:  completed(1, 3, 2)[1],
			then: func(t *testing.T, j Job) {
				if ids(j.Checkpoints) != "2 3" || !slices.Equal(j.CheckpointsToDelete, []uint64{1}) {
					t.Errorf("retained %s, to delete %v", ids(j.Checkpoints), j.CheckpointsToDelete)
				}
			},
		},
		{
			name:  "a smaller retain drops several",
			given: concat(oneJobRunning, completed(1, 1, 3), completed(1, 2, 3), completed(1, 3, 3), completed(1, 4, 3)[:1]),
			when:  completed(1, 4, 1)[1],
			then: func(t *testing.T, j Job) {
				if ids(j.Checkpoints) != "4" || !slices.Equal(j.CheckpointsToDelete, []uint64{1, 2, 3}) {
					t.Errorf("retained %s, to delete %v", ids(j.Checkpoints), j.CheckpointsToDelete)
				}
			},
		},
		{
			name:  "the leader clears deleted checkpoints",
			given: concat(oneJobRunning, completed(1, 1, 1), completed(1, 2, 1), completed(1, 3, 1)),
			when:  &CheckpointsDeleted{JobID: "job-2", IDs: []uint64{1, 7}},
			then: func(t *testing.T, j Job) {
				if !slices.Equal(j.CheckpointsToDelete, []uint64{2}) {
					t.Errorf("to delete %v", j.CheckpointsToDelete)
				}
			},
		},
		{
			name:  "a savepoint is kept apart and its source files go",
			given: concat(oneJobRunning, completed(1, 1, 1), []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 2, Savepoint: true}}),
			when:  &CheckpointCompleted{JobID: "job-2", Attempt: 1, ID: 2, Savepoint: true, Manifest: "tenants/default/savepoints/job-2-2/_manifest.json"},
			then: func(t *testing.T, j Job) {
				if ids(j.Checkpoints) != "1" || ids(j.Savepoints) != "2" || !j.Savepoints[0].Savepoint ||
					j.Savepoints[0].Location != "tenants/default/savepoints/job-2-2/_manifest.json" ||
					!slices.Equal(j.CheckpointsToDelete, []uint64{2}) {
					t.Errorf("checkpoints %s, savepoints %+v, to delete %v", ids(j.Checkpoints), j.Savepoints, j.CheckpointsToDelete)
				}
				if c, _ := j.LatestRestorable(); c.ID != 2 {
					t.Errorf("restores from %d, want the savepoint", c.ID)
				}
			},
		},
		{
			name:  "a failed checkpoint",
			given: concat(oneJobRunning, completed(1, 1, 3), []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 2}}),
			when:  &CheckpointFailed{JobID: "job-2", ID: 2, Reason: "timed out after 10s"},
			then: func(t *testing.T, j Job) {
				if j.PendingCheckpoint != nil || len(j.FailedCheckpoints) != 1 || j.FailedCheckpoints[0].Error != "timed out after 10s" ||
					!j.FailedCheckpoints[0].Completed.Equal(t0.Add(7*time.Second)) || !j.CheckpointEnded.Equal(t0.Add(7*time.Second)) ||
					!slices.Equal(j.CheckpointsToDelete, []uint64{2}) || ids(j.Checkpoints) != "1" {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:  "a bad checkpoint is not restored from: the previous one is",
			given: concat(oneJobRunning, completed(1, 1, 3), completed(1, 2, 3)),
			when:  &CheckpointFailed{JobID: "job-2", ID: 2, Reason: "restore checkpoint 2: storage: not found"},
			then: func(t *testing.T, j Job) {
				if ids(j.Checkpoints) != "1 2!" || j.Checkpoints[1].Bad != "restore checkpoint 2: storage: not found" {
					t.Errorf("checkpoints %+v", j.Checkpoints)
				}
				if c, ok := j.LatestRestorable(); !ok || c.ID != 1 {
					t.Errorf("restores from %+v", c)
				}
				if c, _ := j.LatestCompleted(); c.ID != 2 {
					t.Errorf("latest completed %+v", c)
				}
			},
		},
		{
			name:  "when every checkpoint is bad there is none to restore",
			given: concat(oneJobRunning, completed(1, 1, 3), []Command{&CheckpointFailed{JobID: "job-2", ID: 1, Reason: "corrupt"}}),
			when:  &CheckpointFailed{JobID: "job-2", ID: 1, Reason: "again"},
			then: func(t *testing.T, j Job) {
				if _, ok := j.LatestRestorable(); ok || j.Checkpoints[0].Bad != "corrupt" {
					t.Errorf("checkpoints %+v", j.Checkpoints)
				}
			},
		},
		{
			name:    "fail an unknown checkpoint",
			given:   concat(oneJobRunning, completed(1, 1, 3)),
			when:    &CheckpointFailed{JobID: "job-2", ID: 9, Reason: "?"},
			wantErr: ErrCheckpointNotFound,
		},
		{
			name:  "a restart fails the checkpoint in flight; ids go on across attempts",
			given: concat(oneJobRunning, completed(1, 1, 3), []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 2}}),
			when:  &TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a", Message: "boom"},
			then: func(t *testing.T, j Job) {
				if j.PendingCheckpoint != nil || len(j.FailedCheckpoints) != 1 ||
					j.FailedCheckpoints[0].Error != "attempt 1 ended: task a of attempt 1 failed: boom" || j.CheckpointSeq != 2 {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name: "a checkpoint of the next attempt continues the ids",
			given: concat(oneJobRunning, completed(1, 1, 3), []Command{
				&TaskFailed{JobID: "job-2", Attempt: 1, TaskID: "a", Message: "boom"},
				&PlaceJob{JobID: "job-2", Attempt: 2, Deployment: map[string]string{"a": "w1", "b": "w1"}},
			}),
			when: &TriggerCheckpoint{JobID: "job-2", Attempt: 2, ID: 1},
			// The FSM refuses a reused id whatever the attempt.
			wantErr: ErrJobState,
		},
		{
			name:  "cancelling fails the checkpoint in flight",
			given: concat(oneJobRunning, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1, Savepoint: true}}),
			when:  &CancelJob{Tenant: DefaultTenant, JobID: "job-2"},
			then: func(t *testing.T, j Job) {
				if j.PendingCheckpoint != nil || len(j.FailedCheckpoints) != 1 || j.FailedCheckpoints[0].Error != "job canceled" ||
					!j.FailedCheckpoints[0].Savepoint {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:  "finishing fails the checkpoint in flight",
			given: concat(oneJobRunning, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1}, &TaskFinished{JobID: "job-2", Attempt: 1, TaskID: "a"}}),
			when:  &TaskFinished{JobID: "job-2", Attempt: 1, TaskID: "b"},
			then: func(t *testing.T, j Job) {
				if j.State != JobFinished || j.PendingCheckpoint != nil || j.FailedCheckpoints[0].Error != "job finished" {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:  "deleted checkpoints of a terminal job",
			given: concat(oneJobRunning, []Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1}, &FailJob{JobID: "job-2", Message: "gave up"}}),
			when:  &CheckpointsDeleted{JobID: "job-2", IDs: []uint64{1}},
			then: func(t *testing.T, j Job) {
				if j.CheckpointsToDelete != nil || !j.Updated.Equal(t0.Add(5*time.Second)) {
					t.Errorf("job %+v", j)
				}
			},
		},
	})
}

// jobCase is one command applied to job-2 after the given ones: refused
// with wantErr (and then nothing changes), or checked by then.
type jobCase struct {
	name    string
	given   []Command
	when    Command
	wantErr error
	then    func(t *testing.T, j Job)
}

func runJobCases(t *testing.T, tests []jobCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, cmd := range tc.given {
				h.must(cmd)
			}
			before, _ := h.f.MarshalState()
			res, err := h.apply(tc.when)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("apply %s: %v, want %v", tc.when.Type(), err, tc.wantErr)
				}
				assertUnchangedButIndex(t, h.f, before)
				return
			}
			if err != nil {
				t.Fatalf("apply %s: %v", tc.when.Type(), err)
			}
			j := job(t, h.f, DefaultTenant, "job-2")
			if r, ok := res.(Job); ok && r.ID == j.ID && !reflect.DeepEqual(r, j) {
				t.Errorf("result %+v differs from the query %+v", r, j)
			}
			tc.then(t, j)
		})
	}
}

// The failed checkpoints a job keeps are bounded.
func TestFailedCheckpointsBounded(t *testing.T) {
	h := newHarness(t)
	for _, cmd := range oneJobRunning {
		h.must(cmd)
	}
	for id := uint64(1); id <= MaxFailedCheckpoints+5; id++ {
		h.must(&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: id})
		h.must(&CheckpointFailed{JobID: "job-2", ID: id, Reason: "timed out"})
	}
	j := job(t, h.f, DefaultTenant, "job-2")
	if len(j.FailedCheckpoints) != MaxFailedCheckpoints || j.FailedCheckpoints[0].ID != 6 || len(j.CheckpointsToDelete) != MaxFailedCheckpoints+5 {
		t.Fatalf("failed %s, to delete %v", ids(j.FailedCheckpoints), j.CheckpointsToDelete)
	}
	// The metric's counter does not forget what the list dropped.
	if n := h.f.JobCounters("job-2"); n.CheckpointsFailed != MaxFailedCheckpoints+5 || n.CheckpointsCompleted != 0 {
		t.Fatalf("counted %d failed, %d completed", n.CheckpointsFailed, n.CheckpointsCompleted)
	}
}

// CheckpointsCompleted counts past the retained checkpoints, and only
// completions.
func TestCheckpointsCompletedCounted(t *testing.T) {
	h := newHarness(t)
	for _, cmd := range concat(oneJobRunning, completed(1, 1, 1), completed(1, 2, 1), completed(1, 3, 1),
		[]Command{&TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 4}}) {
		h.must(cmd)
	}
	j := job(t, h.f, DefaultTenant, "job-2")
	if n := h.f.JobCounters("job-2"); len(j.Checkpoints) != 1 || n.CheckpointsCompleted != 3 || n.CheckpointsFailed != 0 {
		t.Fatalf("retained %s, counted %d completed, %d failed", ids(j.Checkpoints), n.CheckpointsCompleted, n.CheckpointsFailed)
	}
}

// A savepoint is restored from like a checkpoint, and a job submitted from
// a savepoint restores from it until it has a checkpoint of its own.
func TestLatestRestorable(t *testing.T) {
	tests := []struct {
		name string
		job  Job
		want uint64 // 0: none
	}{
		{"nothing", Job{}, 0},
		{"latest checkpoint", Job{Checkpoints: []Checkpoint{{ID: 1}, {ID: 3}}}, 3},
		{"a newer savepoint", Job{Checkpoints: []Checkpoint{{ID: 1}, {ID: 3}}, Savepoints: []Checkpoint{{ID: 4, Savepoint: true}}}, 4},
		{"an older savepoint", Job{Checkpoints: []Checkpoint{{ID: 5}}, Savepoints: []Checkpoint{{ID: 4, Savepoint: true}}}, 5},
		{"a bad newest", Job{Checkpoints: []Checkpoint{{ID: 1}, {ID: 3, Bad: "x"}}, Savepoints: []Checkpoint{{ID: 2, Savepoint: true}}}, 2},
		{"all bad", Job{Checkpoints: []Checkpoint{{ID: 1, Bad: "x"}}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := tc.job.LatestRestorable()
			if ok != (tc.want != 0) || c.ID != tc.want {
				t.Fatalf("LatestRestorable = %d, %v; want %d", c.ID, ok, tc.want)
			}
		})
	}
}

// The counters of the golden log's jobs: swaps by outcome, and
// checkpoints, as the log applies them; a restore leaves them be.
func TestJobCountersOfGoldenLog(t *testing.T) {
	log, err := os.ReadFile(filepath.Join("testdata", "log.golden"))
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	for i, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		_, _ = f.ApplyCommand(uint64(i+1), line)
	}
	check := func(when string) {
		t.Helper()
		swapped := f.JobCounters("job-46")
		want := map[SwapState]uint64{SwapSwapped: 2, SwapRefused: 1, SwapFailed: 1, SwapRolledBack: 1}
		if !reflect.DeepEqual(swapped.Swaps, want) || swapped.CheckpointsCompleted != 3 {
			t.Errorf("%s: job-46 %+v, want swaps %v and 3 checkpoints", when, swapped, want)
		}
		if cp := f.JobCounters("job-27"); cp.CheckpointsCompleted != 4 || cp.CheckpointsFailed != 1 {
			t.Errorf("%s: job-27 %+v, want 4 completed and 1 failed", when, cp)
		}
	}
	check("replayed")
	snap, err := f.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.UnmarshalState(snap); err != nil {
		t.Fatal(err)
	}
	check("restored")
}
