package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/cpushare"
	"github.com/eddy-stream/eddy/host"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/storage"
)

// TestRestoreFailureReported: a deployment whose checkpoint manifest
// cannot be read, or is of another checkpoint than the leader said, fails
// with a checkpoint.RestoreError naming the checkpoint of the deployment,
// and every task report of it carries that id as a field of its own.
func TestRestoreFailureReported(t *testing.T) {
	ctx := context.Background()
	st, err := storage.Open(ctx, "file://"+t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	root := checkpoint.JobRoot("default", "job-3")
	other := &checkpoint.Manifest{Job: "job-3", Checkpoint: 4, Tasks: map[string]string{"a": checkpoint.TaskManifestKey(root, 4, "a")}, MaxParallelism: 128}
	if err := checkpoint.WriteManifest(ctx, st, checkpoint.ManifestKey(root, 5), other); err != nil {
		t.Fatal(err)
	}
	dep := dataflow.Deployment{Checkpointing: &dataflow.Checkpointing{Store: st, Prefix: root}}
	for _, tc := range []struct {
		name string
		d    *eddyv1.Deployment
		want uint64 // 0: no id known
		is   error
		msg  string
	}{
		{name: "missing manifest", d: &eddyv1.Deployment{JobId: "job-3", Attempt: 2, TaskIds: []string{"a", "b"},
			RestoreFrom: checkpoint.ManifestKey(root, 3), RestoreCheckpoint: 3}, want: 3, is: storage.ErrNotFound,
			msg: "restore checkpoint 3: checkpoint manifest tenants/default/jobs/job-3/chk/3/_manifest.json: storage: not found"},
		{name: "manifest of another checkpoint", d: &eddyv1.Deployment{JobId: "job-3", Attempt: 2, TaskIds: []string{"a", "b"},
			RestoreFrom: checkpoint.ManifestKey(root, 5), RestoreCheckpoint: 5}, want: 5,
			msg: "restore checkpoint 5: checkpoint manifest tenants/default/jobs/job-3/chk/5/_manifest.json is of checkpoint 4"},
		{name: "savepoint of unknown id", d: &eddyv1.Deployment{JobId: "job-3", Attempt: 1, TaskIds: []string{"a", "b"},
			RestoreFrom: checkpoint.SavepointManifestKey(checkpoint.SavepointDir("default", "job-1", 7))}, is: storage.ErrNotFound,
			msg: "restore: checkpoint manifest tenants/default/savepoints/job-1-7/_manifest.json: storage: not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Worker{jobs: map[jobAttempt]*running{}}
			_, err := w.start(ctx, nil, dep, tc.d)
			if !errors.Is(err, checkpoint.ErrRestore) || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("start: %v; want %q", err, tc.msg)
			}
			r := &running{d: tc.d, err: err, done: make(chan struct{}), released: map[string]bool{}}
			close(r.done)
			w.jobs[jobAttempt{tc.d.GetJobId(), tc.d.GetAttempt()}] = r
			reps := w.reports()
			if len(reps) != 2 {
				t.Fatalf("%d reports", len(reps))
			}
			for _, rep := range reps {
				if rep.GetState() != eddyv1.TaskState_TASK_STATE_FAILED || rep.GetFailedRestoreCheckpoint() != tc.want || rep.GetError() != err.Error() {
					t.Errorf("report %v", rep)
				}
			}
		})
	}
}

// TestDeploymentsShareByTenant: each deployment's guest calls are admitted
// by its tenant's share of the worker, weighted by its cpu_share (0: 1).
// Two tenants' jobs with a CPU-bound module run at once through the
// worker's scheduler, with one slot between them: each tenant's calls
// are admitted, its weight as the deployment says, and no slot is left
// held.
func TestDeploymentsShareByTenant(t *testing.T) {
	ctx := context.Background()
	engine, err := host.NewEngine(ctx, host.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close(ctx)
	burn, err := engine.Load(ctx, "../../host/testdata/burn.wasm")
	if err != nil {
		t.Fatal(err)
	}
	// No coordinator is called: the module is in the worker's cache.
	w, err := New(Config{Coordinators: []string{"127.0.0.1:1"}, Slots: 4, CPUShare: cpushare.Config{Slots: 1},
		Job: dataflow.Options{Engine: engine, Connectors: connectors.Registry{}}})
	if err != nil {
		t.Fatal(err)
	}
	w.modules["0123"] = burn
	spec := []byte("name: j\nparallelism: 2\nnodes:\n  - name: gen\n    source: {generator: {kind: sequence, count: 4000}}\n" +
		"  - name: burn\n    input: gen\n    wasm: {module: burn, config: {spins: 2000}}\n  - name: out\n    input: burn\n    sink: {discard: {}}\n")
	mods := []*eddyv1.ModuleRef{{Ref: "burn", Name: "burn", Version: 1, Sha256: "0123"}}
	var wg sync.WaitGroup
	for _, d := range []*eddyv1.Deployment{
		{JobId: "job-1", Tenant: "acme", CpuShare: 3, SpecYaml: spec, Modules: mods},
		{JobId: "job-2", Tenant: "globex", SpecYaml: spec, Modules: mods},
	} {
		job, _, err := w.build(ctx, d, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("build %s: %v", d.GetJobId(), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := job.Run(ctx); err != nil {
				t.Errorf("%s: %v", d.GetJobId(), err)
			}
		}()
	}
	wg.Wait()
	got := map[string]cpushare.TenantStats{}
	for _, st := range w.cpu.Stats() {
		got[st.Name] = st
	}
	if len(got) != 2 || got["acme"].Weight != 3 || got["globex"].Weight != 1 {
		t.Fatalf("tenants of the CPU scheduler: %+v, want acme weight 3, globex 1", got)
	}
	for name, st := range got {
		// 4000 records in batches of at most 256 over 2 subtasks: at
		// least 16 eddy_process calls, besides open and close.
		if st.Grants < 16 || st.Running != 0 || st.Waiting != 0 {
			t.Errorf("tenant %s: %+v", name, st)
		}
	}
}
