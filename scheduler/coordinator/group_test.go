package coordinator

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// TestThreeCoordinators: a group of three formed with Join. Clients of a
// follower get the leader's answers; a worker that only knows a follower
// finds the leader through the NotLeader redirect. The leader stops: a new
// one is elected within seconds, modules and jobs are intact, and the
// worker finds the new leader and keeps its tasks (no new attempt).
func TestThreeCoordinators(t *testing.T) {
	members := threeCoordinators(t)
	c1, c2, c3 := members[0], members[1], members[2]
	if !c1.IsLeader() {
		t.Fatal("c1 lost leadership while the others joined")
	}
	if id, addr, err := c3.WaitLeader(callCtx(t)); err != nil || id != "c1" || addr != c1.Addr() {
		t.Fatalf("WaitLeader on a follower: %s %s %v", id, addr, err)
	}

	// Clients of a follower: forwarded to the leader, answered as by it.
	f2 := control(t, c2.Addr())
	ctx := callCtx(t)
	module := wasmModule("enrich")
	up, err := f2.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: module})
	if err != nil || up.GetModule().GetVersion() != 1 {
		t.Fatalf("upload through a follower: %v, %v", up, err)
	}
	_, err = f2.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: []byte("junk")})
	wantCode(t, err, codes.InvalidArgument, "not a WebAssembly binary")
	info, err := control(t, c3.Addr()).ClusterInfo(ctx, &eddyv1.ClusterInfoRequest{})
	if err != nil || info.GetLeaderId() != "c1" || len(info.GetCoordinators()) != 3 {
		t.Fatalf("cluster info through a follower: %v, %v", info, err)
	}
	for _, co := range info.GetCoordinators() {
		if co.GetApiAddress() == "" || !co.GetVoter() || co.GetRole() == eddyv1.CoordinatorRole_COORDINATOR_ROLE_UNREACHABLE {
			t.Fatalf("coordinator %v", co)
		}
	}
	// Cluster is not forwarded: a follower names the leader.
	_, err = eddyv1.NewClusterClient(dial(t, c3.Addr())).Heartbeat(ctx, &eddyv1.HeartbeatRequest{WorkerId: "w9", InstanceId: "i"})
	wantNotLeader(t, err, c1.Addr())
	_, err = eddyv1.NewClusterClient(dial(t, c3.Addr())).AckCheckpoint(ctx, &eddyv1.AckCheckpointRequest{JobId: "job-1", Attempt: 1, CheckpointId: 1, TaskId: "t0", ManifestKey: "k"})
	wantNotLeader(t, err, c1.Addr())

	w := newFakeWorker(t, "w1", 4, c2.Addr())
	w.start()
	sub, err := f2.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("long", 2, "enrich@1")})
	if err != nil {
		t.Fatalf("submit through a follower: %v", err)
	}
	job := sub.GetJobId()
	waitJob(t, f2, job, eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	if _, _, redirects, _, _ := w.stats(); redirects == 0 {
		t.Fatal("the worker reached the leader without a redirect")
	}
	deploymentsBefore, _, _, _, _ := w.stats()
	// Job logs through a follower: the leader's lines, by tenant.
	shipLogs(t, c1, w, &eddyv1.LogEntry{WorkerSeq: 1, JobId: job, Attempt: 1, Task: "t0", Level: "INFO", Message: "before failover"})
	before, err := f2.JobLogs(ctx, &eddyv1.JobLogsRequest{JobId: job})
	if err != nil || len(before.GetLines()) != 1 || before.GetLines()[0].GetEntry().GetMessage() != "before failover" {
		t.Fatalf("logs through a follower: %v, %v", before, err)
	}
	_, err = f2.JobLogs(ctx, &eddyv1.JobLogsRequest{Tenant: "other", JobId: job})
	wantCode(t, err, codes.NotFound, `tenant "other" not found`)

	// The leader goes away.
	stopped := time.Now()
	c1.Stop()
	var leader *Coordinator
	testkit.Eventually(t, 20*time.Second, "a new leader", func() bool {
		for _, m := range []*Coordinator{c2, c3} {
			if m.IsLeader() {
				leader = m
				return true
			}
		}
		return false
	})
	elected := time.Since(stopped)
	t.Logf("%s leads %s after the old leader stopped", leader.cfg.NodeID, elected.Round(time.Millisecond))
	follower := c2
	if leader == c2 {
		follower = c3
	}
	fc := control(t, follower.Addr())

	// The worker heartbeats the new leader.
	_, _, _, beatsBefore, _ := w.stats()
	testkit.Eventually(t, 15*time.Second, "the worker to heartbeat the new leader", func() bool {
		info, err := fc.ClusterInfo(callCtx(t), &eddyv1.ClusterInfoRequest{})
		_, _, _, beats, _ := w.stats()
		return err == nil && info.GetLeaderId() == leader.cfg.NodeID && len(info.GetWorkers()) == 1 &&
			info.GetWorkers()[0].GetLastHeartbeatUnixMs() > stopped.UnixMilli() && beats > beatsBefore+3
	})
	t.Logf("the worker is back in touch %s after the old leader stopped", time.Since(stopped).Round(time.Millisecond))

	// Everything committed is there, and the job's tasks kept running.
	got, err := fc.GetModule(callCtx(t), &eddyv1.GetModuleRequest{Name: "enrich"})
	if err != nil || !bytes.Equal(got.GetWasm(), module) {
		t.Fatalf("module after failover: %v, %v", got.GetModule(), err)
	}
	st := jobStatusOf(t, fc, job)
	if st.GetJob().GetState() != eddyv1.JobState_JOB_STATE_RUNNING || st.GetJob().GetAttempt() != 1 {
		t.Fatalf("job after failover: %v", st)
	}
	for _, ts := range st.GetTasks() {
		if ts.GetState() != running || ts.GetWorkerId() != "w1" || ts.GetMetrics().GetRecordsIn() == 0 {
			t.Fatalf("task after failover: %v", ts)
		}
	}
	// The old leader's lines are gone (they live in its memory only); the
	// new leader numbers its own from 1 in an epoch of its own, and a
	// client that follows with the old leader's next_seq and epoch gets
	// them from the oldest.
	if got := logLines(t, fc, "", job, 0); len(got) != 0 {
		t.Fatalf("logs after failover: %q", got)
	}
	shipLogs(t, leader, w, &eddyv1.LogEntry{WorkerSeq: 2, JobId: job, Attempt: 1, Task: "t0", Level: "INFO", Message: "after failover"})
	after, err := fc.JobLogs(callCtx(t), &eddyv1.JobLogsRequest{JobId: job, AfterSeq: before.GetNextSeq(), Epoch: before.GetEpoch()})
	if err != nil || len(after.GetLines()) != 1 || after.GetLines()[0].GetEntry().GetMessage() != "after failover" || after.GetEpoch() == before.GetEpoch() {
		t.Fatalf("logs after failover, after the old leader's next_seq: %v, %v", after, err)
	}
	deployments, notFound, _, _, cancels := w.stats()
	if deployments != deploymentsBefore || notFound != 0 || len(cancels) != 0 || w.holds(job, 1, running) != 2 {
		t.Fatalf("the worker was disturbed: %d deployments (before %d), %d NOT_FOUND, cancels %v, tasks %v",
			deployments, deploymentsBefore, notFound, cancels, w.held())
	}
	info, err = fc.ClusterInfo(callCtx(t), &eddyv1.ClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, co := range info.GetCoordinators() {
		if co.GetNodeId() == "c1" && co.GetRole() != eddyv1.CoordinatorRole_COORDINATOR_ROLE_UNREACHABLE {
			t.Fatalf("the stopped leader shows as %s", co.GetRole())
		}
	}

	// The group of two still commits: the job finishes.
	w.setState(job, 1, done, "")
	waitJob(t, fc, job, eddyv1.JobState_JOB_STATE_FINISHED, 10*time.Second, nil)
	// A savepoint request through a follower gets the leader's answer.
	_, err = fc.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: job})
	wantCode(t, err, codes.FailedPrecondition, "only a running job takes a savepoint")
	if jobs, err := fc.ListJobs(callCtx(t), &eddyv1.ListJobsRequest{}); err != nil || len(jobs.GetJobs()) != 1 {
		t.Fatalf("jobs %v, %v", jobs, err)
	}
}
