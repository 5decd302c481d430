package raftnode

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// TestNodeMetrics: a group of one that elected itself reports the Leader
// state, one leader change, and the FSM applies of the commands proposed.
func TestNodeMetrics(t *testing.T) {
	m := startMember(t, testConfig(t, slog.New(slog.DiscardHandler), "n1", t.TempDir(), "127.0.0.1:0", true))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := m.node.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		mustPropose(t, m.node, &fsm.RegisterWorker{ID: "w" + string(rune('1'+i)), Address: "127.0.0.1:7001", Slots: 1, Incarnation: "i"})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.node.Collector())
	byName := map[string]*dto.MetricFamily{}
	gather := func() {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			byName[mf.GetName()] = mf
		}
	}
	// The observer counts on its own goroutine.
	testkit.Eventually(t, 10*time.Second, "the leader change counted", func() bool {
		gather()
		return byName["eddy_raft_leader_changes_total"].GetMetric()[0].GetCounter().GetValue() >= 1
	})
	states := map[string]float64{}
	for _, s := range byName["eddy_raft_state"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "state" {
				states[l.GetValue()] = s.GetGauge().GetValue()
			}
		}
	}
	if states["Leader"] != 1 || states["Follower"] != 0 || states["Candidate"] != 0 || len(states) != 4 {
		t.Errorf("states %v, want Leader only", states)
	}
	if v := byName["eddy_raft_leader_changes_total"].GetMetric()[0].GetCounter().GetValue(); v != 1 {
		t.Errorf("leader changes %v, want 1", v)
	}
	// Three commands, and whatever Raft applied at election (a no-op and
	// the configuration are not FSM commands).
	if n := byName["eddy_fsm_apply_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); n < 3 {
		t.Errorf("FSM applies %d, want ≥ 3", n)
	}
	if v := byName["eddy_raft_applied_index"].GetMetric()[0].GetGauge().GetValue(); v < 3 {
		t.Errorf("applied index %v", v)
	}
}
