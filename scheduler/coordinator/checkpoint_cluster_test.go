package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/storage"
)

// cpSpec is a job of parallelism 2 (tasks t0 and t1) that checkpoints
// every 200ms and keeps two checkpoints.
var cpSpec = []byte(`name: counted
parallelism: 2
checkpoint:
  interval: 200ms
  timeout: 2s
  retain: 2
nodes:
  - name: src
    source: {generator: {kind: sequence, count: 10}}
  - name: out
    input: src
    sink: {stdout: {}}
`)

// startWithCheckpoints starts a group of one whose default checkpoint
// storage is a fresh directory, and opens that storage as workers would.
func startWithCheckpoints(t *testing.T) (*Coordinator, eddyv1.ControlClient, storage.Store) {
	t.Helper()
	cfg := testConfig(t, testkit.Logger(t), "c1", defaultOpts())
	cfg.Raft.Bootstrap = true
	cfg.CheckpointStorage = "file://" + t.TempDir()
	c := startCoordinator(t, cfg, NewMemStore())
	if _, _, err := c.WaitLeader(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(context.Background(), cfg.CheckpointStorage, storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return c, control(t, c.Addr()), st
}

// snapshotter acknowledges the checkpoints triggered on a fake worker as
// the tasks of a deployment would: each task uploads its state file under
// shared/ (t0's never changes, so later checkpoints reference the file of
// the first, as an incremental snapshot does; t1's changes every time),
// writes its task manifest and acknowledges. t0's manifest names its file
// relative to the job's prefix, as package state does; t1's by its full
// key.
type snapshotter struct {
	t      *testing.T
	w      *fakeWorker
	st     storage.Store
	paused atomic.Bool
	// onlySwaps: acknowledge only the savepoints of hot swaps.
	onlySwaps atomic.Bool
	acks      atomic.Int64
}

func newSnapshotter(t *testing.T, w *fakeWorker, st storage.Store) *snapshotter {
	s := &snapshotter{t: t, w: w, st: st}
	w.setOnTrigger(s.checkpoint)
	return s
}

func stateOf(task string, id uint64) []byte {
	if task == "t0" {
		return []byte("state of t0")
	}
	return fmt.Appendf(nil, "state of %s at checkpoint %d", task, id)
}

func (s *snapshotter) checkpoint(tr *eddyv1.CheckpointTrigger) {
	if s.paused.Load() || s.onlySwaps.Load() && tr.GetKind() != eddyv1.CheckpointKind_CHECKPOINT_KIND_SWAP {
		return
	}
	ctx := context.Background()
	job, attempt, id := tr.GetJobId(), tr.GetAttempt(), tr.GetCheckpointId()
	prefix := "tenants/default/jobs/" + job
	tasks := s.w.tasksOf(job, int(attempt))
	for subtask, task := range tasks {
		state := stateOf(task, id)
		sha, err := storage.PutContent(ctx, s.st, prefix+"/shared", state)
		if err != nil {
			s.t.Error(err)
			return
		}
		key := fmt.Sprintf("%s/chk/%d/%s.json", prefix, id, task)
		fileKey := "shared/" + sha // relative to the root, as package state writes it
		manifest := map[string]any{
			"version": 1, "checkpoint": id, "task": task, "subtask": subtask, "parallelism": len(tasks),
			"nodes": map[string]any{"out": map[string]any{"state": map[string]any{
				"format": 1, "kind": "full",
				"files": []any{map[string]any{"key": fileKey, "sha256": sha, "size": len(state)}},
			}}},
			"source": map[string]any{"node": "src", "subtask": 0, "parallelism": 2, "position": "AAAAAAAAAAo="},
		}
		data, _ := json.Marshal(manifest)
		if err := s.st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
			s.t.Error(err)
			return
		}
		err = s.w.call(ctx, func(ctx context.Context, cl eddyv1.ClusterClient) error {
			resp, err := cl.AckCheckpoint(ctx, &eddyv1.AckCheckpointRequest{JobId: job, Attempt: attempt, CheckpointId: id, TaskId: task,
				ManifestKey: key, FullSizeBytes: uint64(len(state)), IncrementalSizeBytes: uint64(len(state)), DurationMs: 3, WorkerId: s.w.id})
			if err == nil && resp.GetAccepted() {
				s.acks.Add(1)
			}
			return err
		})
		if err != nil {
			s.t.Logf("ack %s/%d/%d %s: %v", job, attempt, id, task, err)
		}
	}
}

func keysUnder(t *testing.T, st storage.Store, prefix string) []string {
	t.Helper()
	infos, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

func readJSON(t *testing.T, st storage.Store, key string, v any) {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// chkDirs lists the checkpoint ids that have files under chk/.
func chkDirs(t *testing.T, st storage.Store, job string) []string {
	var ids []string
	for _, k := range keysUnder(t, st, "tenants/default/jobs/"+job+"/chk/") {
		id, _, _ := strings.Cut(strings.TrimPrefix(k, "tenants/default/jobs/"+job+"/chk/"), "/")
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestCheckpointsInProcess: a coordinator and a fake worker speaking
// Cluster. Triggers arrive in heartbeat answers, acknowledgements complete
// checkpoints, the leader writes their manifests to a file:// store and
// announces them; retention deletes the files of old checkpoints; a
// restart restores from the latest, and from the one before when the
// latest cannot be read; a savepoint is a self-contained copy that a new
// job starts from; stop cancels the job.
func TestCheckpointsInProcess(t *testing.T) {
	c, cl, st := startWithCheckpoints(t)
	w := newFakeWorker(t, "w1", 2, c.Addr())
	snap := newSnapshotter(t, w, st)
	w.start()
	ctx := callCtx(t)
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: cpSpec})
	if err != nil {
		t.Fatal(err)
	}
	job := sub.GetJobId()
	prefix := "tenants/default/jobs/" + job
	fsmJob := func() fsm.Job {
		j, err := c.FSM().Job(fsm.DefaultTenant, job)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	if j := fsmJob(); j.CheckpointStorage != c.CheckpointStorage() {
		t.Fatalf("job's checkpoint storage %q, want the default %q", j.CheckpointStorage, c.CheckpointStorage())
	}
	if d := w.lastDeployment(job); d != nil && d.GetRestoreFrom() != "" {
		t.Fatalf("first attempt restores from %q", d.GetRestoreFrom())
	}

	// Checkpoints complete and are announced; the oldest go.
	testkit.Eventually(t, 20*time.Second, "four completed checkpoints, announced to the worker", func() bool {
		j := fsmJob()
		latest, ok := j.LatestCompleted()
		return ok && latest.ID >= 4 && w.completedCheckpoint(job, 1) >= 4
	})
	if d := w.lastDeployment(job); d.GetCheckpointStorage() != c.CheckpointStorage() || d.GetRestoreFrom() != "" {
		t.Fatalf("deployment storage %q restore %q", d.GetCheckpointStorage(), d.GetRestoreFrom())
	}
	j := fsmJob()
	latest := j.Checkpoints[len(j.Checkpoints)-1]
	var m checkpoint.Manifest
	readJSON(t, st, latest.Location, &m)
	if m.Version != 1 || m.Job != job || m.Checkpoint != int64(latest.ID) || m.Savepoint || m.MaxParallelism != 128 || len(m.Tasks) != 2 ||
		m.Tasks["t1"] != fmt.Sprintf("%s/chk/%d/t1.json", prefix, latest.ID) {
		t.Fatalf("checkpoint manifest %+v", m)
	}
	if latest.FullSize == 0 || latest.IncrementalSize != latest.FullSize {
		t.Fatalf("sizes of %+v", latest)
	}
	// Retention: the directories and state files of all but the latest two
	// go; t0's one state file, referenced by every checkpoint, stays.
	testkit.Eventually(t, 20*time.Second, "old checkpoint files to be deleted", func() bool {
		j := fsmJob()
		return len(j.CheckpointsToDelete) == 0 && len(chkDirs(t, st, job)) <= 3 && len(keysUnder(t, st, prefix+"/shared/")) <= 4
	})
	// Stop acknowledging: once the checkpoint in flight then (if any)
	// ended, the completed checkpoints stay as they are.
	snap.paused.Store(true)
	pausedAt := fsmJob().CheckpointSeq
	testkit.Eventually(t, 20*time.Second, "the checkpoints to settle", func() bool {
		j := fsmJob()
		return (j.PendingCheckpoint == nil || j.PendingCheckpoint.ID > pausedAt) && len(j.CheckpointsToDelete) == 0
	})
	j = fsmJob()
	retained := ids(j.Checkpoints)
	if len(retained) != 2 {
		t.Fatalf("retained %v", retained)
	}
	dirs := chkDirs(t, st, job)
	for _, id := range retained {
		if !slices.Contains(dirs, fmt.Sprint(id)) {
			t.Fatalf("retained checkpoint %d has no files: %v", id, dirs)
		}
	}
	if n := len(keysUnder(t, st, prefix+"/shared/")); n != 3 { // t0's, and t1's of the two retained
		t.Fatalf("%d state files: %v", n, keysUnder(t, st, prefix+"/shared/"))
	}
	cps := jobStatusOf(t, cl, job).GetCheckpoints()
	i := slices.IndexFunc(cps, func(ci *eddyv1.CheckpointInfo) bool { return ci.GetCheckpointId() == retained[1] })
	if i < 0 || cps[i].GetState() != eddyv1.CheckpointState_CHECKPOINT_STATE_COMPLETED || cps[i].GetFullSizeBytes() == 0 ||
		cps[i].GetPath() != checkpoint.ManifestKey(prefix, int64(retained[1])) || cps[i].GetTriggeredUnixMs() == 0 {
		t.Fatalf("status checkpoints %v", cps)
	}

	// A task fails: attempt 2 restores from the latest checkpoint.
	w.setState(job, 1, failed, "boom")
	testkit.Eventually(t, 10*time.Second, "attempt 2 to be deployed", func() bool { return w.lastDeployment(job).GetAttempt() == 2 })
	if got, want := w.lastDeployment(job).GetRestoreFrom(), checkpoint.ManifestKey(prefix, int64(retained[1])); got != want {
		t.Fatalf("attempt 2 restores from %q, want %q", got, want)
	}
	// It cannot read it: attempt 3 restores from the one before.
	w.failRestore(job, 2, retained[1], fmt.Sprintf("task t1: restore checkpoint %d: storage: not found: %s/chk/%d/t1.json", retained[1], prefix, retained[1]))
	testkit.Eventually(t, 10*time.Second, "attempt 3 to be deployed", func() bool { return w.lastDeployment(job).GetAttempt() == 3 })
	if got, want := w.lastDeployment(job).GetRestoreFrom(), checkpoint.ManifestKey(prefix, int64(retained[0])); got != want {
		t.Fatalf("attempt 3 restores from %q, want %q", got, want)
	}
	if j := fsmJob(); j.Checkpoints[1].Bad == "" {
		t.Fatalf("checkpoint %d not marked bad: %+v", retained[1], j.Checkpoints)
	}
	waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)

	// A savepoint: a self-contained copy, with ids going on.
	snap.paused.Store(false)
	sp, err := cl.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: job})
	if err != nil {
		t.Fatal(err)
	}
	if sp.GetCheckpointId() <= retained[1] || sp.GetPath() != fmt.Sprintf("tenants/default/savepoints/%s-%d", job, sp.GetCheckpointId()) ||
		sp.GetState() != eddyv1.JobState_JOB_STATE_RUNNING {
		t.Fatalf("savepoint %v", sp)
	}
	var spm checkpoint.Manifest
	readJSON(t, st, sp.GetPath()+"/_manifest.json", &spm)
	if !spm.Savepoint || spm.Checkpoint != int64(sp.GetCheckpointId()) || len(spm.Tasks) != 2 {
		t.Fatalf("savepoint manifest %+v", spm)
	}
	for task, key := range spm.Tasks {
		// The job's layout under the savepoint's directory.
		if key != fmt.Sprintf("%s/chk/%d/%s.json", sp.GetPath(), sp.GetCheckpointId(), task) {
			t.Fatalf("task %s manifest %s", task, key)
		}
		var tm struct {
			Nodes map[string]struct {
				State struct {
					Files []struct {
						Key    string
						SHA256 string
						Size   int
					}
				}
			}
			Source map[string]any
		}
		readJSON(t, st, key, &tm)
		files := tm.Nodes["out"].State.Files
		wantKey := "shared/" + files[0].SHA256 // relative to the savepoint, as written
		if len(files) != 1 || files[0].Key != wantKey || tm.Source["position"] != "AAAAAAAAAAo=" {
			t.Fatalf("task %s manifest %+v", task, tm)
		}
		data, err := storage.GetContent(context.Background(), st, sp.GetPath()+"/shared", files[0].SHA256)
		if err != nil || !bytes.Equal(data, stateOf(task, sp.GetCheckpointId())) {
			t.Fatalf("task %s state copy: %q, %v", task, data, err)
		}
		raw, _ := st.Get(context.Background(), key)
		text, _ := io.ReadAll(raw)
		raw.Close()
		if bytes.Contains(text, []byte("/jobs/")) {
			t.Fatalf("task %s manifest refers to the job's files: %s", task, text)
		}
	}
	if keys := keysUnder(t, st, sp.GetPath()+"/"); len(keys) != 5 { // the manifest, 2 task manifests, 2 state files
		t.Fatalf("savepoint files %v", keys)
	}
	// The checkpoint files it was copied from go; status lists it.
	testkit.Eventually(t, 10*time.Second, "the savepoint's source files to be deleted", func() bool {
		return !slices.Contains(chkDirs(t, st, job), fmt.Sprint(sp.GetCheckpointId()))
	})
	if cps := jobStatusOf(t, cl, job).GetCheckpoints(); !slices.ContainsFunc(cps, func(ci *eddyv1.CheckpointInfo) bool {
		return ci.GetCheckpointId() == sp.GetCheckpointId() && ci.GetKind() == eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT && ci.GetPath() == sp.GetPath()
	}) {
		t.Fatalf("status checkpoints %v", cps)
	}

	// Stop with a savepoint: the job is canceled.
	stop, err := cl.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: job, Stop: true})
	if err != nil || stop.GetState() != eddyv1.JobState_JOB_STATE_CANCELING || stop.GetCheckpointId() <= sp.GetCheckpointId() {
		t.Fatalf("stop with savepoint: %v, %v", stop, err)
	}
	waitJob(t, cl, job, eddyv1.JobState_JOB_STATE_CANCELED, 10*time.Second, nil)
	_, err = cl.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: job})
	wantCode(t, err, codes.FailedPrecondition, "only a running job")

	// A new job starts from the savepoint.
	_, err = cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: cpSpec, FromSavepoint: "tenants/default/savepoints/nope"})
	wantCode(t, err, codes.NotFound, "savepoint tenants/default/savepoints/nope not found")
	_, err = cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: cpSpec, FromSavepoint: "tenants/acme/savepoints/x"})
	wantCode(t, err, codes.NotFound, "savepoint tenants/acme/savepoints/x not found in tenant default")
	next, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: cpSpec, FromSavepoint: stop.GetPath()})
	if err != nil {
		t.Fatal(err)
	}
	if nj, err := c.FSM().FindJob(next.GetJobId()); err != nil || nj.CheckpointSeq != stop.GetCheckpointId() {
		t.Fatalf("the new job's checkpoint ids start after %d, want after the savepoint's %d (%v)", nj.CheckpointSeq, stop.GetCheckpointId(), err)
	}
	testkit.Eventually(t, 10*time.Second, "the new job to be deployed", func() bool { return w.lastDeployment(next.GetJobId()) != nil })
	if got := w.lastDeployment(next.GetJobId()).GetRestoreFrom(); got != stop.GetPath()+"/_manifest.json" {
		t.Fatalf("new job restores from %q", got)
	}
}

// A savepoint that cannot be written fails with the storage's reason, and
// the job keeps running.
func TestSavepointFails(t *testing.T) {
	c, cl, st := startWithCheckpoints(t)
	w := newFakeWorker(t, "w1", 2, c.Addr())
	// Acknowledge with a manifest key that was never written.
	w.setOnTrigger(func(tr *eddyv1.CheckpointTrigger) {
		for _, task := range w.tasksOf(tr.GetJobId(), int(tr.GetAttempt())) {
			_ = w.call(context.Background(), func(ctx context.Context, cl eddyv1.ClusterClient) error {
				_, err := cl.AckCheckpoint(ctx, &eddyv1.AckCheckpointRequest{JobId: tr.GetJobId(), Attempt: tr.GetAttempt(),
					CheckpointId: tr.GetCheckpointId(), TaskId: task, ManifestKey: fmt.Sprintf("tenants/default/jobs/%s/chk/%d/%s.json", tr.GetJobId(), tr.GetCheckpointId(), task)})
				return err
			})
		}
	})
	w.start()
	sub, err := cl.SubmitJob(callCtx(t), &eddyv1.SubmitJobRequest{SpecYaml: testSpecPlain(2)})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, cl, sub.GetJobId(), eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	_, err = cl.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: sub.GetJobId()})
	wantCode(t, err, codes.Aborted, "savepoint 1 of job", "not found")
	if keys := keysUnder(t, st, "tenants/default/savepoints/"); len(keys) != 0 {
		t.Fatalf("a failed savepoint left %v", keys)
	}
	st1 := waitJob(t, cl, sub.GetJobId(), eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	if cps := st1.GetCheckpoints(); len(cps) != 1 || cps[0].GetState() != eddyv1.CheckpointState_CHECKPOINT_STATE_FAILED ||
		cps[0].GetKind() != eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT || !strings.Contains(cps[0].GetError(), "not found") {
		t.Fatalf("status checkpoints %v", cps)
	}
	// A stale acknowledgement is not accepted.
	var resp *eddyv1.AckCheckpointResponse
	err = w.call(callCtx(t), func(ctx context.Context, cl eddyv1.ClusterClient) error {
		var err error
		resp, err = cl.AckCheckpoint(ctx, &eddyv1.AckCheckpointRequest{JobId: sub.GetJobId(), Attempt: 1, CheckpointId: 1, TaskId: "t0", ManifestKey: "k"})
		return err
	})
	if err != nil || resp.GetAccepted() || !strings.Contains(resp.GetReason(), "not in flight") {
		t.Fatalf("stale ack: %v, %v", resp, err)
	}
}

// testSpecPlain is a job of parallelism tasks without a checkpoint section.
func testSpecPlain(parallelism int) []byte {
	return fmt.Appendf(nil, "name: plain\nparallelism: %d\nnodes:\n  - name: src\n    source: {generator: {kind: sequence, count: 10}}\n  - name: out\n    input: src\n    sink: {stdout: {}}\n", parallelism)
}

// A worker whose deployment cannot take a savepoint declines it: the
// savepoint fails at once with the worker's reason.
func TestSavepointDeclined(t *testing.T) {
	c, cl, _ := startWithCheckpoints(t)
	w := newFakeWorker(t, "w1", 2, c.Addr())
	w.setOnTrigger(func(tr *eddyv1.CheckpointTrigger) {
		_ = w.call(context.Background(), func(ctx context.Context, cl eddyv1.ClusterClient) error {
			_, err := cl.AckCheckpoint(ctx, &eddyv1.AckCheckpointRequest{JobId: tr.GetJobId(), Attempt: tr.GetAttempt(),
				CheckpointId: tr.GetCheckpointId(), TaskId: "t1", WorkerId: w.id, DeclineReason: "the job does not checkpoint"})
			return err
		})
	})
	w.start()
	sub, err := cl.SubmitJob(callCtx(t), &eddyv1.SubmitJobRequest{SpecYaml: testSpecPlain(2)})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, cl, sub.GetJobId(), eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	start := time.Now()
	_, err = cl.TriggerSavepoint(callCtx(t), &eddyv1.TriggerSavepointRequest{JobId: sub.GetJobId(), Stop: true})
	wantCode(t, err, codes.Aborted, "savepoint 1 of job", "task t1 declined it: the job does not checkpoint")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the declined savepoint took %s", d)
	}
	// Not stopped: the savepoint failed.
	waitJob(t, cl, sub.GetJobId(), eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
}
