package coordinator

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// The snapshotter's checkpoints of cpSpec are 11 bytes (t0) plus 27 or 28
// (t1) each, every byte uploaded anew for t1.

// TestCheckpointBytesQuota: a checkpoint that would take the tenant's
// checkpoint storage above its quota fails with the line and the job
// keeps running; a savepoint is refused while the storage is at the quota.
func TestCheckpointBytesQuota(t *testing.T) {
	c, cl, st := startWithCheckpoints(t)
	ctx := callCtx(t)
	if _, err := cl.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: "default", Quota: &eddyv1.TenantQuota{CheckpointBytes: u64(60)}}); err != nil {
		t.Fatal(err)
	}
	w := newFakeWorker(t, "w1", 2, c.Addr())
	newSnapshotter(t, w, st)
	w.start()
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: cpSpec})
	if err != nil {
		t.Fatal(err)
	}
	job := sub.GetJobId()
	var failed string
	waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_RUNNING, 20*time.Second, func(st *eddyv1.JobStatusResponse) bool {
		completed := false
		for _, cp := range st.GetCheckpoints() {
			switch cp.GetState() {
			case eddyv1.CheckpointState_CHECKPOINT_STATE_COMPLETED:
				completed = true
			case eddyv1.CheckpointState_CHECKPOINT_STATE_FAILED:
				failed = cp.GetError()
			}
		}
		return completed && failed != ""
	})
	if !strings.HasPrefix(failed, "tenant default: quota checkpoint_bytes=60 reached (") ||
		!strings.Contains(failed, "bytes stored with this checkpoint): the job keeps running") {
		t.Fatalf("failed checkpoint's error %q", failed)
	}
	if used := tenantOf(t, cl, "default").GetUsage().GetCheckpointBytes(); used == 0 || used > 60 {
		t.Fatalf("checkpoint bytes in use %d, want within the quota", used)
	}
	// A savepoint would take the storage over the quota too: it fails.
	_, err = cl.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: job})
	wantCode(t, err, codes.Aborted, "tenant default: quota checkpoint_bytes=60 reached", "stored with this savepoint")
	// At the quota already: refused before anything is taken.
	if _, err := cl.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: "default", Quota: &eddyv1.TenantQuota{CheckpointBytes: u64(30)}}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: job})
	wantCode(t, err, codes.ResourceExhausted, "tenant default: quota checkpoint_bytes=30 reached (", "bytes stored): wait for checkpoint retention to free space or ask an admin to raise it")
	waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
}

// TestStateBytesQuota: a job whose keyed state, as its checkpoint
// measures it, exceeds the tenant's state_bytes fails with that line.
func TestStateBytesQuota(t *testing.T) {
	c, cl, st := startWithCheckpoints(t)
	ctx := callCtx(t)
	if _, err := cl.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: "default", Quota: &eddyv1.TenantQuota{StateBytes: u64(20)}}); err != nil {
		t.Fatal(err)
	}
	w := newFakeWorker(t, "w1", 2, c.Addr())
	newSnapshotter(t, w, st)
	w.start()
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: cpSpec})
	if err != nil {
		t.Fatal(err)
	}
	job := sub.GetJobId()
	final := waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_FAILED, 20*time.Second, nil)
	msg := final.GetJob().GetMessage()
	if !strings.HasPrefix(msg, "job "+job+": keyed state 3") || !strings.HasSuffix(msg, " B exceeds tenant default's quota state_bytes=20") {
		t.Fatalf("failed job's message %q", msg)
	}
	testkit.Eventually(t, 10*time.Second, "the job's tasks to be told to stop", func() bool { return len(w.held()) == 0 || w.holds(job, 1, running) == 0 })
}

func TestCheckpointQuotaOutcome(t *testing.T) {
	// Two retained checkpoints sharing files: 100 full, then 30 new bytes;
	// one savepoint of 80. Stored: 100 + 30 + 80 = 210.
	job := fsm.Job{ID: "job-1", Tenant: "acme",
		Checkpoints: []fsm.Checkpoint{{ID: 1, FullSize: 100, IncrementalSize: 100}, {ID: 2, FullSize: 110, IncrementalSize: 30}},
		Savepoints:  []fsm.Checkpoint{{ID: 3, FullSize: 80, IncrementalSize: 80}},
	}
	if got := job.StoredCheckpointBytes(); got != 210 {
		t.Fatalf("StoredCheckpointBytes = %d, want 210", got)
	}
	next := func(savepoint bool, full, incremental int64) *fsm.CheckpointCompleted {
		return &fsm.CheckpointCompleted{JobID: "job-1", ID: 4, Savepoint: savepoint, FullSize: full, IncrementalSize: incremental, Retain: 2}
	}
	tests := []struct {
		name string
		q    fsm.Quota
		used int64 // the tenant's, this job's 210 included
		done *fsm.CheckpointCompleted
		want string // "" for completed
	}{
		{name: "no quota", done: next(false, 1<<40, 1<<40), used: 210},
		{name: "state within", q: fsm.Quota{StateBytes: 120}, done: next(false, 120, 10), used: 210},
		{name: "state above fails the job", q: fsm.Quota{StateBytes: 1 << 30}, done: next(false, 1288490189, 10), used: 210,
			want: "job job-1: keyed state 1.2 GiB exceeds tenant acme's quota state_bytes=1073741824"},
		// Retention drops checkpoint 1: 110 (now the oldest, counted full)
		// + 20 + 80 = 210, plus 50 of another job.
		{name: "retention frees what the checkpoint adds", q: fsm.Quota{CheckpointBytes: 260}, done: next(false, 120, 20), used: 260},
		{name: "checkpoint above fails", q: fsm.Quota{CheckpointBytes: 259}, done: next(false, 120, 20), used: 260,
			want: "tenant acme: quota checkpoint_bytes=259 reached (260 bytes stored with this checkpoint): the job keeps running; ask an admin to raise it"},
		{name: "a savepoint adds its full size", q: fsm.Quota{CheckpointBytes: 300}, done: next(true, 120, 20), used: 210,
			want: "tenant acme: quota checkpoint_bytes=300 reached (330 bytes stored with this savepoint): the job keeps running; ask an admin to raise it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkpointQuotaOutcome(&job, tt.q, tt.used, tt.done)
			var msg string
			switch c := got.(type) {
			case *fsm.CheckpointCompleted:
				if c != tt.done {
					t.Fatalf("completed with another command %+v", c)
				}
			case *fsm.FailJob:
				msg = c.Message
			case *fsm.CheckpointFailed:
				msg = c.Reason
			}
			if msg != tt.want {
				t.Fatalf("outcome %q, want %q", msg, tt.want)
			}
		})
	}
}
