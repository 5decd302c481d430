package coordinator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
)

func hexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// startOne starts a coordinator that forms a group of one and waits until
// it leads.
func startOne(t *testing.T, opts clusterOpts) (*Coordinator, eddyv1.ControlClient) {
	t.Helper()
	cfg := testConfig(t, testkit.Logger(t), "c1", opts)
	cfg.Raft.Bootstrap = true
	c := startCoordinator(t, cfg, NewMemStore())
	cl := control(t, c.Addr())
	start := time.Now()
	if id, addr, err := c.WaitLeader(callCtx(t)); err != nil || id != "c1" || addr != c.Addr() {
		t.Fatalf("WaitLeader: %s %s %v", id, addr, err)
	}
	t.Logf("group of one serving in %s", time.Since(start).Round(time.Millisecond))
	return c, cl
}

func TestModules(t *testing.T) {
	_, cl := startOne(t, defaultOpts())
	ctx := callCtx(t)

	// A module the validator refuses: its message, as INVALID_ARGUMENT.
	_, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: []byte("not wasm at all")})
	wantCode(t, err, codes.InvalidArgument, "module enrich: not a WebAssembly binary (bad magic number)")
	for _, name := range []string{"", "Enrich", "-x", "a/b", "a@1"} {
		_, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: name, Wasm: wasmModule("x")})
		wantCode(t, err, codes.InvalidArgument)
	}
	_, err = cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich"})
	wantCode(t, err, codes.InvalidArgument, "empty")
	_, err = cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: "nobody", Name: "enrich", Wasm: wasmModule("x")})
	wantCode(t, err, codes.NotFound, "nobody")

	v1 := wasmModule("one")
	up, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: v1})
	if err != nil || up.GetAlreadyExists() || up.GetModule().GetVersion() != 1 || up.GetModule().GetSha256() != hexSHA(v1) ||
		up.GetModule().GetSize() != uint64(len(v1)) || up.GetModule().GetTenant() != "default" {
		t.Fatalf("upload v1: %v, %v", up, err)
	}
	again, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: v1})
	if err != nil || !again.GetAlreadyExists() || again.GetModule().GetVersion() != 1 {
		t.Fatalf("upload v1 again: %v, %v", again, err)
	}
	v2 := wasmModule("two")
	if up, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: v2}); err != nil || up.GetModule().GetVersion() != 2 {
		t.Fatalf("upload v2: %v, %v", up, err)
	}
	// Bytes of an older version are that version, not a new one.
	if up, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: v1}); err != nil || !up.GetAlreadyExists() || up.GetModule().GetVersion() != 1 {
		t.Fatalf("upload v1 after v2: %v, %v", up, err)
	}
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "stats", Wasm: v1}); err != nil {
		t.Fatal(err)
	}

	list, err := cl.ListModules(ctx, &eddyv1.ListModulesRequest{})
	var refs []string
	for _, m := range list.GetModules() {
		refs = append(refs, m.GetName()+"@"+string(rune('0'+m.GetVersion())))
	}
	if err != nil || strings.Join(refs, " ") != "enrich@1 enrich@2 stats@1" {
		t.Fatalf("list: %v, %v", refs, err)
	}
	if list, err := cl.ListModules(ctx, &eddyv1.ListModulesRequest{Name: "stats"}); err != nil || len(list.GetModules()) != 1 {
		t.Fatalf("list stats: %v, %v", list, err)
	}

	got, err := cl.GetModule(ctx, &eddyv1.GetModuleRequest{Name: "enrich"})
	if err != nil || got.GetModule().GetVersion() != 2 || !bytes.Equal(got.GetWasm(), v2) {
		t.Fatalf("get latest: %v, %v", got.GetModule(), err)
	}
	got, err = cl.GetModule(ctx, &eddyv1.GetModuleRequest{Name: "enrich", Version: 1, MetadataOnly: true})
	if err != nil || got.GetModule().GetSha256() != hexSHA(v1) || len(got.GetWasm()) != 0 {
		t.Fatalf("get v1 metadata: %v, %v", got, err)
	}
	_, err = cl.GetModule(ctx, &eddyv1.GetModuleRequest{Name: "enrich", Version: 7})
	wantCode(t, err, codes.NotFound, "enrich@7", "latest version is 2")
	_, err = cl.GetModule(ctx, &eddyv1.GetModuleRequest{Name: "nope"})
	wantCode(t, err, codes.NotFound, "module nope not found")
}

func TestSubmitErrors(t *testing.T) {
	_, cl := startOne(t, defaultOpts())
	ctx := callCtx(t)
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("one")}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		spec  []byte
		code  codes.Code
		parts []string
	}{
		{"empty", nil, codes.InvalidArgument, []string{"empty"}},
		{"not YAML", []byte("name: [oops"), codes.InvalidArgument, []string{"card.yaml:1"}},
		{"bad spec", []byte("name: x\nnodes:\n  - name: a\n    input: nowhere\n    wasm: {module: enrich}\n"), codes.InvalidArgument, []string{"card.yaml:3"}},
		{"a path", testSpec("j", 1, "./enrich.wasm"), codes.InvalidArgument, []string{`node "op"`, "file path", "upload it with eddy module upload ./enrich.wasm"}},
		{"unknown module", testSpec("j", 1, "nope"), codes.NotFound, []string{`node "op"`, "module nope not found"}},
		{"unknown version", testSpec("j", 1, "enrich@9"), codes.NotFound, []string{"enrich@9 not found", "latest version is 1"}},
		{"bad version", testSpec("j", 1, "enrich@x"), codes.InvalidArgument, []string{`"enrich@x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: tc.spec, SpecName: "card.yaml"})
			wantCode(t, err, tc.code, tc.parts...)
		})
	}
	if jobs, err := cl.ListJobs(ctx, &eddyv1.ListJobsRequest{}); err != nil || len(jobs.GetJobs()) != 0 {
		t.Fatalf("jobs after refused submissions: %v, %v", jobs, err)
	}
}

// TestJobLifecycle: one coordinator and fake workers. A job is deployed to
// its worker with pinned modules, runs and finishes; a job too large for
// the free slots waits, with a message, until a second worker registers;
// a canceled job's tasks are told to stop.
func TestJobLifecycle(t *testing.T) {
	c, cl := startOne(t, defaultOpts())
	ctx := callCtx(t)
	v1, v2 := wasmModule("one"), wasmModule("two")
	for _, b := range [][]byte{v1, v2} {
		if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: b}); err != nil {
			t.Fatal(err)
		}
	}
	w1 := newFakeWorker(t, "w1", 2, c.Addr())
	w1.start()
	testkit.Eventually(t, 10*time.Second, "w1 to register", func() bool {
		info, err := cl.ClusterInfo(callCtx(t), &eddyv1.ClusterInfoRequest{})
		return err == nil && len(info.GetWorkers()) == 1
	})

	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("first", 2, "enrich"), RequestId: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	job := sub.GetJobId()
	if job != "job-1" { // jobs count from 1, whatever the log holds before
		t.Fatalf("first job %s, want job-1", job)
	}
	// A retried submission is the same job.
	if again, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("first", 2, "enrich"), RequestId: "req-1"}); err != nil || again.GetJobId() != job {
		t.Fatalf("resubmission: %v, %v", again, err)
	}
	// A newer version uploaded after submission does not change the job.
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("three")}); err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, func(st *eddyv1.JobStatusResponse) bool {
		return st.GetTasks()[0].GetMetrics().GetRecordsIn() > 0
	})
	if st.GetJob().GetAttempt() != 1 || st.GetJob().GetName() != "first" || len(st.GetTasks()) != 2 {
		t.Fatalf("status %v", st)
	}
	for _, ts := range st.GetTasks() {
		if ts.GetWorkerId() != "w1" || ts.GetState() != running {
			t.Fatalf("task %v", ts)
		}
	}
	d := w1.lastDeployment(job)
	if d == nil || d.GetAttempt() != 1 || len(d.GetTaskIds()) != 2 || !bytes.Equal(d.GetSpecYaml(), testSpec("first", 2, "enrich")) {
		t.Fatalf("deployment %v", d)
	}
	if m := d.GetModules(); len(m) != 1 || m[0].GetRef() != "enrich" || m[0].GetVersion() != 2 || m[0].GetSha256() != hexSHA(v2) {
		t.Fatalf("pinned modules %v", m)
	}
	if p := d.GetPlacements(); len(p) != 2 || p[0].GetDataAddress() != w1.dataAddr {
		t.Fatalf("placements %v", p)
	}

	// The tasks finish: the job finishes and the reports are released.
	w1.setState(job, 1, done, "")
	waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_FINISHED, 10*time.Second, nil)
	testkit.Eventually(t, 10*time.Second, "the finished tasks to be released", func() bool { return len(w1.held()) == 0 })
	// Their final metrics stay visible.
	for _, ts := range jobStatusOf(t, cl, job).GetTasks() {
		if ts.GetState() != done || ts.GetWorkerId() != "w1" || ts.GetMetrics().GetRecordsIn() == 0 {
			t.Fatalf("finished task %v", ts)
		}
	}

	// Three tasks, two slots: the job waits and says why.
	big, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("big", 3, "enrich@1")})
	if err != nil {
		t.Fatal(err)
	}
	// The next job is the next number, however much was committed between
	// (the retry took none).
	if big.GetJobId() != "job-2" {
		t.Fatalf("second job %s, want job-2", big.GetJobId())
	}
	st = waitJob(t, cl, big.GetJobId(), eddyv1.JobState_JOB_STATE_WAITING_FOR_SLOTS, 10*time.Second, func(st *eddyv1.JobStatusResponse) bool {
		return st.GetJob().GetMessage() == "waiting for slots: job needs 3, 2 free"
	})
	if st.GetJob().GetAttempt() != 0 || st.GetTasks()[0].GetWorkerId() != "" {
		t.Fatalf("waiting job %v", st)
	}
	// A second worker brings the slots.
	w2 := newFakeWorker(t, "w2", 2, c.Addr())
	w2.start()
	st = waitJob(t, cl, big.GetJobId(), eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	perWorker := map[string]int{}
	for _, ts := range st.GetTasks() {
		perWorker[ts.GetWorkerId()]++
	}
	if perWorker["w1"]+perWorker["w2"] != 3 || perWorker["w1"] == 0 || perWorker["w2"] == 0 {
		t.Fatalf("placement %v", perWorker)
	}
	if m := w2.lastDeployment(big.GetJobId()).GetModules(); len(m) != 1 || m[0].GetVersion() != 1 || m[0].GetSha256() != hexSHA(v1) {
		t.Fatalf("pinned enrich@1: %v", m)
	}
	info, err := cl.ClusterInfo(ctx, &eddyv1.ClusterInfoRequest{})
	if err != nil || info.GetLeaderId() != "c1" || len(info.GetCoordinators()) != 1 || len(info.GetWorkers()) != 2 ||
		info.GetCoordinators()[0].GetApiAddress() != c.Addr() || info.GetWorkers()[0].GetSlotsUsed()+info.GetWorkers()[1].GetSlotsUsed() != 3 {
		t.Fatalf("cluster info %v, %v", info, err)
	}

	// Cancel: CANCELING while the workers still hold tasks, then CANCELED.
	canceled, err := cl.CancelJob(ctx, &eddyv1.CancelJobRequest{JobId: big.GetJobId()})
	if err != nil || canceled.GetState() != eddyv1.JobState_JOB_STATE_CANCELING {
		t.Fatalf("cancel: %v, %v", canceled, err)
	}
	waitJob(t, cl, big.GetJobId(), eddyv1.JobState_JOB_STATE_CANCELED, 10*time.Second, nil)
	testkit.Eventually(t, 10*time.Second, "the canceled tasks to be released", func() bool { return len(w1.held())+len(w2.held()) == 0 })
	if again, err := cl.CancelJob(ctx, &eddyv1.CancelJobRequest{JobId: big.GetJobId()}); err != nil || again.GetState() != eddyv1.JobState_JOB_STATE_CANCELED {
		t.Fatalf("cancel again: %v, %v", again, err)
	}
	_, err = cl.CancelJob(ctx, &eddyv1.CancelJobRequest{JobId: "job-999"})
	wantCode(t, err, codes.NotFound)
	_, err = cl.JobStatus(ctx, &eddyv1.JobStatusRequest{Tenant: "other", JobId: job})
	wantCode(t, err, codes.NotFound)

	jobs, err := cl.ListJobs(ctx, &eddyv1.ListJobsRequest{})
	if err != nil || len(jobs.GetJobs()) != 2 || jobs.GetJobs()[0].GetJobId() != big.GetJobId() ||
		jobs.GetJobs()[1].GetState() != eddyv1.JobState_JOB_STATE_FINISHED || jobs.GetJobs()[1].GetEndedUnixMs() == 0 {
		t.Fatalf("jobs %v, %v", jobs, err)
	}
}

// TestHeartbeatHeldUntilPlaced: a worker that keeps a heartbeat open (as
// the real worker does) gets the tasks of a job placed on it as soon as
// the job is placed: the leader holds each answer while its state does not
// change. The heartbeat interval, which bounds the hold, is an hour: no
// tick can be what delivers them.
func TestHeartbeatHeldUntilPlaced(t *testing.T) {
	opts := defaultOpts()
	opts.heartbeatTimeout = 3 * time.Hour
	cfg := testConfig(t, testkit.Logger(t), "c1", opts)
	cfg.HeartbeatInterval = time.Hour
	cfg.Raft.Bootstrap = true
	c := startCoordinator(t, cfg, NewMemStore())
	cl := control(t, c.Addr())
	ctx := callCtx(t)
	if _, _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("one")}); err != nil {
		t.Fatal(err)
	}
	// The leader's own command at the start of its term is in: from now
	// on only the test changes the state.
	testkit.Eventually(t, 10*time.Second, "the leader to register itself", func() bool {
		_, err := c.fsm.Coordinator("c1")
		return err == nil
	})
	term, ok, err := c.leading(ctx)
	if err != nil || !ok {
		t.Fatalf("leading: %v %v", ok, err)
	}

	w := newFakeWorker(t, "w1", 2, c.Addr())
	w.wait = time.Hour
	if err := w.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.heartbeat(ctx); err != nil { // no index yet: answered at once
		t.Fatal(err)
	}
	// From now on one heartbeat at a time, the next as soon as the last is
	// answered.
	heard := term.lastHeartbeat("w1")
	loop, stop := context.WithCancel(context.Background())
	answered, done := make(chan error, 100), make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := w.heartbeat(loop)
			if loop.Err() != nil {
				return
			}
			select {
			case answered <- err:
			case <-loop.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	testkit.Eventually(t, 10*time.Second, "the leader to hear the second heartbeat", func() bool {
		return term.lastHeartbeat("w1").After(heard)
	})
	select {
	case err := <-answered:
		t.Fatalf("the second heartbeat was answered while nothing changed (%v)", err)
	default:
	}

	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("now", 2, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the job's tasks on w1", func() bool {
		return len(w.tasksOf(sub.GetJobId(), 1)) == 2
	})
	stop()
	<-done
	for len(answered) > 0 {
		if err := <-answered; err != nil {
			t.Errorf("heartbeat: %v", err)
		}
	}
}

// TestWorkerLost: a worker that stops heartbeating is declared lost; its
// job restarts as attempt 2 on the other worker, which is told to cancel
// its attempt-1 task; when the lost worker comes back it is told NOT_FOUND
// and, since it keeps its task, to cancel it.
func TestWorkerLost(t *testing.T) {
	opts := defaultOpts()
	opts.heartbeatTimeout = 1500 * time.Millisecond
	c, cl := startOne(t, opts)
	ctx := callCtx(t)
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("one")}); err != nil {
		t.Fatal(err)
	}
	w1 := newFakeWorker(t, "w1", 2, c.Addr())
	w1.keepTasksOnNotFound = true
	w2 := newFakeWorker(t, "w2", 2, c.Addr())
	w1.start()
	w2.start()
	testkit.Eventually(t, 10*time.Second, "two workers", func() bool {
		info, err := cl.ClusterInfo(callCtx(t), &eddyv1.ClusterInfoRequest{})
		return err == nil && len(info.GetWorkers()) == 2
	})
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("spread", 2, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	job := sub.GetJobId()
	waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	if w1.holds(job, 1, running) != 1 || w2.holds(job, 1, running) != 1 {
		t.Fatalf("attempt 1 not spread: w1 %v, w2 %v", w1.held(), w2.held())
	}

	w1.pause(true)
	silent := time.Now()
	st := waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_RUNNING, 15*time.Second, func(st *eddyv1.JobStatusResponse) bool {
		return st.GetJob().GetAttempt() == 2
	})
	t.Logf("attempt 2 runs %s after w1 went silent", time.Since(silent).Round(time.Millisecond))
	for _, ts := range st.GetTasks() {
		if ts.GetWorkerId() != "w2" {
			t.Fatalf("attempt 2 task on %s: %v", ts.GetWorkerId(), st)
		}
	}
	testkit.Eventually(t, 10*time.Second, "w2 to run attempt 2 and drop attempt 1", func() bool {
		return w2.holds(job, 2, running) == 2 && w2.holds(job, 1, running) == 0
	})
	if _, _, _, _, cancels := w2.stats(); !slices.ContainsFunc(cancels, func(k taskKey) bool { return k.job == job && k.attempt == 1 }) {
		t.Fatalf("w2 was not told to cancel its attempt-1 task: %v", cancels)
	}
	info, err := cl.ClusterInfo(ctx, &eddyv1.ClusterInfoRequest{})
	if err != nil || info.GetWorkers()[0].GetState() != eddyv1.WorkerState_WORKER_STATE_LOST {
		t.Fatalf("w1 in cluster info: %v, %v", info, err)
	}

	// w1 comes back with its attempt-1 task still running.
	w1.pause(false)
	testkit.Eventually(t, 10*time.Second, "w1 to be told to cancel its attempt-1 task", func() bool {
		_, notFound, _, _, cancels := w1.stats()
		return notFound > 0 && slices.ContainsFunc(cancels, func(k taskKey) bool { return k.job == job && k.attempt == 1 })
	})
	testkit.Eventually(t, 10*time.Second, "w1's canceled task to be released", func() bool { return len(w1.held()) == 0 })
	st = jobStatusOf(t, cl, job)
	if st.GetJob().GetAttempt() != 2 || st.GetJob().GetState() != eddyv1.JobState_JOB_STATE_RUNNING {
		t.Fatalf("the old attempt's cancellation disturbed the new one: %v", st)
	}

	w2.setState(job, 2, done, "")
	waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_FINISHED, 10*time.Second, nil)
}

// TestRestartsExhausted: a task that fails at every attempt fails the job
// with its error once the restart strategy gives up.
func TestRestartsExhausted(t *testing.T) {
	opts := defaultOpts()
	opts.restart = RestartStrategy{Kind: RestartExponential, Delay: 50 * time.Millisecond, MaxDelay: 100 * time.Millisecond, MaxAttempts: 2}
	c, cl := startOne(t, opts)
	ctx := callCtx(t)
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("one")}); err != nil {
		t.Fatal(err)
	}
	w := newFakeWorker(t, "w1", 2, c.Addr())
	w.start()
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("doomed", 1, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	job := sub.GetJobId()
	for attempt := 1; attempt <= 3; attempt++ {
		testkit.Eventually(t, 10*time.Second, "attempt to be deployed", func() bool { return w.holds(job, attempt, running) == 1 })
		w.setState(job, attempt, failed, "wasm trap: unreachable executed")
	}
	st := waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_FAILED, 10*time.Second, nil)
	want := "failed after 2 restarts: task t0 of attempt 3 failed: wasm trap: unreachable executed"
	if st.GetJob().GetMessage() != want || st.GetJob().GetAttempt() != 3 {
		t.Fatalf("failed job %v, want message %q", st.GetJob(), want)
	}
	testkit.Eventually(t, 10*time.Second, "the failed reports to be released", func() bool { return len(w.held()) == 0 })
	if ts := jobStatusOf(t, cl, job).GetTasks()[0]; ts.GetState() != failed || ts.GetError() != "wasm trap: unreachable executed" {
		t.Fatalf("task status after failure: %v", ts)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		cfg := DefaultConfig()
		cfg.NodeID = "c1"
		cfg.Raft.DataDir = t.TempDir()
		return cfg
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }},
		{"raft id differs", func(c *Config) { c.Raft.ID = "other" }},
		{"no data dir", func(c *Config) { c.Raft.DataDir = "" }},
		{"bad API address", func(c *Config) { c.APIAddr = "nowhere" }},
		{"join and bootstrap", func(c *Config) { c.Join = "127.0.0.1:7700"; c.Raft.Bootstrap = true }},
		{"bad join address", func(c *Config) { c.Join = "127.0.0.1" }},
		{"zero heartbeat interval", func(c *Config) { c.HeartbeatInterval = 0 }},
		{"timeout below two intervals", func(c *Config) { c.HeartbeatTimeout = c.HeartbeatInterval }},
		{"unknown restart kind", func(c *Config) { c.Restart.Kind = "sometimes" }},
		{"negative delay", func(c *Config) { c.Restart.Delay = -1 }},
		{"max delay below delay", func(c *Config) { c.Restart.MaxDelay = c.Restart.Delay / 2 }},
		{"negative attempts", func(c *Config) { c.Restart.MaxAttempts = -1 }},
		{"checkpoint storage of another scheme", func(c *Config) { c.CheckpointStorage = "gs://bucket" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.change(&cfg)
			if err := cfg.Validate(); err == nil {
				t.Fatal("no error")
			}
			if _, err := New(cfg, Deps{Store: NewMemStore(), Validator: testValidator, Planner: testPlanner}); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	if _, err := New(valid(), Deps{Validator: testValidator, Planner: testPlanner}); err == nil {
		t.Fatal("New without a store")
	}
	// The default checkpoint storage is a directory of the data directory.
	cfg := valid()
	c, err := New(cfg, Deps{Store: NewMemStore(), Validator: testValidator, Planner: testPlanner})
	if err != nil || c.CheckpointStorage() != "file://"+filepath.ToSlash(filepath.Join(cfg.Raft.DataDir, "checkpoints")) {
		t.Fatalf("default checkpoint storage %q, %v", c.CheckpointStorage(), err)
	}
}

func TestAdvertisedAddress(t *testing.T) {
	cfg := DefaultConfig()
	if got := cfg.advertised("[::]:7700", "10.0.0.5:7701"); got != "10.0.0.5:7700" {
		t.Errorf("wildcard: %s", got)
	}
	if got := cfg.advertised("127.0.0.1:7700", "10.0.0.5:7701"); got != "127.0.0.1:7700" {
		t.Errorf("specific: %s", got)
	}
	cfg.APIAdvertiseAddr = "eddy-0.eddy:7700"
	if got := cfg.advertised("[::]:7700", "10.0.0.5:7701"); got != "eddy-0.eddy:7700" {
		t.Errorf("advertise: %s", got)
	}
}

func TestStores(t *testing.T) {
	ctx := context.Background()
	for name, s := range map[string]ModuleStore{"mem": NewMemStore(), "dir": DirStore{Dir: t.TempDir()}} {
		t.Run(name, func(t *testing.T) {
			key := ModuleKey("default", hexSHA([]byte("m")))
			if _, err := s.Get(ctx, key); !errors.Is(err, ErrBlobNotFound) {
				t.Fatalf("get missing: %v", err)
			}
			if err := s.Put(ctx, key, []byte("m")); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, key, []byte("m")); err != nil {
				t.Fatalf("put again: %v", err)
			}
			if got, err := s.Get(ctx, key); err != nil || string(got) != "m" {
				t.Fatalf("get: %q, %v", got, err)
			}
			for _, bad := range []string{"", "/abs", "a/../b", "a//b", "a\\b", "a/.tmp-x"} {
				if err := s.Put(ctx, bad, nil); err == nil {
					t.Errorf("put %q accepted", bad)
				}
			}
		})
	}
}

// A follower's Cluster answer names the leader; reused by the cluster test.
func wantNotLeader(t testing.TB, err error, leaderAddr string) {
	t.Helper()
	nl, ok := rpc.LeaderFromError(err)
	if !ok || nl.GetLeaderAddress() != leaderAddr {
		t.Fatalf("error %v, want NotLeader naming %s", err, leaderAddr)
	}
}

// TestRestart: a coordinator restarted on its data directory (as
// `eddy standalone` is) keeps its modules and jobs, records its new API
// address, and places a waiting job once a worker registers.
func TestRestart(t *testing.T) {
	logger := testkit.Logger(t)
	store := NewMemStore()
	cfg := testConfig(t, logger, "c1", defaultOpts())
	cfg.Raft.Bootstrap = true
	c := startCoordinator(t, cfg, store)
	if _, _, err := c.WaitLeader(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl := control(t, c.Addr())
	ctx := callCtx(t)
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("one")}); err != nil {
		t.Fatal(err)
	}
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("later", 1, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, cl, sub.GetJobId(), eddyv1.JobState_JOB_STATE_WAITING_FOR_SLOTS, 10*time.Second, func(st *eddyv1.JobStatusResponse) bool {
		return st.GetJob().GetMessage() == "waiting for slots: job needs 1, 0 free"
	})
	oldAPI := c.Addr()
	cfg.Raft.BindAddr = c.RaftAddr() // the group's configuration names it
	c.Stop()

	again := startCoordinator(t, cfg, store)
	if _, _, err := again.WaitLeader(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl = control(t, again.Addr())
	testkit.Eventually(t, 10*time.Second, "the new API address to be recorded", func() bool {
		co, err := again.FSM().Coordinator("c1")
		return err == nil && co.APIAddress == again.Addr()
	})
	t.Logf("API address %s, then %s", oldAPI, again.Addr())
	if m, err := cl.GetModule(ctx, &eddyv1.GetModuleRequest{Name: "enrich"}); err != nil || m.GetModule().GetVersion() != 1 {
		t.Fatalf("module after restart: %v, %v", m, err)
	}
	w := newFakeWorker(t, "w1", 1, again.Addr())
	w.start()
	waitJob(t, cl, sub.GetJobId(), eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
}
