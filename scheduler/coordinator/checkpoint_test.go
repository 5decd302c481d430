package coordinator

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// checkpointedSpec is a job spec with a checkpoint section.
func checkpointedSpec(extra string) []byte {
	return []byte(`name: counted
checkpoint:
  interval: 10s
  min_pause: 4s
  timeout: 30s
  retain: 2
` + extra + `nodes:
  - name: src
    source: {generator: {kind: sequence, count: 10}}
  - name: out
    input: src
    sink: {stdout: {}}
`)
}

var plainSpec = []byte(`name: plain
nodes:
  - name: src
    source: {generator: {kind: sequence, count: 10}}
  - name: out
    input: src
    sink: {stdout: {}}
`)

// cpSim is the leader's checkpoint coordinator without Raft, gRPC or
// goroutines: the sim's FSM and clock, and this term's view as maps.
type cpSim struct {
	*sim
	running      map[string]time.Time
	inFlight     map[string]inFlightView
	savepoints   map[string]bool
	busy         map[string]bool
	collectAfter map[string]time.Time
}

func newCPSim(t *testing.T) *cpSim {
	s := &cpSim{sim: newSim(t), running: map[string]time.Time{}, inFlight: map[string]inFlightView{},
		savepoints: map[string]bool{}, busy: map[string]bool{}, collectAfter: map[string]time.Time{}}
	s.worker("w1", 4)
	return s
}

// runJob submits a job of tasks a and b with spec and places it; its tasks
// run from now on.
func (s *cpSim) runJob(spec []byte) string {
	id := s.must(&fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "j", Spec: spec, Tasks: []string{"a", "b"}}).(fsm.Job).ID
	s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1"}})
	s.running[id] = s.now
	return id
}

func (s *cpSim) round() checkpointRound {
	s.t.Helper()
	jobs := s.f.AllJobs()
	configs := map[string]checkpointConfig{}
	for _, j := range jobs {
		cfg, err := checkpointConfigOf(j.Spec, "file:///default")
		if err != nil {
			s.t.Fatalf("job %s: %v", j.ID, err)
		}
		configs[j.ID] = cfg
	}
	return checkpointRound{now: s.now, jobs: jobs, configs: configs, running: s.running, inFlight: s.inFlight,
		savepoints: s.savepoints, busy: s.busy, collectAfter: s.collectAfter}
}

// trigger triggers the next checkpoint of job as this term.
func (s *cpSim) trigger(job string, savepoint bool) uint64 {
	s.t.Helper()
	j := s.job(job)
	id := j.CheckpointSeq + 1
	s.inFlight[job] = inFlightView{id: id, acked: map[string]bool{}}
	s.must(&fsm.TriggerCheckpoint{JobID: job, Attempt: j.Attempt, ID: id, Savepoint: savepoint})
	return id
}

func (s *cpSim) ack(job string, tasks ...string) {
	for _, task := range tasks {
		s.inFlight[job].acked[task] = true
	}
}

// complete completes the checkpoint in flight, as the leader's finalization
// does.
func (s *cpSim) complete(job string) uint64 {
	s.t.Helper()
	j := s.job(job)
	p := j.PendingCheckpoint
	loc := checkpoint.ManifestKey(checkpoint.JobRoot(j.Tenant, j.ID), int64(p.ID))
	if p.Savepoint {
		loc = checkpoint.SavepointManifestKey(checkpoint.SavepointDir(j.Tenant, j.ID, int64(p.ID)))
	}
	s.must(&fsm.CheckpointCompleted{JobID: job, Attempt: p.Attempt, ID: p.ID, Savepoint: p.Savepoint, Manifest: loc,
		Duration: s.now.Sub(p.Triggered), Retain: 2})
	return p.ID
}

func TestDecideCheckpoints(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(s *cpSim)
		want     []fsm.Command
		finalize string
		collect  string
		wake     time.Duration // from s.now; 0: none
	}{
		{
			name: "a job without a checkpoint section takes none",
			setup: func(s *cpSim) {
				s.runJob(plainSpec)
				s.now = s.now.Add(time.Hour)
			},
		},
		{
			name: "the first checkpoint comes one interval after the tasks run",
			setup: func(s *cpSim) {
				s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(3 * time.Second)
			},
			wake: 7 * time.Second,
		},
		{
			name: "a job whose tasks do not all run yet waits",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				delete(s.running, id)
				s.now = s.now.Add(time.Hour)
			},
		},
		{
			name: "the interval passed: trigger checkpoint 1",
			setup: func(s *cpSim) {
				s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
			},
			want: []fsm.Command{&fsm.TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1}},
		},
		{
			name: "the interval counts from the last trigger",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.now = s.now.Add(time.Second)
				s.complete(id)
				s.now = s.now.Add(5 * time.Second)
			},
			wake: 4 * time.Second,
		},
		{
			name: "the minimum pause counts from the end of the last one",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.now = s.now.Add(8 * time.Second)
				s.complete(id)
				s.now = s.now.Add(2 * time.Second) // 10s after the trigger, 2s after the end
			},
			wake: 2 * time.Second,
		},
		{
			name: "due again: ids increase",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.now = s.now.Add(time.Second)
				s.complete(id)
				s.now = s.now.Add(9 * time.Second)
			},
			want: []fsm.Command{&fsm.TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 2}},
		},
		{
			name: "at most one in flight: it is waited for until its timeout",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.ack(id, "a")
				s.now = s.now.Add(25 * time.Second)
			},
			wake: 5 * time.Second,
		},
		{
			name: "timed out: failed, saying who did not acknowledge",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.ack(id, "a")
				s.now = s.now.Add(30 * time.Second)
			},
			want: []fsm.Command{&fsm.CheckpointFailed{JobID: "job-2", ID: 1, Reason: "timed out after 30s: 1 of 2 tasks acknowledged (not b)"}},
		},
		{
			name: "every task acknowledged: finalize",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.ack(id, "a", "b")
			},
			finalize: "job-2",
		},
		{
			name: "being finalized: nothing else, not even the timeout",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.ack(id, "a", "b")
				s.busy[id] = true
				s.now = s.now.Add(time.Hour)
			},
		},
		{
			name: "triggered by a previous leader: failed",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				delete(s.inFlight, id)
			},
			want: []fsm.Command{&fsm.CheckpointFailed{JobID: "job-2", ID: 1, Reason: "the coordinator leader changed while it was in flight"}},
		},
		{
			name: "a task finished without acknowledging: failed",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.ack(id, "a")
				s.must(&fsm.TaskFinished{JobID: id, Attempt: 1, TaskID: "b"})
			},
			want: []fsm.Command{&fsm.CheckpointFailed{JobID: "job-2", ID: 1, Reason: "task b finished before acknowledging it"}},
		},
		{
			name: "no checkpoint once a task finished",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.must(&fsm.TaskFinished{JobID: id, Attempt: 1, TaskID: "b"})
				s.now = s.now.Add(time.Hour)
			},
		},
		{
			name: "a savepoint is triggered at once, without a checkpoint section",
			setup: func(s *cpSim) {
				id := s.runJob(plainSpec)
				s.savepoints[id] = true
			},
			want: []fsm.Command{&fsm.TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 1, Savepoint: true}},
		},
		{
			name: "a savepoint ignores the interval and the minimum pause",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.complete(id)
				s.savepoints[id] = true
			},
			want: []fsm.Command{&fsm.TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 2, Savepoint: true}},
		},
		{
			name: "a savepoint waits for the checkpoint in flight",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.savepoints[id] = true
			},
			wake: 30 * time.Second,
		},
		{
			name: "old checkpoints are collected before the next trigger",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				for range 3 {
					s.now = s.now.Add(10 * time.Second)
					s.trigger(id, false)
					s.complete(id)
				}
				s.now = s.now.Add(time.Hour)
			},
			collect: "job-2",
		},
		{
			name: "a failed collection is retried later; checkpoints go on meanwhile",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				for range 3 {
					s.now = s.now.Add(10 * time.Second)
					s.trigger(id, false)
					s.complete(id)
				}
				s.now = s.now.Add(10 * time.Second)
				s.collectAfter[id] = s.now.Add(3 * time.Second)
			},
			want: []fsm.Command{&fsm.TriggerCheckpoint{JobID: "job-2", Attempt: 1, ID: 4}},
			wake: 3 * time.Second,
		},
		{
			name: "old checkpoints of an ended job are collected too",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.must(&fsm.CancelJob{Tenant: fsm.DefaultTenant, JobID: id})
			},
			collect: "job-2",
		},
		{
			name: "ids go on across attempts",
			setup: func(s *cpSim) {
				id := s.runJob(checkpointedSpec(""))
				s.now = s.now.Add(10 * time.Second)
				s.trigger(id, false)
				s.complete(id)
				s.must(&fsm.TaskFailed{JobID: id, Attempt: 1, TaskID: "a", Message: "boom"})
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 2, Deployment: map[string]string{"a": "w1", "b": "w1"}})
				s.running[id] = s.now
				s.now = s.now.Add(10 * time.Second)
			},
			want: []fsm.Command{&fsm.TriggerCheckpoint{JobID: "job-2", Attempt: 2, ID: 2}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newCPSim(t)
			tc.setup(s)
			p := decideCheckpoints(s.round())
			if !reflect.DeepEqual(p.commands, tc.want) {
				t.Errorf("commands:\n got %s\nwant %s", dump(p.commands), dump(tc.want))
			}
			if got := strings.Join(p.finalize, " "); got != tc.finalize {
				t.Errorf("finalize %q, want %q", got, tc.finalize)
			}
			if got := strings.Join(p.collect, " "); got != tc.collect {
				t.Errorf("collect %q, want %q", got, tc.collect)
			}
			var wantWake time.Time
			if tc.wake > 0 {
				wantWake = s.now.Add(tc.wake)
			}
			if !p.wakeAt.Equal(wantWake) {
				t.Errorf("wake at %s, want %s", p.wakeAt, wantWake)
			}
			for _, cmd := range p.commands { // every decision is valid in the state it was made from
				if _, err := s.apply(cmd); err != nil {
					t.Errorf("decision refused: %v", err)
				}
			}
		})
	}
}

// TestCheckpointStory drives checkpoints through a job's life with a manual
// clock: periodic checkpoints, retention, a restart from the latest, a
// checkpoint that cannot be restored and the fallback to the previous one,
// and a savepoint.
func TestCheckpointStory(t *testing.T) {
	s := newCPSim(t)
	job := s.runJob(checkpointedSpec(""))
	workers := map[string]fsm.Worker{}
	for _, w := range s.f.Workers() {
		workers[w.ID] = w
	}
	// step runs a checkpoint round and applies its commands; the
	// finalization and collection it asks for complete at once.
	step := func() {
		t.Helper()
		p := decideCheckpoints(s.round())
		for _, cmd := range p.commands {
			if tc, ok := cmd.(*fsm.TriggerCheckpoint); ok {
				s.inFlight[tc.JobID] = inFlightView{id: tc.ID, acked: map[string]bool{}}
			}
			s.must(cmd)
		}
		for range p.finalize {
			s.complete(job)
		}
		for range p.collect {
			s.must(&fsm.CheckpointsDeleted{JobID: job, IDs: s.job(job).CheckpointsToDelete})
		}
	}
	checkpointAll := func() uint64 {
		t.Helper()
		s.now = s.now.Add(10 * time.Second)
		step()
		p := s.job(job).PendingCheckpoint
		if p == nil {
			t.Fatalf("no checkpoint triggered at %s", s.now.Sub(t0))
		}
		s.ack(job, "a", "b")
		step()
		step()
		return p.ID
	}
	for want := uint64(1); want <= 3; want++ {
		if id := checkpointAll(); id != want {
			t.Fatalf("checkpoint %d, want %d", id, want)
		}
	}
	j := s.job(job)
	if got := fmt.Sprint(ids(j.Checkpoints)); got != "[2 3]" || len(j.CheckpointsToDelete) != 0 {
		t.Fatalf("retained %s, to delete %v", got, j.CheckpointsToDelete)
	}
	// The heartbeat answer commits checkpoint 3 and triggers nothing.
	resp := instructions("w1", nil, s.f.AllJobs(), workers, nil)
	if len(resp.GetTriggerCheckpoints()) != 0 || len(resp.GetCompletedCheckpoints()) != 1 || resp.GetCompletedCheckpoints()[0].GetCheckpointId() != 3 {
		t.Fatalf("checkpoint instructions %v", resp)
	}

	// A task fails: attempt 2 restores from checkpoint 3.
	s.must(&fsm.TaskFailed{JobID: job, Attempt: 1, TaskID: "a", Message: "boom"})
	s.must(&fsm.PlaceJob{JobID: job, Attempt: 2, Deployment: map[string]string{"a": "w1", "b": "w1"}})
	resp = instructions("w1", nil, s.f.AllJobs(), workers, nil)
	if d := resp.GetDeployments(); len(d) != 1 || d[0].GetRestoreFrom() != "tenants/default/jobs/job-2/chk/3/_manifest.json" || d[0].GetRestoreCheckpoint() != 3 {
		t.Fatalf("deployments of attempt 2: %v", d)
	}
	if len(resp.GetCompletedCheckpoints()) != 0 {
		t.Fatalf("checkpoint 3 of attempt 1 announced to attempt 2: %v", resp.GetCompletedCheckpoints())
	}
	// Its task cannot read checkpoint 3: the report marks it bad before it
	// fails the attempt, and attempt 3 restores from checkpoint 2.
	j = s.job(job)
	cmds := reportCommands("w1", []*eddyv1.TaskReport{{Task: &eddyv1.TaskRef{JobId: job, Attempt: 2, TaskId: "b"}, State: failed,
		Error: "task b: restore checkpoint 3: storage: not found: tenants/default/jobs/job-2/chk/3/b.json", FailedRestoreCheckpoint: 3}}, map[string]*fsm.Job{job: &j})
	if types(cmds) != "checkpoint_failed,task_failed" {
		t.Fatalf("report commands %s", dump(cmds))
	}
	for _, cmd := range cmds {
		s.must(cmd)
	}
	s.must(&fsm.PlaceJob{JobID: job, Attempt: 3, Deployment: map[string]string{"a": "w1", "b": "w1"}})
	s.running[job] = s.now
	resp = instructions("w1", nil, s.f.AllJobs(), workers, nil)
	if d := resp.GetDeployments(); len(d) != 1 || d[0].GetRestoreFrom() != "tenants/default/jobs/job-2/chk/2/_manifest.json" || d[0].GetRestoreCheckpoint() != 2 {
		t.Fatalf("deployments of attempt 3: %v", d)
	}
	// The same failure again does not mark anything else bad.
	j = s.job(job)
	if cmds := reportCommands("w1", []*eddyv1.TaskReport{{Task: &eddyv1.TaskRef{JobId: job, Attempt: 3, TaskId: "b"}, State: failed,
		Error: "restore checkpoint 3: corrupt", FailedRestoreCheckpoint: 3}}, map[string]*fsm.Job{job: &j}); types(cmds) != "task_failed" {
		t.Fatalf("report commands %s", dump(cmds))
	}

	// Checkpoints go on in attempt 3 with the next id; the next completion
	// retains 2 and 4 (3 was bad and is superseded).
	if id := checkpointAll(); id != 4 {
		t.Fatalf("checkpoint %d in attempt 3, want 4", id)
	}
	if j := s.job(job); fmt.Sprint(ids(j.Checkpoints)) != "[3 4]" {
		t.Fatalf("retained %v", ids(j.Checkpoints))
	}

	// A savepoint is requested: it is triggered at once, announced to the
	// worker as a savepoint, and restores are from it afterwards.
	s.savepoints[job] = true
	step()
	resp = instructions("w1", nil, s.f.AllJobs(), workers, nil)
	if tr := resp.GetTriggerCheckpoints(); len(tr) != 1 || tr[0].GetCheckpointId() != 5 || tr[0].GetKind() != eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT || tr[0].GetAttempt() != 3 {
		t.Fatalf("triggers %v", tr)
	}
	delete(s.savepoints, job)
	s.ack(job, "a", "b")
	step()
	step()
	j = s.job(job)
	if loc, id := restoreFrom(&j); j.PendingCheckpoint != nil || len(j.Savepoints) != 1 || loc != "tenants/default/savepoints/job-2-5/_manifest.json" || id != 5 {
		t.Fatalf("after the savepoint: %+v", j)
	}
	if sp, failed, done := savepointOutcome(&j, 4); !done || failed != "" || sp.ID != 5 {
		t.Fatalf("savepoint outcome %+v %q %v", sp, failed, done)
	}
	infos := checkpointInfos(&j, s.now, 10)
	var got []string
	for _, ci := range infos {
		got = append(got, fmt.Sprintf("%d:%s:%s", ci.GetCheckpointId(), strings.TrimPrefix(ci.GetKind().String(), "CHECKPOINT_KIND_"),
			strings.TrimPrefix(ci.GetState().String(), "CHECKPOINT_STATE_")))
	}
	if strings.Join(got, " ") != "5:SAVEPOINT:COMPLETED 4:CHECKPOINT:COMPLETED 3:CHECKPOINT:FAILED" {
		t.Fatalf("status checkpoints %v", got)
	}
	if infos[0].GetPath() != "tenants/default/savepoints/job-2-5" || !strings.Contains(infos[2].GetError(), "restore checkpoint 3") {
		t.Fatalf("status %v", infos)
	}
}

func ids(cs []fsm.Checkpoint) []uint64 {
	var out []uint64
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func TestCheckpointInstructions(t *testing.T) {
	s := newCPSim(t)
	s.worker("w2", 4)
	job := s.runJob(checkpointedSpec(""))
	other := s.must(&fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "o", Tasks: []string{"x"}}).(fsm.Job).ID
	s.must(&fsm.PlaceJob{JobID: other, Attempt: 1, Deployment: map[string]string{"x": "w2"}})
	s.trigger(job, false)
	s.complete(job)
	s.trigger(job, true)
	workers := map[string]fsm.Worker{}
	for _, w := range s.f.Workers() {
		workers[w.ID] = w
	}
	resp := instructions("w1", nil, s.f.AllJobs(), workers, nil)
	if tr := resp.GetTriggerCheckpoints(); len(tr) != 1 || tr[0].GetJobId() != job || tr[0].GetCheckpointId() != 2 || tr[0].GetKind() != eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT {
		t.Errorf("w1 triggers %v", tr)
	}
	if c := resp.GetCompletedCheckpoints(); len(c) != 1 || c[0].GetCheckpointId() != 1 || c[0].GetAttempt() != 1 {
		t.Errorf("w1 completions %v", c)
	}
	// w2 runs nothing of the job.
	if resp := instructions("w2", nil, s.f.AllJobs(), workers, nil); len(resp.GetTriggerCheckpoints())+len(resp.GetCompletedCheckpoints()) != 0 {
		t.Errorf("w2 told %v", resp)
	}
}

func TestBadCheckpoint(t *testing.T) {
	j := &fsm.Job{Checkpoints: []fsm.Checkpoint{{ID: 3, Location: "p/chk/3/_manifest.json"}, {ID: 4, Location: "p/chk/4/_manifest.json", Bad: "x"}},
		Savepoints: []fsm.Checkpoint{{ID: 2, Savepoint: true, Location: "sp/job-2/_manifest.json"}}}
	// A failed task's report: its error, for people, and the checkpoint it
	// could not restore from, which the leader goes by.
	tests := []struct {
		err    string
		failed uint64
		want   uint64
	}{
		{"restore checkpoint 3: storage: not found", 3, 3},
		{"job j: restore checkpoint 3: state of out: state: corrupt snapshot", 3, 3},
		{"restore checkpoint 3: checkpoint manifest p/chk/3/_manifest.json: corrupt: unexpected end of JSON input", 3, 3},
		{"restore checkpoint 4: again", 4, 0}, // already bad: not what the attempt restored from
		{"restore checkpoint 2: not this attempt's", 2, 0},
		{"restore checkpoint 9: unknown", 9, 0},
		{"restore: checkpoint manifest sp/x/_manifest.json: storage: not found", 0, 0}, // the worker did not know the id
		{"restore checkpoint 3: what the text says does not count", 0, 0},
		{"checkpoint 3 failed", 0, 0},
		{"job j: checkpoint 3 was taken with source src at parallelism 2, not 3", 0, 0}, // readable but incompatible
		{"", 0, 0},
	}
	for _, tc := range tests {
		id, ok := badCheckpoint(j, tc.failed)
		if ok != (tc.want != 0) || id != tc.want {
			t.Errorf("badCheckpoint(%q, failed restore of %d) = %d, %v; want %d", tc.err, tc.failed, id, ok, tc.want)
		}
	}
	// A job restoring from the savepoint it was submitted with has nothing
	// to mark.
	if id, ok := badCheckpoint(&fsm.Job{FromSavepoint: "sp/x/_manifest.json"}, 1); ok {
		t.Errorf("marked %d", id)
	}
}

func TestCheckpointConfigOf(t *testing.T) {
	cfg, err := checkpointConfigOf(checkpointedSpec(""), "file:///d")
	want := checkpointConfig{periodic: true, interval: 10 * time.Second, timeout: 30 * time.Second, minPause: 4 * time.Second,
		retain: 2, storage: "file:///d", maxParallelism: 128}
	if err != nil || cfg != want {
		t.Errorf("checkpointed: %+v, %v", cfg, err)
	}
	cfg, err = checkpointConfigOf(checkpointedSpec("  storage: s3://bucket/chk\n"), "file:///d")
	if err != nil || cfg.storage != "s3://bucket/chk" {
		t.Errorf("with storage: %+v, %v", cfg, err)
	}
	cfg, err = checkpointConfigOf(plainSpec, "file:///d")
	if err != nil || cfg.periodic || cfg.storage != "file:///d" || cfg.retain != 3 || cfg.timeout != 10*time.Minute {
		t.Errorf("plain: %+v, %v", cfg, err)
	}
}
