package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// shipLogs makes one heartbeat of w (with its current reports) carrying
// entries, as the real worker ships its tasks' lines.
func shipLogs(t *testing.T, c *Coordinator, w *fakeWorker, entries ...*eddyv1.LogEntry) {
	t.Helper()
	w.mu.Lock()
	req := &eddyv1.HeartbeatRequest{WorkerId: w.id, InstanceId: w.instance, Logs: entries}
	for _, k := range slices.SortedFunc(maps.Keys(w.tasks), compareKeys) {
		req.Tasks = append(req.Tasks, cloneReport(w.tasks[k]))
	}
	w.mu.Unlock()
	if _, err := eddyv1.NewClusterClient(dial(t, c.Addr())).Heartbeat(callCtx(t), req); err != nil {
		t.Fatalf("heartbeat with logs: %v", err)
	}
}

func logLines(t *testing.T, cl eddyv1.ControlClient, tenant, job string, after uint64) []string {
	t.Helper()
	resp, err := cl.JobLogs(callCtx(t), &eddyv1.JobLogsRequest{Tenant: tenant, JobId: job, AfterSeq: after})
	if err != nil {
		t.Fatalf("logs of %s: %v", job, err)
	}
	var out []string
	for _, l := range resp.GetLines() {
		out = append(out, fmt.Sprintf("%d %s %s", l.GetSeq(), l.GetEntry().GetTask(), l.GetEntry().GetMessage()))
	}
	return out
}

// TestJobLogs: lines a worker ships with its heartbeats are served by
// JobLogs to the job's tenant, numbered, once each however often they are
// resent; a failed task's report adds its error once; another tenant's job
// is NOT_FOUND exactly as for JobStatus, with the lines of its own job
// only; a long poll returns when the job ends.
func TestJobLogs(t *testing.T) {
	c, cl := startOne(t, defaultOpts())
	ctx := callCtx(t)
	if _, err := c.propose(ctx, &fsm.CreateTenant{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"", "acme"} {
		if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: tenant, Name: "enrich", Wasm: wasmModule("one")}); err != nil {
			t.Fatal(err)
		}
	}
	w := newFakeWorker(t, "w1", 4, c.Addr())
	w.start()
	subA, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("a", 1, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	subB, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: "acme", SpecYaml: testSpec("b", 1, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	a, b := subA.GetJobId(), subB.GetJobId()
	waitJob(t, cl, a, eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	testkit.Eventually(t, 10*time.Second, "job b to run", func() bool {
		st, err := cl.JobStatus(callCtx(t), &eddyv1.JobStatusRequest{Tenant: "acme", JobId: b})
		return err == nil && st.GetJob().GetState() == eddyv1.JobState_JOB_STATE_RUNNING
	})

	entry := func(seq uint64, job, msg string) *eddyv1.LogEntry {
		return &eddyv1.LogEntry{WorkerSeq: seq, JobId: job, Attempt: 1, Task: "src[0]", Level: "INFO", Stream: "log", Message: msg}
	}
	shipLogs(t, c, w, entry(1, a, "a one"), entry(2, b, "b one"), entry(3, a, "a two"), entry(4, "job-99", "no such job"))
	// Resent (a heartbeat retried after the leader read it), with a new one.
	shipLogs(t, c, w, entry(3, a, "a two"), entry(5, a, "a three"))
	if got, want := logLines(t, cl, "", a, 0), []string{"1 src[0] a one", "2 src[0] a two", "3 src[0] a three"}; !slices.Equal(got, want) {
		t.Fatalf("logs of a: %q, want %q", got, want)
	}
	if got := logLines(t, cl, "", a, 2); !slices.Equal(got, []string{"3 src[0] a three"}) {
		t.Fatalf("logs of a after 2: %q", got)
	}
	if got := logLines(t, cl, "acme", b, 0); !slices.Equal(got, []string{"1 src[0] b one"}) {
		t.Fatalf("logs of b: %q", got)
	}

	// Another tenant's job is absent, as for JobStatus.
	for _, tc := range []struct{ tenant, job string }{{"acme", a}, {"", b}, {"nobody", a}} {
		_, statusErr := cl.JobStatus(callCtx(t), &eddyv1.JobStatusRequest{Tenant: tc.tenant, JobId: tc.job})
		_, logsErr := cl.JobLogs(callCtx(t), &eddyv1.JobLogsRequest{Tenant: tc.tenant, JobId: tc.job})
		wantCode(t, logsErr, codes.NotFound, "not found")
		if statusErr == nil || statusErr.Error() != logsErr.Error() {
			t.Fatalf("tenant %q, job %s: JobLogs says %v, JobStatus %v", tc.tenant, tc.job, logsErr, statusErr)
		}
	}

	// A failed task's error, once however many heartbeats repeat it.
	w.setState(a, 1, failed, "task src[0]: bad record")
	testkit.Eventually(t, 10*time.Second, "the task error in the logs", func() bool {
		return slices.Contains(logLines(t, cl, "", a, 3), "4 t0 task failed: task src[0]: bad record")
	})
	for range 3 {
		shipLogs(t, c, w)
	}
	if got := logLines(t, cl, "", a, 3); len(got) != 1 {
		t.Fatalf("the failure logged more than once: %q", got)
	}

	// A long poll on b returns once b is canceled (the fake worker stops
	// its tasks when told), not at the end of its wait.
	start := time.Now()
	polled := make(chan *eddyv1.JobLogsResponse, 1)
	go func() {
		resp, err := cl.JobLogs(callCtx(t), &eddyv1.JobLogsRequest{Tenant: "acme", JobId: b, AfterSeq: 1, WaitMs: 9000})
		if err != nil {
			t.Error(err)
		}
		polled <- resp
	}()
	if _, err := cl.CancelJob(ctx, &eddyv1.CancelJobRequest{Tenant: "acme", JobId: b}); err != nil {
		t.Fatal(err)
	}
	resp := <-polled
	if resp.GetState() != eddyv1.JobState_JOB_STATE_CANCELED || len(resp.GetLines()) != 0 || time.Since(start) > 8*time.Second {
		t.Fatalf("long poll: %v after %s", resp, time.Since(start))
	}
}

// TestLogStoreBounds: a job keeps its newest lines within the line and
// byte bounds (first_seq says what went), and the store forgets the job
// written to least recently beyond its job bound.
func TestLogStoreBounds(t *testing.T) {
	s := newLogStore()
	exists := func(string) bool { return true }
	var batch []*eddyv1.LogEntry
	for i := 1; i <= maxLogLinesPerJob+10; i++ {
		batch = append(batch, &eddyv1.LogEntry{WorkerSeq: uint64(i), JobId: "j", Message: "x"})
	}
	s.ingest("w", batch, exists)
	lines, next, first := s.read("j", 0, 0, 3)
	if first != 11 || len(lines) != 3 || lines[0].GetSeq() != 11 || next != 13 {
		t.Fatalf("after %d lines: first %d, next %d, %d lines from %d", maxLogLinesPerJob+10, first, next, len(lines), lines[0].GetSeq())
	}
	// An after_seq of another numbering (another leader's), or beyond what
	// the store numbered, reads from the oldest.
	if lines, _, _ := s.read("j", 1<<40, 0, 1); len(lines) != 1 || lines[0].GetSeq() != 11 {
		t.Fatalf("read after seq beyond the numbering: %v", lines)
	}
	if lines, _, _ := s.read("j", 20, s.epoch+1, 1); len(lines) != 1 || lines[0].GetSeq() != 11 {
		t.Fatalf("read after seq of another epoch: %v", lines)
	}
	if lines, _, _ := s.read("j", 20, s.epoch, 1); len(lines) != 1 || lines[0].GetSeq() != 21 {
		t.Fatalf("read after seq of this epoch: %v", lines)
	}

	big := strings.Repeat("y", 64<<10)
	for i := range 2 * maxLogBytesPerJob / len(big) {
		s.ingest("w2", []*eddyv1.LogEntry{{WorkerSeq: uint64(i + 1), JobId: "big", Message: big}}, exists)
	}
	s.mu.Lock()
	bytesHeld := s.mu.jobs["big"].bytes
	s.mu.Unlock()
	if bytesHeld > maxLogBytesPerJob {
		t.Fatalf("job holds %d bytes, bound %d", bytesHeld, maxLogBytesPerJob)
	}

	for i := range maxLogJobs {
		s.ingest("w3", []*eddyv1.LogEntry{{WorkerSeq: uint64(i + 1), JobId: fmt.Sprint("many-", i), Message: "z"}}, exists)
	}
	s.mu.Lock()
	n := len(s.mu.jobs)
	_, firstKept := s.mu.jobs["j"]
	s.mu.Unlock()
	if n > maxLogJobs || firstKept {
		t.Fatalf("%d jobs held (bound %d); the least recently written kept: %v", n, maxLogJobs, firstKept)
	}
}

// TestLogStoreTaskFailed: a failed task's report adds its error unless
// the worker's own error line of that task and attempt is there already,
// and once only.
func TestLogStoreTaskFailed(t *testing.T) {
	s := newLogStore()
	exists := func(string) bool { return true }
	s.ingest("w", []*eddyv1.LogEntry{
		{WorkerSeq: 1, JobId: "j", Attempt: 1, Task: "a[0]", Level: "ERROR", Stream: "stderr", Message: "guest says error"},
		{WorkerSeq: 2, JobId: "j", Attempt: 1, Task: "b[0]", Level: "ERROR", Message: "task failed err=boom"},
	}, exists)
	report := func(task string) *eddyv1.TaskReport {
		return &eddyv1.TaskReport{Task: &eddyv1.TaskRef{JobId: "j", Attempt: 1, TaskId: task}, State: failed, Error: "task " + task + ": boom"}
	}
	now := time.UnixMilli(1000)
	for range 2 {
		for _, task := range []string{"a[0]", "b[0]"} {
			s.taskFailed(report(task), now)
		}
	}
	s.taskFailed(&eddyv1.TaskReport{Task: &eddyv1.TaskRef{JobId: "j", Attempt: 1, TaskId: "c[0]"}, State: running}, now)
	lines, _, _ := s.read("j", 0, 0, 100)
	var got []string
	for _, l := range lines {
		got = append(got, l.GetEntry().GetTask()+" "+l.GetEntry().GetMessage())
	}
	want := []string{"a[0] guest says error", "b[0] task failed err=boom", "a[0] task failed: task a[0]: boom"}
	if !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
}
