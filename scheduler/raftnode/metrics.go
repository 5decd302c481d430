package raftnode

// The Raft member's metrics: its state, the leader changes it saw and how
// long the FSM takes to apply a command.

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// timedFSM measures the caller's FSM's Apply. Only Apply is timed: a
// snapshot or restore is rare and logged by Raft.
type timedFSM struct {
	fsm  raft.FSM
	hist prometheus.Histogram
}

func (t *timedFSM) Apply(l *raft.Log) any {
	start := time.Now()
	r := t.fsm.Apply(l)
	t.hist.Observe(time.Since(start).Seconds())
	return r
}

func (t *timedFSM) Snapshot() (raft.FSMSnapshot, error) { return t.fsm.Snapshot() }
func (t *timedFSM) Restore(rc io.ReadCloser) error      { return t.fsm.Restore(rc) }

// nodeMetrics are a Node's counters.
type nodeMetrics struct {
	apply         prometheus.Histogram
	leaderChanges atomic.Uint64
	lastLeader    atomic.Pointer[string]
}

func newNodeMetrics() *nodeMetrics {
	return &nodeMetrics{apply: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "eddy_fsm_apply_duration_seconds",
		Help:    "Time the coordinator's FSM took to apply one committed command.",
		Buckets: []float64{1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1},
	})}
}

// observeLeaders counts the changes of leader this member sees (an
// election won by anyone, this member included; "no leader" in between is
// not a change).
func (n *Node) observeLeaders() {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	n.observer = obs
	go func() {
		for {
			select {
			case o := <-ch:
				lo := o.Data.(raft.LeaderObservation)
				id := string(lo.LeaderID)
				if id == "" {
					continue
				}
				if prev := n.metrics.lastLeader.Swap(&id); prev == nil || *prev != id {
					n.metrics.leaderChanges.Add(1)
				}
			case <-n.observerDone:
				return
			}
		}
	}()
}

var (
	raftStates      = []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown}
	descRaftState   = prometheus.NewDesc("eddy_raft_state", "1 for the Raft state this coordinator is in, 0 for the others.", []string{"node", "state"}, nil)
	descLeaderChges = prometheus.NewDesc("eddy_raft_leader_changes_total", "Changes of Raft leader this coordinator observed.", []string{"node"}, nil)
	descApplied     = prometheus.NewDesc("eddy_raft_applied_index", "Index of the last log entry applied to the FSM.", []string{"node"}, nil)
)

// Collector returns the collector of the node's Raft metrics; the
// histogram of FSM apply latency carries no node label (one per process).
func (n *Node) Collector() prometheus.Collector { return (*nodeCollector)(n) }

type nodeCollector Node

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRaftState
	ch <- descLeaderChges
	ch <- descApplied
	c.metrics.apply.Describe(ch)
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := (*Node)(c)
	state := n.raft.State()
	for _, s := range raftStates {
		v := 0.0
		if s == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, v, n.cfg.ID, s.String())
	}
	ch <- prometheus.MustNewConstMetric(descLeaderChges, prometheus.CounterValue, float64(n.metrics.leaderChanges.Load()), n.cfg.ID)
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(n.raft.AppliedIndex()), n.cfg.ID)
	n.metrics.apply.Collect(ch)
}
