package worker

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/host"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// TestCollector: the task series of the worker's deployments, labelled by
// tenant, job, node, subtask and worker, of each job's latest attempt only;
// readiness follows registration and heartbeats.
func TestCollector(t *testing.T) {
	ctx := context.Background()
	engine, err := host.NewEngine(ctx, host.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close(ctx)
	w, err := New(Config{ID: "w9", Coordinators: []string{"127.0.0.1:1"}, Slots: 4, Job: dataflow.Options{Engine: engine, Connectors: connectors.Registry{}}})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(count int) []byte {
		return []byte("name: j\nnodes:\n  - name: gen\n    source: {generator: {kind: sequence, count: " +
			strconv.Itoa(count) + "}}\n  - name: out\n    input: gen\n    sink: {discard: {}}\n")
	}
	for _, d := range []*eddyv1.Deployment{
		{JobId: "job-1", Attempt: 1, Tenant: "acme", SpecYaml: spec(100)},
		{JobId: "job-1", Attempt: 2, Tenant: "acme", SpecYaml: spec(300)},
		{JobId: "job-2", Attempt: 1, Tenant: "globex", SpecYaml: spec(50)},
	} {
		job, _, err := w.build(ctx, d, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := job.Run(ctx); err != nil {
			t.Fatal(err)
		}
		w.jobs[jobAttempt{d.GetJobId(), d.GetAttempt()}] = &running{d: d, job: job}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(w.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather (a duplicate series would fail here): %v", err)
	}
	in := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "eddy_task_records_in_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			if ls["worker"] != "w9" || ls["subtask"] != "0" {
				t.Errorf("labels %v", ls)
			}
			in[ls["tenant"]+"/"+ls["job"]+"/"+ls["node"]] = m.GetCounter().GetValue()
		}
	}
	// gen and out chain into one task, named by its first node.
	want := map[string]float64{"acme/job-1/gen": 300, "globex/job-2/gen": 50}
	if len(in) != len(want) {
		t.Fatalf("records in %v, want %v", in, want)
	}
	for k, v := range want {
		if in[k] != v {
			t.Errorf("records in of %s: %v, want %v", k, in[k], v)
		}
	}

	if err := w.Ready(); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("unregistered worker ready: %v", err)
	}
	w.registered.Store(true)
	w.heartbeatTimeout.Store(int64(time.Second))
	w.lastHeartbeat.Store(time.Now().UnixNano())
	if err := w.Ready(); err != nil {
		t.Errorf("registered worker not ready: %v", err)
	}
	w.lastHeartbeat.Store(time.Now().Add(-time.Minute).UnixNano())
	if err := w.Ready(); err == nil || !strings.Contains(err.Error(), "no heartbeat answered") {
		t.Errorf("worker with stale heartbeats: %v", err)
	}
}
