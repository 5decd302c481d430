package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness applies commands as a Raft log would: increasing indexes, the
// leader's clock one second further at each command.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	now   time.Time
	log   [][]byte // every entry applied, encoded
}

func newHarness(t testing.TB) *harness {
	return &harness{t: t, f: New(), now: t0}
}

func (h *harness) encode(cmd Command) []byte {
	h.t.Helper()
	h.now = h.now.Add(time.Second)
	data, err := Encode(cmd, h.now)
	if err != nil {
		h.t.Fatalf("Encode(%T): %v", cmd, err)
	}
	return data
}

func (h *harness) applyRaw(data []byte) (any, error) {
	h.index++
	h.log = append(h.log, data)
	res := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: data})
	if err, ok := res.(error); ok {
		return nil, err
	}
	return res, nil
}

func (h *harness) apply(cmd Command) (any, error) {
	h.t.Helper()
	return h.applyRaw(h.encode(cmd))
}

func (h *harness) must(cmd Command) any {
	h.t.Helper()
	res, err := h.apply(cmd)
	if err != nil {
		h.t.Fatalf("apply %s: %v", cmd.Type(), err)
	}
	return res
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func job(t *testing.T, f *FSM, tenant, id string) Job {
	t.Helper()
	j, err := f.Job(tenant, id)
	if err != nil {
		t.Fatalf("Job(%s, %s): %v", tenant, id, err)
	}
	return j
}

func worker(t *testing.T, f *FSM, id string) Worker {
	t.Helper()
	w, err := f.Worker(id)
	if err != nil {
		t.Fatalf("Worker(%s): %v", id, err)
	}
	return w
}

// Two workers (w1, w2) of two slots and two jobs submitted to the default
// tenant: job-3 with tasks a, b and job-4 with task x. Indexes 1-4.
var twoWorkersTwoJobs = []Command{
	&RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "i1"},
	&RegisterWorker{ID: "w2", Address: "127.0.0.1:7002", Slots: 2, Incarnation: "i1"},
	&SubmitJob{Tenant: DefaultTenant, Name: "two", Spec: []byte("name: two"), Tasks: []string{"a", "b"}},
	&SubmitJob{Tenant: DefaultTenant, Name: "one", Spec: []byte("name: one"), Tasks: []string{"x"}},
}

// ... and both placed: a on w1, b on w2, x on w1. Indexes 1-6.
var twoJobsRunning = append(slices.Clone(twoWorkersTwoJobs),
	&PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}},
	&PlaceJob{JobID: "job-4", Attempt: 1, Deployment: map[string]string{"x": "w1"}},
)

func TestCommands(t *testing.T) {
	tests := []struct {
		name    string
		given   []Command
		when    Command
		wantErr error
		then    func(t *testing.T, f *FSM, res any)
	}{
		{
			name: "create tenant",
			when: &CreateTenant{ID: "acme"},
			then: func(t *testing.T, f *FSM, res any) {
				if got := res.(Tenant); got.ID != "acme" || !got.Created.Equal(t0.Add(time.Second)) {
					t.Errorf("result %+v", got)
				}
				var ids []string
				for _, tn := range f.Tenants() {
					ids = append(ids, tn.ID)
				}
				if !slices.Equal(ids, []string{"acme", "default"}) {
					t.Errorf("tenants %v", ids)
				}
			},
		},
		{
			name:    "create existing tenant",
			when:    &CreateTenant{ID: DefaultTenant},
			wantErr: ErrTenantExists,
		},
		{
			name: "register coordinator",
			when: &RegisterCoordinator{ID: "c1", RaftAddress: "127.0.0.1:9001", APIAddress: "127.0.0.1:8001"},
			then: func(t *testing.T, f *FSM, _ any) {
				c, err := f.Coordinator("c1")
				if err != nil || c.APIAddress != "127.0.0.1:8001" {
					t.Errorf("Coordinator = %+v, %v", c, err)
				}
				if _, err := f.Coordinator("c9"); !errors.Is(err, ErrCoordinatorNotFound) {
					t.Errorf("unknown coordinator: %v", err)
				}
			},
		},
		{
			name: "module versions numbered per name and tenant",
			given: []Command{
				&CreateTenant{ID: "acme"},
				&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
				&RegisterModule{Tenant: DefaultTenant, Name: "stats", SHA256: digest("s1"), Size: 20},
				&RegisterModule{Tenant: "acme", Name: "enrich", SHA256: digest("e1"), Size: 10},
			},
			when: &RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e2"), Size: 11},
			then: func(t *testing.T, f *FSM, res any) {
				if m := res.(Module); m.Version != 2 || m.Ref() != "enrich@2" || m.Size != 11 {
					t.Errorf("result %+v", m)
				}
				var refs []string
				for _, m := range f.Modules(DefaultTenant) {
					refs = append(refs, m.Ref())
				}
				if !slices.Equal(refs, []string{"enrich@1", "enrich@2", "stats@1"}) {
					t.Errorf("default modules %v", refs)
				}
				if m, err := f.Module("acme", "enrich", 0); err != nil || m.Version != 1 {
					t.Errorf("acme latest enrich = %+v, %v", m, err)
				}
				if m, err := f.Module(DefaultTenant, "enrich", 0); err != nil || m.SHA256 != digest("e2") {
					t.Errorf("latest enrich = %+v, %v", m, err)
				}
				if m, err := f.Module(DefaultTenant, "enrich", 1); err != nil || m.SHA256 != digest("e1") {
					t.Errorf("enrich@1 = %+v, %v", m, err)
				}
				if _, err := f.Module(DefaultTenant, "enrich", 3); !errors.Is(err, ErrModuleNotFound) {
					t.Errorf("enrich@3: %v", err)
				}
				if _, err := f.Module("acme", "stats", 0); !errors.Is(err, ErrModuleNotFound) {
					t.Errorf("acme stats: %v", err)
				}
			},
		},
		{
			name: "module with the latest digest is not a new version",
			given: []Command{
				&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
			},
			when: &RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
			then: func(t *testing.T, f *FSM, res any) {
				if m := res.(Module); m.Version != 1 || !m.Created.Equal(t0.Add(time.Second)) {
					t.Errorf("result %+v", m)
				}
				if n := len(f.Modules(DefaultTenant)); n != 1 {
					t.Errorf("%d modules", n)
				}
			},
		},
		{
			name:    "module of unknown tenant",
			when:    &RegisterModule{Tenant: "nobody", Name: "enrich", SHA256: digest("e1")},
			wantErr: ErrTenantNotFound,
		},
		{
			name: "register worker",
			when: &RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 4, Incarnation: "i1"},
			then: func(t *testing.T, f *FSM, res any) {
				want := Worker{ID: "w1", Address: "127.0.0.1:7001", Slots: 4, Incarnation: "i1", State: WorkerAlive,
					Registered: t0.Add(time.Second), Updated: t0.Add(time.Second)}
				if got := worker(t, f, "w1"); !reflect.DeepEqual(got, want) {
					t.Errorf("Worker = %+v, want %+v", got, want)
				}
				if got := res.(Worker); !reflect.DeepEqual(got, want) {
					t.Errorf("result = %+v, want %+v", got, want)
				}
			},
		},
		{
			name:  "submit job",
			given: twoWorkersTwoJobs[:2],
			when:  &SubmitJob{Tenant: DefaultTenant, Name: "j", Spec: []byte("spec"), Tasks: []string{"a", "b", "c"}},
			then: func(t *testing.T, f *FSM, res any) {
				j := job(t, f, DefaultTenant, "job-3")
				if !reflect.DeepEqual(j, res.(Job)) {
					t.Errorf("result %+v, query %+v", res, j)
				}
				if j.State != JobWaitingForSlots || j.Attempt != 0 || j.Deployment != nil || string(j.Spec) != "spec" ||
					!slices.Equal(j.Tasks, []string{"a", "b", "c"}) || j.SubmitIndex != 3 {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:    "submit job of unknown tenant",
			when:    &SubmitJob{Tenant: "acme", Name: "j", Tasks: []string{"a"}},
			wantErr: ErrTenantNotFound,
		},
		{
			name: "submit job with pinned modules",
			given: []Command{
				&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
				&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e2"), Size: 10},
			},
			when: &SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"}, FromSavepoint: "sp-1",
				Modules: []ModuleRef{{Ref: "enrich@1", Name: "enrich", Version: 1, SHA256: digest("e1")}}},
			then: func(t *testing.T, f *FSM, res any) {
				j := job(t, f, DefaultTenant, "job-3")
				want := []ModuleRef{{Ref: "enrich@1", Name: "enrich", Version: 1, SHA256: digest("e1")}}
				if !slices.Equal(j.Modules, want) || j.FromSavepoint != "sp-1" {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name: "submit job with a module digest that is not registered",
			given: []Command{
				&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
			},
			when: &SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"},
				Modules: []ModuleRef{{Ref: "enrich", Name: "enrich", Version: 1, SHA256: digest("e2")}}},
			wantErr: ErrModuleNotFound,
		},
		{
			name: "submit job with an unknown module version",
			given: []Command{
				&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
			},
			when: &SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"},
				Modules: []ModuleRef{{Ref: "enrich@2", Name: "enrich", Version: 2, SHA256: digest("e1")}}},
			wantErr: ErrModuleNotFound,
		},
		{
			name: "submit job again with its request id",
			given: []Command{
				&CreateTenant{ID: "acme"},
				&SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"}, RequestID: "r1"},
			},
			when: &SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"}, RequestID: "r1"},
			then: func(t *testing.T, f *FSM, res any) {
				if got := res.(Job); got.ID != "job-2" || got.RequestID != "r1" {
					t.Errorf("result %+v, want job-2", got)
				}
				if n := len(f.Jobs(DefaultTenant)); n != 1 {
					t.Errorf("%d jobs, want 1", n)
				}
				// Another tenant's key is its own.
				if _, err := f.ApplyCommand(f.AppliedIndex()+1, mustEncode(t, &SubmitJob{Tenant: "acme", Name: "j", Tasks: []string{"a"}, RequestID: "r1"}, t0)); err != nil {
					t.Fatal(err)
				}
				if n := len(f.Jobs("acme")); n != 1 {
					t.Errorf("acme has %d jobs, want 1", n)
				}
			},
		},
		{
			name: "numbered jobs count",
			given: []Command{
				&RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "i1"},
				&SubmitJob{Numbered: true, Tenant: DefaultTenant, Name: "first", Tasks: []string{"a"}},
				&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 10},
				&CreateTenant{ID: "acme"},
			},
			when: &SubmitJob{Numbered: true, Tenant: "acme", Name: "second", Tasks: []string{"a"}},
			then: func(t *testing.T, f *FSM, res any) {
				if got := res.(Job); got.ID != "job-2" {
					t.Errorf("second job %s, want job-2", got.ID)
				}
				if j := job(t, f, DefaultTenant, "job-1"); j.Name != "first" {
					t.Errorf("job-1 is %+v", j)
				}
			},
		},
		{
			name: "numbered job skips the number of a job from before numbering",
			given: []Command{
				&RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "i1"},
				&SubmitJob{Tenant: DefaultTenant, Name: "old", Tasks: []string{"a"}}, // job-2
				&SubmitJob{Numbered: true, Tenant: DefaultTenant, Name: "new", Tasks: []string{"a"}},
			},
			when: &SubmitJob{Numbered: true, Tenant: DefaultTenant, Name: "newer", Tasks: []string{"a"}},
			then: func(t *testing.T, f *FSM, res any) {
				var ids []string
				for _, j := range f.Jobs(DefaultTenant) {
					ids = append(ids, j.ID+" "+j.Name)
				}
				if !slices.Equal(ids, []string{"job-2 old", "job-1 new", "job-3 newer"}) {
					t.Errorf("jobs %v", ids)
				}
			},
		},
		{
			name: "refused numbered job takes no number",
			given: []Command{
				&SubmitJob{Numbered: true, Tenant: DefaultTenant, Name: "first", Tasks: []string{"a"}},
			},
			when: &SubmitJob{Numbered: true, Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"},
				Modules: []ModuleRef{{Ref: "enrich", Name: "enrich", Version: 1, SHA256: digest("e1")}}},
			wantErr: ErrModuleNotFound,
		},
		{
			name:  "place job",
			given: twoWorkersTwoJobs,
			when:  &PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}},
			then: func(t *testing.T, f *FSM, _ any) {
				j := job(t, f, DefaultTenant, "job-3")
				if j.State != JobRunning || j.Attempt != 1 || j.Message != "" ||
					!maps.Equal(j.Deployment, map[string]string{"a": "w1", "b": "w2"}) {
					t.Errorf("job %+v", j)
				}
				if w := worker(t, f, "w1"); w.UsedSlots != 1 || w.FreeSlots() != 1 {
					t.Errorf("w1 %+v", w)
				}
			},
		},
		{
			name:    "place job as a stale attempt",
			given:   twoWorkersTwoJobs,
			when:    &PlaceJob{JobID: "job-3", Attempt: 2, Deployment: map[string]string{"a": "w1", "b": "w2"}},
			wantErr: ErrStaleAttempt,
		},
		{
			name:    "place running job",
			given:   twoJobsRunning,
			when:    &PlaceJob{JobID: "job-3", Attempt: 2, Deployment: map[string]string{"a": "w1", "b": "w2"}},
			wantErr: ErrJobState,
		},
		{
			name:    "place job missing a task",
			given:   twoWorkersTwoJobs,
			when:    &PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"a": "w1", "c": "w2"}},
			wantErr: ErrInvalidPlacement,
		},
		{
			name:    "place job on unknown worker",
			given:   twoWorkersTwoJobs,
			when:    &PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w9"}},
			wantErr: ErrInvalidPlacement,
		},
		{
			name:    "place job on dead worker",
			given:   append(slices.Clone(twoWorkersTwoJobs), &WorkerDown{ID: "w2"}),
			when:    &PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}},
			wantErr: ErrInvalidPlacement,
		},
		{
			name: "place job onto a full worker",
			given: append(slices.Clone(twoWorkersTwoJobs),
				&PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1"}}),
			when:    &PlaceJob{JobID: "job-4", Attempt: 1, Deployment: map[string]string{"x": "w1"}},
			wantErr: ErrInvalidPlacement,
		},
		{
			name:    "place unknown job",
			when:    &PlaceJob{JobID: "job-99", Attempt: 1, Deployment: map[string]string{"x": "w1"}},
			wantErr: ErrJobNotFound,
		},
		{
			name:  "job waiting for slots",
			given: twoWorkersTwoJobs,
			when:  &JobWaiting{JobID: "job-3", Message: "waiting for slots: job needs 2, 1 free"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobWaitingForSlots || j.Message != "waiting for slots: job needs 2, 1 free" {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:    "running job cannot wait",
			given:   twoJobsRunning,
			when:    &JobWaiting{JobID: "job-3", Message: "x"},
			wantErr: ErrJobState,
		},
		{
			name:  "task finished frees its slot",
			given: twoJobsRunning,
			when:  &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "a"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobRunning || !slices.Equal(j.FinishedTasks, []string{"a"}) {
					t.Errorf("job %+v", j)
				}
				if w := worker(t, f, "w1"); w.UsedSlots != 1 {
					t.Errorf("w1 uses %d slots, want 1 (x)", w.UsedSlots)
				}
			},
		},
		{
			name:  "last task finished finishes the job",
			given: append(slices.Clone(twoJobsRunning), &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "b"}),
			when:  &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "a"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobFinished || len(j.FinishedTasks) != 2 {
					t.Errorf("job %+v", j)
				}
				if w := worker(t, f, "w2"); w.UsedSlots != 0 {
					t.Errorf("w2 uses %d slots", w.UsedSlots)
				}
			},
		},
		{
			name:  "task finished twice",
			given: append(slices.Clone(twoJobsRunning), &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "a"}),
			when:  &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "a"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobRunning || len(j.FinishedTasks) != 1 {
					t.Errorf("job %+v", j)
				}
			},
		},
		{
			name:    "unknown task finished",
			given:   twoJobsRunning,
			when:    &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "zz"},
			wantErr: ErrMalformed,
		},
		{
			name:  "task failed restarts the job",
			given: twoJobsRunning,
			when:  &TaskFailed{JobID: "job-3", Attempt: 1, TaskID: "b", Message: "trap: unreachable"},
			then: func(t *testing.T, f *FSM, _ any) {
				j := job(t, f, DefaultTenant, "job-3")
				if j.State != JobRestarting || j.Restarts != 1 || j.Attempt != 1 || j.Deployment != nil ||
					j.Message != "task b of attempt 1 failed: trap: unreachable" {
					t.Errorf("job %+v", j)
				}
				if w := worker(t, f, "w2"); w.UsedSlots != 0 {
					t.Errorf("w2 uses %d slots", w.UsedSlots)
				}
			},
		},
		{
			name: "report of an older attempt",
			given: append(slices.Clone(twoJobsRunning),
				&TaskFailed{JobID: "job-3", Attempt: 1, TaskID: "b"},
				&PlaceJob{JobID: "job-3", Attempt: 2, Deployment: map[string]string{"a": "w2", "b": "w2"}}),
			when:    &TaskFailed{JobID: "job-3", Attempt: 1, TaskID: "a"},
			wantErr: ErrStaleAttempt,
		},
		{
			name:    "report while restarting",
			given:   append(slices.Clone(twoJobsRunning), &TaskFailed{JobID: "job-3", Attempt: 1, TaskID: "b"}),
			when:    &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "a"},
			wantErr: ErrJobState,
		},
		{
			name:  "worker down restarts the jobs with unfinished tasks on it",
			given: append(slices.Clone(twoJobsRunning), &TaskFinished{JobID: "job-3", Attempt: 1, TaskID: "a"}),
			when:  &WorkerDown{ID: "w1", Reason: "no heartbeat for 10s"},
			then: func(t *testing.T, f *FSM, res any) {
				// job-3's task on w1 had finished: job-3 keeps running.
				if got := res.([]string); !slices.Equal(got, []string{"job-4"}) {
					t.Errorf("restarted %v", got)
				}
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobRunning {
					t.Errorf("job-3 %+v", j)
				}
				if j := job(t, f, DefaultTenant, "job-4"); j.State != JobRestarting || j.Message != "worker w1 down: no heartbeat for 10s" {
					t.Errorf("job-4 %+v", j)
				}
				if w := worker(t, f, "w1"); w.State != WorkerDead || w.FreeSlots() != 0 || w.Message != "no heartbeat for 10s" {
					t.Errorf("w1 %+v", w)
				}
			},
		},
		{
			name:  "worker down twice",
			given: append(slices.Clone(twoJobsRunning), &WorkerDown{ID: "w1"}),
			when:  &WorkerDown{ID: "w1"},
			then: func(t *testing.T, f *FSM, res any) {
				if got := res.([]string); len(got) != 0 {
					t.Errorf("restarted %v", got)
				}
				if j := job(t, f, DefaultTenant, "job-3"); j.Restarts != 1 {
					t.Errorf("job-3 restarted %d times", j.Restarts)
				}
			},
		},
		{
			name:    "unknown worker down",
			when:    &WorkerDown{ID: "w9"},
			wantErr: ErrWorkerNotFound,
		},
		{
			name:  "worker back with the same incarnation keeps its tasks",
			given: twoJobsRunning,
			when:  &RegisterWorker{ID: "w1", Address: "127.0.0.1:7011", Slots: 3, Incarnation: "i1"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-4"); j.State != JobRunning {
					t.Errorf("job-4 %+v", j)
				}
				if w := worker(t, f, "w1"); w.Address != "127.0.0.1:7011" || w.Slots != 3 || w.UsedSlots != 2 ||
					!w.Registered.Equal(t0.Add(time.Second)) {
					t.Errorf("w1 %+v", w)
				}
			},
		},
		{
			name:  "worker back with a new incarnation lost its tasks",
			given: twoJobsRunning,
			when:  &RegisterWorker{ID: "w2", Address: "127.0.0.1:7002", Slots: 2, Incarnation: "i2"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobRestarting || j.Message != "worker w2 restarted" {
					t.Errorf("job-3 %+v", j)
				}
				if j := job(t, f, DefaultTenant, "job-4"); j.State != JobRunning {
					t.Errorf("job-4 %+v", j)
				}
			},
		},
		{
			name:  "dead worker comes back",
			given: append(slices.Clone(twoJobsRunning), &WorkerDown{ID: "w2"}),
			when:  &RegisterWorker{ID: "w2", Address: "127.0.0.1:7002", Slots: 2, Incarnation: "i2"},
			then: func(t *testing.T, f *FSM, _ any) {
				if w := worker(t, f, "w2"); w.State != WorkerAlive || w.Message != "" || w.FreeSlots() != 2 {
					t.Errorf("w2 %+v", w)
				}
				if j := job(t, f, DefaultTenant, "job-3"); j.Restarts != 1 {
					t.Errorf("job-3 restarted %d times", j.Restarts)
				}
			},
		},
		{
			name:  "cancel job",
			given: twoJobsRunning,
			when:  &CancelJob{Tenant: DefaultTenant, JobID: "job-3"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobCanceled {
					t.Errorf("job-3 %+v", j)
				}
				if w := worker(t, f, "w2"); w.UsedSlots != 0 {
					t.Errorf("w2 uses %d slots", w.UsedSlots)
				}
			},
		},
		{
			name:    "cancel another tenant's job",
			given:   append([]Command{&CreateTenant{ID: "acme"}}, twoWorkersTwoJobs...),
			when:    &CancelJob{Tenant: "acme", JobID: "job-4"},
			wantErr: ErrJobNotFound,
		},
		{
			name:    "cancel canceled job",
			given:   append(slices.Clone(twoJobsRunning), &CancelJob{Tenant: DefaultTenant, JobID: "job-3"}),
			when:    &CancelJob{Tenant: DefaultTenant, JobID: "job-3"},
			wantErr: ErrJobState,
		},
		{
			name:  "finish job",
			given: twoJobsRunning,
			when:  &FinishJob{JobID: "job-3", Attempt: 1},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-3"); j.State != JobFinished {
					t.Errorf("job-3 %+v", j)
				}
			},
		},
		{
			name:    "finish waiting job",
			given:   append(slices.Clone(twoWorkersTwoJobs), &JobWaiting{JobID: "job-3", Message: "m"}),
			when:    &FinishJob{JobID: "job-3", Attempt: 1},
			wantErr: ErrStaleAttempt,
		},
		{
			name:  "fail job",
			given: append(slices.Clone(twoJobsRunning), &TaskFailed{JobID: "job-4", Attempt: 1, TaskID: "x"}),
			when:  &FailJob{JobID: "job-4", Message: "restart limit reached (3 restarts)"},
			then: func(t *testing.T, f *FSM, _ any) {
				if j := job(t, f, DefaultTenant, "job-4"); j.State != JobFailed || j.Message != "restart limit reached (3 restarts)" {
					t.Errorf("job-4 %+v", j)
				}
			},
		},
		{
			name:    "fail finished job",
			given:   append(slices.Clone(twoJobsRunning), &FinishJob{JobID: "job-4", Attempt: 1}),
			when:    &FailJob{JobID: "job-4", Message: "x"},
			wantErr: ErrJobState,
		},
		{
			name: "tenants see only their jobs",
			given: append([]Command{&CreateTenant{ID: "acme"}},
				append(slices.Clone(twoWorkersTwoJobs[:3]), &SubmitJob{Tenant: "acme", Name: "theirs", Tasks: []string{"t"}})...),
			when: &SubmitJob{Tenant: "acme", Name: "theirs-too", Tasks: []string{"t"}},
			then: func(t *testing.T, f *FSM, _ any) {
				ids := func(jobs []Job) (out []string) {
					for _, j := range jobs {
						out = append(out, j.ID)
					}
					return out
				}
				if got := ids(f.Jobs("acme")); !slices.Equal(got, []string{"job-5", "job-6"}) {
					t.Errorf("acme jobs %v", got)
				}
				if got := ids(f.Jobs(DefaultTenant)); !slices.Equal(got, []string{"job-4"}) {
					t.Errorf("default jobs %v", got)
				}
				if got := ids(f.AllJobs()); !slices.Equal(got, []string{"job-4", "job-5", "job-6"}) {
					t.Errorf("all jobs %v", got)
				}
				if _, err := f.Job(DefaultTenant, "job-5"); !errors.Is(err, ErrJobNotFound) {
					t.Errorf("default sees acme's job: %v", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, c := range tc.given {
				h.must(c)
			}
			before, err := h.f.MarshalState()
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.apply(tc.when)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("apply %s: error %v, want %v", tc.when.Type(), err, tc.wantErr)
				}
				assertUnchangedButIndex(t, h.f, before)
				return
			}
			if err != nil {
				t.Fatalf("apply %s: %v", tc.when.Type(), err)
			}
			if tc.then != nil {
				tc.then(t, h.f, res)
			}
		})
	}
}

// assertUnchangedButIndex checks that a refused command changed nothing but
// the applied index.
func assertUnchangedButIndex(t *testing.T, f *FSM, before []byte) {
	t.Helper()
	g := New()
	if err := g.UnmarshalState(before); err != nil {
		t.Fatal(err)
	}
	g.st.appliedIndex = f.AppliedIndex()
	want, _ := g.MarshalState()
	got, _ := f.MarshalState()
	if string(got) != string(want) {
		t.Errorf("refused command changed the state:\n got %s\nwant %s", got, want)
	}
}

func TestNewHasDefaultTenant(t *testing.T) {
	f := New()
	if got := f.Tenants(); len(got) != 1 || got[0].ID != DefaultTenant {
		t.Fatalf("Tenants() = %+v", got)
	}
	if _, err := f.Tenant(DefaultTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Tenant("acme"); !errors.Is(err, ErrTenantNotFound) {
		t.Fatalf("Tenant(acme): %v", err)
	}
}

func TestApplyRefusesBadEntries(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr error
	}{
		{"unknown type", `{"v":1,"type":"launch_rockets","at":1,"body":{}}`, ErrUnknownCommand},
		{"newer version", `{"v":2,"type":"create_tenant","at":1,"body":{"id":"x"}}`, ErrUnsupportedVersion},
		{"no version", `{"type":"create_tenant","at":1,"body":{"id":"x"}}`, ErrUnsupportedVersion},
		{"not JSON", "\x00\x01binary", ErrMalformed},
		{"empty", "", ErrMalformed},
		{"no body", `{"v":1,"type":"create_tenant","at":1}`, ErrMalformed},
		{"null body", `{"v":1,"type":"create_tenant","at":1,"body":null}`, ErrMalformed},
		{"body of wrong shape", `{"v":1,"type":"create_tenant","at":1,"body":{"id":7}}`, ErrMalformed},
		{"invalid field", `{"v":1,"type":"create_tenant","at":1,"body":{"id":"Not A Tenant"}}`, ErrMalformed},
		{"time out of range", `{"v":1,"type":"create_tenant","at":-5,"body":{"id":"x"}}`, ErrMalformed},
		{"job without tasks", `{"v":1,"type":"submit_job","at":1,"body":{"tenant":"default","name":"j","tasks":[]}}`, ErrMalformed},
		{"worker without slots", `{"v":1,"type":"register_worker","at":1,"body":{"id":"w","address":"a","slots":0}}`, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			before, _ := h.f.MarshalState()
			var res any
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("Apply panicked: %v", p)
					}
				}()
				res = h.f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte(tc.data)})
			}()
			err, ok := res.(error)
			if !ok || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Apply = %v, want an error matching %v", res, tc.wantErr)
			}
			assertUnchangedButIndex(t, h.f, before)
			if h.f.AppliedIndex() != 1 {
				t.Errorf("AppliedIndex = %d, want 1", h.f.AppliedIndex())
			}
		})
	}
}

func TestApplyIndexMustIncrease(t *testing.T) {
	h := newHarness(t)
	h.must(&CreateTenant{ID: "a"})
	data := h.encode(&CreateTenant{ID: "b"})
	if _, err := h.f.ApplyCommand(1, data); !errors.Is(err, ErrIndexOrder) {
		t.Fatalf("replayed index: %v", err)
	}
	if _, err := h.f.Tenant("b"); err == nil {
		t.Fatal("command at an old index was applied")
	}
}

func TestApplyIgnoresNonCommandEntries(t *testing.T) {
	f := New()
	if res := f.Apply(&raft.Log{Index: 1, Type: raft.LogNoop}); res != nil {
		t.Fatalf("noop: %v", res)
	}
	if f.AppliedIndex() != 0 {
		t.Fatalf("AppliedIndex = %d", f.AppliedIndex())
	}
}

func TestEncodeRefusesInvalidCommands(t *testing.T) {
	tests := []struct {
		name string
		cmd  Command
		at   time.Time
	}{
		{"nil", nil, t0},
		{"zero time", &CreateTenant{ID: "a"}, time.Time{}},
		{"bad tenant", &CreateTenant{ID: "-a"}, t0},
		{"bad digest", &RegisterModule{Tenant: "default", Name: "m", SHA256: "ABC"}, t0},
		{"module name with @", &RegisterModule{Tenant: "default", Name: "m@1", SHA256: digest("m")}, t0},
		{"repeated task", &SubmitJob{Tenant: "default", Name: "j", Tasks: []string{"a", "a"}}, t0},
		{"attempt zero", &TaskFinished{JobID: "job-1", TaskID: "a"}, t0},
		{"empty deployment", &PlaceJob{JobID: "job-1", Attempt: 1}, t0},
		{"control character in id", &WorkerDown{ID: "w\n1"}, t0},
		{"checkpoint id zero", &TriggerCheckpoint{JobID: "job-1", Attempt: 1}, t0},
		{"checkpoint attempt zero", &TriggerCheckpoint{JobID: "job-1", ID: 1}, t0},
		{"completed without manifest", &CheckpointCompleted{JobID: "job-1", Attempt: 1, ID: 1, Retain: 1}, t0},
		{"completed without retain", &CheckpointCompleted{JobID: "job-1", Attempt: 1, ID: 1, Manifest: "m"}, t0},
		{"completed with a negative size", &CheckpointCompleted{JobID: "job-1", Attempt: 1, ID: 1, Manifest: "m", Retain: 1, FullSize: -1}, t0},
		{"failed checkpoint id zero", &CheckpointFailed{JobID: "job-1", Reason: "x"}, t0},
		{"no ids deleted", &CheckpointsDeleted{JobID: "job-1"}, t0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Encode(tc.cmd, tc.at); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Encode: %v, want ErrMalformed", err)
			}
		})
	}
}

func TestQueriesReturnCopies(t *testing.T) {
	h := newHarness(t)
	for _, c := range twoJobsRunning {
		h.must(c)
	}
	before, _ := h.f.MarshalState()
	j := job(t, h.f, DefaultTenant, "job-3")
	j.Deployment["a"] = "w9"
	j.Tasks[0] = "zz"
	j.Spec[0] = 'X'
	all := h.f.AllJobs()
	all[0].Deployment["b"] = "w9"
	ws := h.f.Workers()
	ws[0].Slots = 100
	after, _ := h.f.MarshalState()
	if string(before) != string(after) {
		t.Fatal("mutating query results changed the state")
	}
}

func TestMessagesAreClipped(t *testing.T) {
	h := newHarness(t)
	for _, c := range twoJobsRunning {
		h.must(c)
	}
	long := string(make([]byte, 3*maxMessageLen))
	h.must(&FailJob{JobID: "job-3", Message: "é" + long})
	if j := job(t, h.f, DefaultTenant, "job-3"); len(j.Message) > maxMessageLen+len("…") {
		t.Fatalf("message of %d bytes kept", len(j.Message))
	}
}

func TestChangedIsClosedOnApply(t *testing.T) {
	h := newHarness(t)
	ch := h.f.Changed()
	select {
	case <-ch:
		t.Fatal("closed before any change")
	default:
	}
	h.must(&CreateTenant{ID: "a"})
	select {
	case <-ch:
	default:
		t.Fatal("not closed after a change")
	}
}
