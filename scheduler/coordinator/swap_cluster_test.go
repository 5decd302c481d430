package coordinator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// swapSpec is a checkpointing job of parallelism 2 whose node op runs
// module op@1.
var swapSpec = []byte(`name: swapped
parallelism: 2
checkpoint: {interval: 300ms, timeout: 2s}
nodes:
  - name: src
    source: {generator: {kind: sequence, count: 10}}
  - name: op
    input: src
    wasm: {module: op@1, config: {n: 1}}
  - name: out
    input: op
    sink: {stdout: {}}
`)

// TestSwapProtocol drives hot swaps through the leader with a fake worker
// that acknowledges checkpoints: a swap is prepared, taken at a savepoint
// of kind swap and pinned (later attempts deploy the new version); a
// refusal leaves the job alone; a task failure while the swap is armed
// rolls the job back to the old version from the swap savepoint.
func TestSwapProtocol(t *testing.T) {
	c, cl, st := startWithCheckpoints(t)
	w := newFakeWorker(t, "w1", 4, c.Addr())
	snap := newSnapshotter(t, w, st)
	w.start()
	ctx := callCtx(t)
	for _, body := range []string{"v1", "v2", "v3"} {
		if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "op", Wasm: wasmModule(body)}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: swapSpec})
	if err != nil {
		t.Fatal(err)
	}
	job := sub.GetJobId()
	testkit.Eventually(t, 20*time.Second, "a completed checkpoint", func() bool {
		j, _ := c.FSM().Job(fsm.DefaultTenant, job)
		_, ok := j.LatestCompleted()
		return ok
	})

	// A swap to op@2 with a new config.
	resp, err := cl.SwapModule(ctx, &eddyv1.SwapModuleRequest{JobId: job, Node: "op", Module: "op@2", ConfigJson: `{"n": 2}`, SetConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	s := resp.GetSwap()
	if s.GetState() != eddyv1.SwapState_SWAP_STATE_SWAPPED || s.GetFromModule() != "op@1" || s.GetToModule() != "op@2" || !s.GetConfigChanged() ||
		s.GetSavepointId() == 0 || s.GetSavepointPath() == "" || !s.GetRollbackArmed() {
		t.Fatalf("swap %v", s)
	}
	w.mu.Lock()
	prep := w.prepares[0]
	trig := w.triggered
	w.mu.Unlock()
	if prep.GetNode() != "op" || prep.GetModule().GetRef() != "op@2" || string(prep.GetConfigJson()) != `{"n":2}` {
		t.Fatalf("prepare %v", prep)
	}
	if !trig[job+"/1/"+fmt.Sprint(s.GetSavepointId())] {
		t.Fatalf("the worker saw no trigger of the swap savepoint %d", s.GetSavepointId())
	}
	st1 := jobStatusOf(t, cl, job)
	if n := st1.GetNodes(); len(n) != 1 || n[0].GetModule() != "op@2" || n[0].GetConfigJson() != `{"n":2}` {
		t.Fatalf("nodes %v", n)
	}
	if len(st1.GetSwaps()) != 1 || st1.GetJob().GetAttempt() != 1 || len(st1.GetSpecYaml()) == 0 {
		t.Fatalf("status %v", st1)
	}

	// A refusal: the job stays as it is.
	w.mu.Lock()
	w.onPrepare = func(*eddyv1.SwapPrepare) (bool, string) { return false, `node op: state "count" changed kind` }
	w.mu.Unlock()
	resp, err = cl.SwapModule(ctx, &eddyv1.SwapModuleRequest{JobId: job, Node: "op", Module: "op@3"})
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.GetSwap(); s.GetState() != eddyv1.SwapState_SWAP_STATE_REFUSED || !strings.Contains(s.GetReason(), "changed kind") || s.GetSavepointId() != 0 {
		t.Fatalf("swap %v", s)
	}
	if j, _ := c.FSM().Job(fsm.DefaultTenant, job); j.Attempt != 1 || j.State != fsm.JobRunning || j.Overrides[0].Module.Version != 2 {
		t.Fatalf("job after a refusal: %+v", j)
	}
	w.mu.Lock()
	w.onPrepare = nil
	w.mu.Unlock()

	// Another swap, then a task failure while it is armed: rolled back to
	// op@2, restored from the swap savepoint.
	testkit.Eventually(t, 20*time.Second, "the first swap disarmed by a checkpoint", func() bool {
		j, _ := c.FSM().Job(fsm.DefaultTenant, job)
		return !j.Swaps[0].Armed
	})
	snap.onlySwaps.Store(true) // no checkpoint completes after the swap: it stays armed
	resp, err = cl.SwapModule(ctx, &eddyv1.SwapModuleRequest{JobId: job, Node: "op", Module: "op@3"})
	if err != nil {
		t.Fatal(err)
	}
	s3 := resp.GetSwap()
	if s3.GetState() != eddyv1.SwapState_SWAP_STATE_SWAPPED {
		t.Fatalf("swap %v", s3)
	}
	w.setState(job, 1, eddyv1.TaskState_TASK_STATE_FAILED, "wasm trap: unreachable")
	testkit.Eventually(t, 20*time.Second, "attempt 2 running", func() bool {
		d := w.lastDeployment(job)
		return d != nil && d.GetAttempt() == 2
	})
	d := w.lastDeployment(job)
	if len(d.GetOverrides()) != 1 || d.GetOverrides()[0].GetModule().GetRef() != "op@2" || string(d.GetOverrides()[0].GetConfigJson()) != `{"n":2}` {
		t.Fatalf("attempt 2 overrides %v", d.GetOverrides())
	}
	if !strings.Contains(d.GetRestoreFrom(), "savepoints/") || d.GetRestoreCheckpoint() != s3.GetSavepointId() {
		t.Fatalf("attempt 2 restores from %s (%d), want the swap savepoint %d", d.GetRestoreFrom(), d.GetRestoreCheckpoint(), s3.GetSavepointId())
	}
	st3 := jobStatusOf(t, cl, job)
	last := st3.GetSwaps()[len(st3.GetSwaps())-1]
	if last.GetState() != eddyv1.SwapState_SWAP_STATE_ROLLED_BACK || !strings.Contains(last.GetReason(), "wasm trap") || st3.GetNodes()[0].GetModule() != "op@2" {
		t.Fatalf("after the rollback: swap %v, nodes %v", last, st3.GetNodes())
	}
}
