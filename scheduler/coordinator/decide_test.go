package coordinator

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// sim is the leader without Raft, gRPC or goroutines: an FSM applied in
// process, a manual clock and the heartbeat view as a map. It runs the
// same decide function the leader's loop runs.
type sim struct {
	t        *testing.T
	f        *fsm.FSM
	index    uint64
	now      time.Time
	since    time.Time
	lastSeen map[string]time.Time
	timeout  time.Duration
	restart  RestartStrategy
}

func newSim(t *testing.T) *sim {
	return &sim{
		t: t, f: fsm.New(), now: t0, since: t0.Add(-time.Hour),
		lastSeen: map[string]time.Time{},
		timeout:  5 * time.Second,
		restart:  RestartStrategy{Kind: RestartFixed, Delay: 2 * time.Second, MaxAttempts: 2},
	}
}

func (s *sim) apply(cmd fsm.Command) (any, error) {
	s.t.Helper()
	data, err := fsm.Encode(cmd, s.now)
	if err != nil {
		s.t.Fatalf("encode %s: %v", cmd.Type(), err)
	}
	s.index++
	return s.f.ApplyCommand(s.index, data)
}

func (s *sim) must(cmd fsm.Command) any {
	s.t.Helper()
	res, err := s.apply(cmd)
	if err != nil {
		s.t.Fatalf("apply %s: %v", cmd.Type(), err)
	}
	return res
}

func (s *sim) round() round {
	return round{
		now: s.now, since: s.since,
		workers: s.f.Workers(), jobs: s.f.AllJobs(),
		lastSeen: s.lastSeen, timeout: s.timeout, restart: s.restart,
		quotas: quotasOf(s.f.Tenants()),
	}
}

// settle runs rounds, applying every decision, until a round decides
// nothing; it returns the commands applied and the last round's wake time.
func (s *sim) settle() ([]fsm.Command, time.Time) {
	s.t.Helper()
	var all []fsm.Command
	for range 100 {
		p := decide(s.round())
		if len(p.commands) == 0 {
			return all, p.wakeAt
		}
		for _, cmd := range p.commands {
			s.must(cmd)
		}
		all = append(all, p.commands...)
	}
	s.t.Fatal("decisions do not settle")
	return nil, time.Time{}
}

func (s *sim) job(id string) fsm.Job {
	s.t.Helper()
	j, err := s.f.Job(fsm.DefaultTenant, id)
	if err != nil {
		s.t.Fatal(err)
	}
	return j
}

func (s *sim) worker(id string, slots int) {
	s.must(&fsm.RegisterWorker{ID: id, Address: "127.0.0.1:" + id, Slots: slots, Incarnation: "i1"})
	s.lastSeen[id] = s.now
}

func (s *sim) submit(tasks ...string) string {
	return s.must(&fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "j", Tasks: tasks}).(fsm.Job).ID
}

func types(cmds []fsm.Command) string {
	var out []string
	for _, c := range cmds {
		out = append(out, string(c.Type()))
	}
	return strings.Join(out, ",")
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name  string
		setup func(s *sim)
		want  []fsm.Command
		wake  time.Duration // from s.now; 0: none
	}{
		{
			name:  "nothing to do",
			setup: func(s *sim) {},
		},
		{
			name: "a worker within its timeout is woken for at its deadline",
			setup: func(s *sim) {
				s.worker("w1", 1)
				s.lastSeen["w1"] = s.now.Add(-time.Second)
			},
			wake: 4 * time.Second,
		},
		{
			name: "a silent worker is declared down, before any placement",
			setup: func(s *sim) {
				s.worker("w1", 1)
				s.worker("w2", 1)
				s.submit("t0")
				s.lastSeen["w1"] = s.now.Add(-5 * time.Second)
			},
			want: []fsm.Command{&fsm.WorkerDown{ID: "w1", Reason: "no heartbeat for 5s"}},
		},
		{
			name: "a worker not heard from this term counts from its start",
			setup: func(s *sim) {
				s.worker("w1", 1)
				delete(s.lastSeen, "w1")
				s.since = s.now.Add(-2 * time.Second)
			},
			wake: 3 * time.Second,
		},
		{
			name: "a dead worker is left alone",
			setup: func(s *sim) {
				s.worker("w1", 1)
				s.must(&fsm.WorkerDown{ID: "w1"})
				s.lastSeen["w1"] = s.now.Add(-time.Hour)
			},
		},
		{
			name: "a waiting job is spread over free slots",
			setup: func(s *sim) {
				s.worker("w1", 2)
				s.worker("w2", 2)
				s.submit("a", "b", "c")
			},
			want: []fsm.Command{&fsm.PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2", "c": "w1"}}},
			wake: 5 * time.Second,
		},
		{
			name: "too few slots: the job waits and says why",
			setup: func(s *sim) {
				s.worker("w1", 2)
				s.submit("a", "b", "c")
			},
			want: []fsm.Command{&fsm.JobWaiting{JobID: "job-2", Message: "waiting for slots: job needs 3, 2 free"}},
			wake: 5 * time.Second,
		},
		{
			name: "a job already waiting with the same message is not touched",
			setup: func(s *sim) {
				s.worker("w1", 2)
				id := s.submit("a", "b", "c")
				s.must(&fsm.JobWaiting{JobID: id, Message: "waiting for slots: job needs 3, 2 free"})
			},
			wake: 5 * time.Second,
		},
		{
			name: "slots taken by one decision are not offered to the next job",
			setup: func(s *sim) {
				s.worker("w1", 2)
				s.submit("a", "b")
				s.submit("x")
			},
			want: []fsm.Command{
				&fsm.PlaceJob{JobID: "job-2", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1"}},
				&fsm.JobWaiting{JobID: "job-3", Message: "waiting for slots: job needs 1, 0 free"},
			},
			wake: 5 * time.Second,
		},
		{
			name: "a restarting job waits its backoff",
			setup: func(s *sim) {
				s.worker("w1", 2)
				id := s.submit("a")
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1"}})
				s.must(&fsm.TaskFailed{JobID: id, Attempt: 1, TaskID: "a", Message: "boom"})
				s.now = s.now.Add(1500 * time.Millisecond)
				s.lastSeen["w1"] = s.now
			},
			wake: 500 * time.Millisecond,
		},
		{
			name: "a restarting job past its backoff is placed as the next attempt",
			setup: func(s *sim) {
				s.worker("w1", 2)
				id := s.submit("a")
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1"}})
				s.must(&fsm.TaskFailed{JobID: id, Attempt: 1, TaskID: "a", Message: "boom"})
				s.now = s.now.Add(2 * time.Second)
				s.lastSeen["w1"] = s.now
			},
			want: []fsm.Command{&fsm.PlaceJob{JobID: "job-2", Attempt: 2, Deployment: map[string]string{"a": "w1"}}},
			wake: 5 * time.Second,
		},
		{
			name: "a restarting job past its backoff without slots waits",
			setup: func(s *sim) {
				s.worker("w1", 1)
				s.worker("w2", 1)
				id := s.submit("a", "b")
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}})
				s.must(&fsm.WorkerDown{ID: "w2", Reason: "gone"})
				s.now = s.now.Add(2 * time.Second)
				s.lastSeen["w1"] = s.now
			},
			want: []fsm.Command{&fsm.JobWaiting{JobID: "job-3", Message: "waiting for slots: job needs 2, 1 free"}},
			wake: 5 * time.Second,
		},
		{
			name: "restarts used up: the job fails with the last cause",
			setup: func(s *sim) {
				s.worker("w1", 1)
				id := s.submit("a")
				for attempt := 1; attempt <= 3; attempt++ {
					s.must(&fsm.PlaceJob{JobID: id, Attempt: attempt, Deployment: map[string]string{"a": "w1"}})
					s.must(&fsm.TaskFailed{JobID: id, Attempt: attempt, TaskID: "a", Message: fmt.Sprintf("boom %d", attempt)})
				}
			},
			want: []fsm.Command{&fsm.FailJob{JobID: "job-2", Message: "failed after 2 restarts: task a of attempt 3 failed: boom 3"}},
			wake: 5 * time.Second,
		},
		{
			name: "no restart strategy: the first failure fails the job",
			setup: func(s *sim) {
				s.restart = RestartStrategy{Kind: RestartNone}
				s.worker("w1", 1)
				id := s.submit("a")
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1"}})
				s.must(&fsm.TaskFailed{JobID: id, Attempt: 1, TaskID: "a", Message: "boom"})
			},
			want: []fsm.Command{&fsm.FailJob{JobID: "job-2", Message: "task a of attempt 1 failed: boom"}},
			wake: 5 * time.Second,
		},
		{
			name: "running, finished and canceled jobs are left alone",
			setup: func(s *sim) {
				s.worker("w1", 3)
				a := s.submit("a")
				s.must(&fsm.PlaceJob{JobID: a, Attempt: 1, Deployment: map[string]string{"a": "w1"}})
				b := s.submit("b")
				s.must(&fsm.PlaceJob{JobID: b, Attempt: 1, Deployment: map[string]string{"b": "w1"}})
				s.must(&fsm.TaskFinished{JobID: b, Attempt: 1, TaskID: "b"})
				c := s.submit("c")
				s.must(&fsm.CancelJob{Tenant: fsm.DefaultTenant, JobID: c})
			},
			wake: 5 * time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			tc.setup(s)
			p := decide(s.round())
			if !reflect.DeepEqual(p.commands, tc.want) {
				t.Errorf("commands:\n got %s\nwant %s", dump(p.commands), dump(tc.want))
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

func dump(cmds []fsm.Command) string {
	var b strings.Builder
	for _, c := range cmds {
		fmt.Fprintf(&b, "%s%+v ", c.Type(), c)
	}
	return b.String()
}

func TestRestartDelay(t *testing.T) {
	tests := []struct {
		name     string
		strategy RestartStrategy
		want     []time.Duration // for restarts 1, 2, ...
	}{
		{"fixed", RestartStrategy{Kind: RestartFixed, Delay: time.Second}, []time.Duration{time.Second, time.Second, time.Second}},
		{"exponential, capped", RestartStrategy{Kind: RestartExponential, Delay: time.Second, MaxDelay: 5 * time.Second},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"exponential from zero", RestartStrategy{Kind: RestartExponential, MaxDelay: time.Second}, []time.Duration{0, 0}},
		{"exponential, many restarts", RestartStrategy{Kind: RestartExponential, Delay: time.Second, MaxDelay: time.Minute},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				if got := tc.strategy.delay(i + 1); got != want {
					t.Errorf("delay after restart %d = %s, want %s", i+1, got, want)
				}
			}
			if got := tc.strategy.delay(1 << 20); got > max(tc.strategy.MaxDelay, tc.strategy.Delay) {
				t.Errorf("delay after many restarts = %s", got)
			}
		})
	}
}

// TestLeaderScenario drives the leader's decisions through a whole story
// with a manual clock: placement, a lost worker, the backoff, the restart
// elsewhere, and a job that fails for good.
func TestLeaderScenario(t *testing.T) {
	s := newSim(t)
	s.worker("w1", 2)
	job := s.submit("a", "b", "c")

	cmds, _ := s.settle()
	if got := s.job(job); got.State != fsm.JobWaitingForSlots || got.Message != "waiting for slots: job needs 3, 2 free" {
		t.Fatalf("after %s: job %s %q", types(cmds), got.State, got.Message)
	}
	s.worker("w2", 2)
	cmds, _ = s.settle()
	if got := s.job(job); got.State != fsm.JobRunning || got.Attempt != 1 || types(cmds) != "place_job" {
		t.Fatalf("after %s: job %s attempt %d", types(cmds), got.State, got.Attempt)
	}

	// w1 stays silent; w2 keeps heartbeating.
	for i := 0; i < 5; i++ {
		s.now = s.now.Add(time.Second)
		s.lastSeen["w2"] = s.now
		if cmds, _ := s.settle(); len(cmds) > 0 && s.now.Sub(t0) < 5*time.Second {
			t.Fatalf("at %s: %s", s.now.Sub(t0), dump(cmds))
		}
	}
	if w, _ := s.f.Worker("w1"); w.State != fsm.WorkerDead {
		t.Fatalf("w1 %s after 5s of silence", w.State)
	}
	j := s.job(job)
	if j.State != fsm.JobRestarting || !strings.Contains(j.Message, "worker w1 down: no heartbeat for 5s") {
		t.Fatalf("job %s %q", j.State, j.Message)
	}
	_, wake := s.settle()
	if want := s.now.Add(2 * time.Second); !wake.Equal(want) {
		t.Fatalf("wake at %s, want the end of the backoff %s", wake, want)
	}
	// Backoff over, but w2 alone has 2 slots for 3 tasks.
	s.now = wake
	s.lastSeen["w2"] = s.now
	s.settle()
	if j := s.job(job); j.State != fsm.JobWaitingForSlots || j.Message != "waiting for slots: job needs 3, 2 free" {
		t.Fatalf("job %s %q", j.State, j.Message)
	}
	// w1 comes back (same process): the job runs as attempt 2.
	s.worker("w1", 2)
	s.settle()
	if j := s.job(job); j.State != fsm.JobRunning || j.Attempt != 2 {
		t.Fatalf("job %s attempt %d", j.State, j.Attempt)
	}

	// The lost worker was the first restart; a failure of attempt 2 is the
	// second and last the strategy allows; the failure of attempt 3 fails
	// the job.
	s.must(&fsm.TaskFailed{JobID: job, Attempt: 2, TaskID: "b", Message: "trap"})
	_, wake = s.settle()
	s.now = wake
	s.lastSeen["w1"], s.lastSeen["w2"] = s.now, s.now
	s.settle()
	if j := s.job(job); j.State != fsm.JobRunning || j.Attempt != 3 {
		t.Fatalf("after failure of attempt 2: job %s attempt %d", j.State, j.Attempt)
	}
	s.must(&fsm.TaskFailed{JobID: job, Attempt: 3, TaskID: "c", Message: "trap again"})
	s.settle()
	if j := s.job(job); j.State != fsm.JobFailed || j.Message != "failed after 2 restarts: task c of attempt 3 failed: trap again" {
		t.Fatalf("job %s %q", j.State, j.Message)
	}
}

func report(job string, attempt int, task string, state eddyv1.TaskState) *eddyv1.TaskReport {
	return &eddyv1.TaskReport{Task: &eddyv1.TaskRef{JobId: job, Attempt: uint32(attempt), TaskId: task}, State: state}
}

const (
	running   = eddyv1.TaskState_TASK_STATE_RUNNING
	deploying = eddyv1.TaskState_TASK_STATE_DEPLOYING
	done      = eddyv1.TaskState_TASK_STATE_FINISHED
	failed    = eddyv1.TaskState_TASK_STATE_FAILED
	canceled  = eddyv1.TaskState_TASK_STATE_CANCELED
)

// heartbeatState: w1 and w2; job-3 runs a on w1 and b on w2 (attempt 1);
// job-4 ran on w1 and was canceled; job-5 restarted from attempt 1 and
// runs attempt 2 on w2 only.
func heartbeatState(t *testing.T) *sim {
	s := newSim(t)
	s.worker("w1", 4)
	s.worker("w2", 4)
	j3 := s.submit("a", "b")
	s.must(&fsm.PlaceJob{JobID: j3, Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}})
	j4 := s.submit("x")
	s.must(&fsm.PlaceJob{JobID: j4, Attempt: 1, Deployment: map[string]string{"x": "w1"}})
	s.must(&fsm.CancelJob{Tenant: fsm.DefaultTenant, JobID: j4})
	j5 := s.submit("p", "q")
	s.must(&fsm.PlaceJob{JobID: j5, Attempt: 1, Deployment: map[string]string{"p": "w1", "q": "w2"}})
	s.must(&fsm.TaskFailed{JobID: j5, Attempt: 1, TaskID: "q", Message: "boom"})
	s.must(&fsm.PlaceJob{JobID: j5, Attempt: 2, Deployment: map[string]string{"p": "w2", "q": "w2"}})
	if j3 != "job-3" || j4 != "job-5" || j5 != "job-8" {
		t.Fatalf("job ids %s %s %s", j3, j4, j5)
	}
	return s
}

func refs(rs []*eddyv1.TaskRef) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s/%d/%s", r.GetJobId(), r.GetAttempt(), r.GetTaskId()))
	}
	return strings.Join(out, " ")
}

func TestInstructions(t *testing.T) {
	tests := []struct {
		name        string
		worker      string
		reports     []*eddyv1.TaskReport
		deployments string // job/attempt:task,task ...
		cancel      string
		cancelJobs  string
		released    string
	}{
		{
			name:        "a fresh worker is sent its share of every running job",
			worker:      "w2",
			deployments: "job-3/1:b job-8/2:p,q",
		},
		{
			name:    "tasks the worker has, in any state, are not sent again",
			worker:  "w2",
			reports: []*eddyv1.TaskReport{report("job-3", 1, "b", deploying), report("job-8", 2, "p", running), report("job-8", 2, "q", running)},
		},
		{
			name:        "tasks of an old attempt, of a canceled job or of no job are canceled",
			worker:      "w1",
			reports:     []*eddyv1.TaskReport{report("job-3", 1, "a", running), report("job-5", 1, "x", running), report("job-8", 1, "p", running), report("job-99", 1, "z", running)},
			cancel:      "job-5/1/x job-8/1/p job-99/1/z",
			cancelJobs:  "job-5 job-99",
			deployments: "",
		},
		{
			name:     "terminal reports the FSM no longer needs are released",
			worker:   "w1",
			reports:  []*eddyv1.TaskReport{report("job-3", 1, "a", running), report("job-5", 1, "x", canceled), report("job-8", 1, "p", failed)},
			released: "job-5/1/x job-8/1/p",
		},
		{
			name:        "a finished report of the running attempt waits until the FSM records it",
			worker:      "w2",
			reports:     []*eddyv1.TaskReport{report("job-3", 1, "b", done), report("job-8", 2, "q", failed)},
			deployments: "job-8/2:p",
		},
		{
			name:    "a task placed on another worker is canceled here",
			worker:  "w2",
			reports: []*eddyv1.TaskReport{report("job-3", 1, "a", running), report("job-3", 1, "b", running), report("job-8", 2, "p", running), report("job-8", 2, "q", running)},
			cancel:  "job-3/1/a",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := heartbeatState(t)
			workers := map[string]fsm.Worker{}
			for _, w := range s.f.Workers() {
				workers[w.ID] = w
			}
			resp := instructions(tc.worker, tc.reports, s.f.AllJobs(), workers, nil)
			var deps []string
			for _, d := range resp.GetDeployments() {
				deps = append(deps, fmt.Sprintf("%s/%d:%s", d.GetJobId(), d.GetAttempt(), strings.Join(d.GetTaskIds(), ",")))
			}
			if got := strings.Join(deps, " "); got != tc.deployments {
				t.Errorf("deployments %q, want %q", got, tc.deployments)
			}
			if got := refs(resp.GetCancelTasks()); got != tc.cancel {
				t.Errorf("cancel %q, want %q", got, tc.cancel)
			}
			if got := strings.Join(resp.GetCancelJobs(), " "); got != tc.cancelJobs {
				t.Errorf("cancel jobs %q, want %q", got, tc.cancelJobs)
			}
			if got := refs(resp.GetReleased()); got != tc.released {
				t.Errorf("released %q, want %q", got, tc.released)
			}
		})
	}
}

func TestDeploymentContents(t *testing.T) {
	s := newSim(t)
	s.worker("w1", 2)
	s.worker("w2", 2)
	s.must(&fsm.RegisterModule{Tenant: fsm.DefaultTenant, Name: "enrich", SHA256: strings.Repeat("ab", 32), Size: 3})
	id := s.must(&fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "j", Spec: []byte("name: j"), Tasks: []string{"a", "b"},
		Modules:       []fsm.ModuleRef{{Ref: "enrich", Name: "enrich", Version: 1, SHA256: strings.Repeat("ab", 32)}},
		FromSavepoint: "file:///sp/1"}).(fsm.Job).ID
	s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}})
	workers := map[string]fsm.Worker{}
	for _, w := range s.f.Workers() {
		workers[w.ID] = w
	}
	resp := instructions("w1", nil, s.f.AllJobs(), workers, func(j *fsm.Job) string { return "file:///chk/" + j.ID })
	if len(resp.GetDeployments()) != 1 {
		t.Fatalf("deployments %v", resp.GetDeployments())
	}
	d := resp.GetDeployments()[0]
	if d.GetJobId() != id || d.GetAttempt() != 1 || d.GetTenant() != "default" || string(d.GetSpecYaml()) != "name: j" ||
		d.GetRestoreFrom() != "file:///sp/1" || strings.Join(d.GetTaskIds(), ",") != "a" || d.GetCheckpointStorage() != "file:///chk/"+id {
		t.Errorf("deployment %v", d)
	}
	if m := d.GetModules(); len(m) != 1 || m[0].GetRef() != "enrich" || m[0].GetName() != "enrich" || m[0].GetVersion() != 1 || m[0].GetSha256() != strings.Repeat("ab", 32) {
		t.Errorf("modules %v", m)
	}
	var placements []string
	for _, p := range d.GetPlacements() {
		placements = append(placements, p.GetTaskId()+"@"+p.GetWorkerId()+"@"+p.GetDataAddress())
	}
	if got := strings.Join(placements, " "); got != "a@w1@127.0.0.1:w1 b@w2@127.0.0.1:w2" {
		t.Errorf("placements %s", got)
	}
}

func TestReportCommands(t *testing.T) {
	tests := []struct {
		name    string
		worker  string
		reports []*eddyv1.TaskReport
		want    []fsm.Command
	}{
		{
			name:    "running tasks need nothing",
			worker:  "w1",
			reports: []*eddyv1.TaskReport{report("job-3", 1, "a", running)},
		},
		{
			name:    "a finished task of the running attempt is recorded",
			worker:  "w1",
			reports: []*eddyv1.TaskReport{report("job-3", 1, "a", done)},
			want:    []fsm.Command{&fsm.TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "a"}},
		},
		{
			name:   "the first failure of an attempt is recorded, with its error",
			worker: "w2",
			reports: []*eddyv1.TaskReport{
				{Task: &eddyv1.TaskRef{JobId: "job-8", Attempt: 2, TaskId: "p"}, State: failed, Error: "trap: out of bounds"},
				report("job-8", 2, "q", failed),
			},
			want: []fsm.Command{&fsm.TaskFailed{JobID: "job-8", Attempt: 2, TaskID: "p", Message: "trap: out of bounds"}},
		},
		{
			name:    "a task canceled without instruction fails the attempt",
			worker:  "w2",
			reports: []*eddyv1.TaskReport{report("job-3", 1, "b", canceled)},
			want:    []fsm.Command{&fsm.TaskFailed{JobID: "job-3", Attempt: 1, TaskID: "b", Message: "canceled by worker w2 without being told to"}},
		},
		{
			name:    "reports of old attempts, other workers' tasks and ended jobs are ignored",
			worker:  "w1",
			reports: []*eddyv1.TaskReport{report("job-8", 1, "p", failed), report("job-3", 1, "b", done), report("job-5", 1, "x", done), report("job-1", 1, "a", done)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := heartbeatState(t)
			jobs := s.f.AllJobs()
			byID := map[string]*fsm.Job{}
			for i := range jobs {
				byID[jobs[i].ID] = &jobs[i]
			}
			got := reportCommands(tc.worker, tc.reports, byID)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %s\nwant %s", dump(got), dump(tc.want))
			}
		})
	}
}

func TestJobStatusView(t *testing.T) {
	s := heartbeatState(t)
	idx := newReportIndex()
	j3 := s.job("job-3")
	if got := apiJobState(&j3, idx); got != eddyv1.JobState_JOB_STATE_DEPLOYING {
		t.Errorf("nothing reported: %s", got)
	}
	idx.add(report("job-3", 1, "a", running))
	r := report("job-3", 1, "b", running)
	r.Metrics = &eddyv1.TaskMetrics{RecordsIn: 7, RecordsOut: 5}
	idx.add(r)
	if got := apiJobState(&j3, idx); got != eddyv1.JobState_JOB_STATE_RUNNING {
		t.Errorf("all running: %s", got)
	}
	st := jobStatus(&j3, idx, t0)
	if len(st.GetTasks()) != 2 || st.GetTasks()[1].GetWorkerId() != "w2" || st.GetTasks()[1].GetMetrics().GetRecordsIn() != 7 ||
		st.GetTasks()[1].GetState() != running || st.GetJob().GetAttempt() != 1 {
		t.Errorf("status %v", st)
	}
	j5 := s.job("job-5")
	if got := apiJobState(&j5, idx); got != eddyv1.JobState_JOB_STATE_CANCELED {
		t.Errorf("canceled, no task reported: %s", got)
	}
	idx.add(report("job-5", 1, "x", running))
	if got := apiJobState(&j5, idx); got != eddyv1.JobState_JOB_STATE_CANCELING {
		t.Errorf("canceled, a task still reported: %s", got)
	}
	if st := jobStatus(&j5, idx, t0); st.GetJob().GetEndedUnixMs() == 0 {
		t.Errorf("canceled job without an end time: %v", st.GetJob())
	}
}
