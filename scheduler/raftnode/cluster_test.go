package raftnode

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

type member struct {
	node *Node
	fsm  *fsm.FSM
	cfg  Config
}

func testConfig(t testing.TB, logger *slog.Logger, id, dir, bind string, bootstrap bool) Config {
	cfg := DefaultConfig()
	cfg.ID = id
	cfg.BindAddr = bind
	cfg.DataDir = dir
	cfg.Bootstrap = bootstrap
	// As short as is safe on a loaded two-core machine.
	cfg.HeartbeatTimeout = 500 * time.Millisecond
	cfg.ElectionTimeout = 500 * time.Millisecond
	cfg.LeaderLeaseTimeout = 500 * time.Millisecond
	cfg.WALSegmentSize = 1 << 20
	cfg.Logger = logger
	return cfg
}

func startMember(t testing.TB, cfg Config) *member {
	t.Helper()
	f := fsm.New()
	n, err := Start(cfg, f)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.ID, err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return &member{node: n, fsm: f, cfg: cfg}
}

func propose(t testing.TB, n *Node, cmd fsm.Command) (any, error) {
	t.Helper()
	data, err := fsm.Encode(cmd, time.Now())
	if err != nil {
		t.Fatalf("encode %s: %v", cmd.Type(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.Apply(ctx, data)
}

func mustPropose(t testing.TB, n *Node, cmd fsm.Command) any {
	t.Helper()
	res, err := propose(t, n, cmd)
	if err != nil {
		t.Fatalf("propose %s on %s: %v", cmd.Type(), n.ID(), err)
	}
	return res
}

func leaderAmong(members ...*member) *member {
	for _, m := range members {
		if m.node.IsLeader() {
			return m
		}
	}
	return nil
}

func state(t testing.TB, m *member) []byte {
	t.Helper()
	data, err := m.fsm.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// converged reports whether every member's FSM holds the same state as the
// first's.
func converged(t testing.TB, members ...*member) bool {
	want := state(t, members[0])
	for _, m := range members[1:] {
		if !bytes.Equal(state(t, m), want) {
			return false
		}
	}
	return true
}

func TestSingleNodeGroupRestarts(t *testing.T) {
	logger := testkit.Logger(t)
	dir := t.TempDir()
	m := startMember(t, testConfig(t, logger, "solo", dir, "127.0.0.1:0", true))
	elected := testkit.Eventually(t, 10*time.Second, "the single node to lead", m.node.IsLeader)
	t.Logf("group of one elected itself in %s", elected)

	job := mustPropose(t, m.node, &fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "j", Tasks: []string{"t0"}}).(fsm.Job)
	if _, err := propose(t, m.node, &fsm.SubmitJob{Tenant: "nobody", Name: "j", Tasks: []string{"t0"}}); !errors.Is(err, fsm.ErrTenantNotFound) {
		t.Fatalf("refused command: error %v, want fsm.ErrTenantNotFound", err)
	}
	if err := m.node.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	mustPropose(t, m.node, &fsm.CreateTenant{ID: "acme"}) // after the snapshot: replayed from the log
	before := state(t, m)
	addr := m.node.Addr()
	if err := m.node.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := propose(t, m.node, &fsm.CreateTenant{ID: "late"}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("proposal after shutdown: %v, want ErrShutdown", err)
	}

	// Bootstrap again on the same directory is ignored: the group exists.
	again := startMember(t, testConfig(t, logger, "solo", dir, addr, true))
	testkit.Eventually(t, 10*time.Second, "the restarted node to lead", again.node.IsLeader)
	if err := again.node.Barrier(context.Background()); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	if got := state(t, again); !bytes.Equal(got, before) {
		t.Fatalf("state after restart:\n got %s\nwant %s", got, before)
	}
	if _, err := again.fsm.Job(fsm.DefaultTenant, job.ID); err != nil {
		t.Fatalf("job after restart: %v", err)
	}
}

// TestThreeNodeFailover: a group of three on 127.0.0.1 loses its leader,
// elects another, keeps everything committed and goes on; the old leader
// restarts from its data directory and catches up.
func TestThreeNodeFailover(t *testing.T) {
	logger := testkit.Logger(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	n1 := startMember(t, testConfig(t, logger, "c1", dirs[0], "127.0.0.1:0", true))
	testkit.Eventually(t, 10*time.Second, "c1 to lead its group of one", n1.node.IsLeader)
	n2 := startMember(t, testConfig(t, logger, "c2", dirs[1], "127.0.0.1:0", false))
	n3 := startMember(t, testConfig(t, logger, "c3", dirs[2], "127.0.0.1:0", false))
	ctx := context.Background()
	for _, m := range []*member{n2, n3} {
		if err := n1.node.AddVoter(ctx, m.node.ID(), m.node.Addr()); err != nil {
			t.Fatalf("add %s: %v", m.node.ID(), err)
		}
	}
	if err := n1.node.AddVoter(ctx, "c2", n2.node.Addr()); err != nil { // joining twice is harmless
		t.Fatalf("add c2 again: %v", err)
	}
	servers, err := n1.node.Servers()
	if err != nil || len(servers) != 3 {
		t.Fatalf("servers %+v, %v", servers, err)
	}

	// Commit some state through the leader.
	for _, m := range []*member{n1, n2, n3} {
		mustPropose(t, n1.node, &fsm.RegisterCoordinator{ID: m.node.ID(), RaftAddress: m.node.Addr(), APIAddress: "127.0.0.1:0"})
	}
	mustPropose(t, n1.node, &fsm.RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "a"})
	mustPropose(t, n1.node, &fsm.RegisterWorker{ID: "w2", Address: "127.0.0.1:7002", Slots: 2, Incarnation: "a"})
	job := mustPropose(t, n1.node, &fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "keyed", Tasks: []string{"t0", "t1"}}).(fsm.Job)
	mustPropose(t, n1.node, &fsm.PlaceJob{JobID: job.ID, Attempt: 1, Deployment: map[string]string{"t0": "w1", "t1": "w2"}})

	// A follower refuses proposals and names the leader.
	_, err = propose(t, n2.node, &fsm.CreateTenant{ID: "acme"})
	var nle *NotLeaderError
	if !errors.As(err, &nle) || !errors.Is(err, ErrNotLeader) || nle.LeaderID != "c1" || nle.LeaderAddr != n1.node.Addr() {
		t.Fatalf("proposal on a follower: %v, want a NotLeaderError naming c1 at %s", err, n1.node.Addr())
	}
	if err := n2.node.AddVoter(ctx, "c9", "127.0.0.1:1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddVoter on a follower: %v", err)
	}

	testkit.Eventually(t, 10*time.Second, "the followers to apply everything", func() bool { return converged(t, n1, n2, n3) })
	if err := n1.node.Snapshot(); err != nil { // c1 restarts from a snapshot plus log
		t.Fatalf("snapshot: %v", err)
	}
	mustPropose(t, n1.node, &fsm.TaskFinished{JobID: job.ID, Attempt: 1, TaskID: "t0"})
	testkit.Eventually(t, 10*time.Second, "the followers to apply the last entry", func() bool { return converged(t, n1, n2, n3) })
	committed := state(t, n1)
	oldLeaderAddr := n1.node.Addr()

	// Lose the leader.
	stopped := time.Now()
	if err := n1.node.Shutdown(); err != nil {
		t.Fatalf("shutdown c1: %v", err)
	}
	var leader *member
	testkit.Eventually(t, 20*time.Second, "a new leader", func() bool {
		leader = leaderAmong(n2, n3)
		return leader != nil
	})
	t.Logf("new leader %s elected %s after the old one stopped", leader.node.ID(), time.Since(stopped).Round(time.Millisecond))
	if err := leader.node.Barrier(ctx); err != nil {
		t.Fatalf("barrier on the new leader: %v", err)
	}
	for _, m := range []*member{n2, n3} {
		if got := state(t, m); !bytes.Equal(got, committed) {
			t.Fatalf("%s lost committed state:\n got %s\nwant %s", m.node.ID(), got, committed)
		}
	}
	follower := n2
	if leader == n2 {
		follower = n3
	}
	testkit.Eventually(t, 10*time.Second, "the follower to learn the new leader", func() bool {
		id, _ := follower.node.Leader()
		return id == leader.node.ID()
	})

	// New commands commit with two of three members.
	mustPropose(t, leader.node, &fsm.WorkerDown{ID: "w2", Reason: "no heartbeat"}) // t1 runs there, unfinished
	second := mustPropose(t, leader.node, &fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "after-failover", Tasks: []string{"t0"}}).(fsm.Job)
	testkit.Eventually(t, 10*time.Second, "the survivors to converge", func() bool { return converged(t, leader, follower) })
	if j, err := follower.fsm.Job(fsm.DefaultTenant, job.ID); err != nil || j.State != fsm.JobRestarting {
		t.Fatalf("first job on the follower: %+v, %v", j, err)
	}

	// The old leader restarts from its data directory (a snapshot and the
	// log after it) and catches up.
	if snaps, err := os.ReadDir(filepath.Join(dirs[0], "snapshots")); err != nil || len(snaps) == 0 {
		t.Fatalf("no snapshot in c1's data directory: %v", err)
	}
	restarted := startMember(t, testConfig(t, logger, "c1", dirs[0], oldLeaderAddr, true))
	caughtUp := testkit.Eventually(t, 20*time.Second, "the restarted member to catch up", func() bool {
		return converged(t, leader, restarted)
	})
	t.Logf("restarted member caught up in %s", caughtUp.Round(time.Millisecond))
	if _, err := restarted.fsm.Job(fsm.DefaultTenant, second.ID); err != nil {
		t.Fatalf("job committed while c1 was down: %v", err)
	}
	if restarted.node.IsLeader() && leader.node.IsLeader() {
		t.Fatal("two leaders")
	}

	// All three commit together again; a member can be removed.
	mustPropose(t, leader.node, &fsm.CreateTenant{ID: "acme"})
	testkit.Eventually(t, 10*time.Second, "all three to converge", func() bool { return converged(t, leader, follower, restarted) })
	if err := leader.node.RemoveServer(ctx, follower.node.ID()); err != nil {
		t.Fatalf("remove %s: %v", follower.node.ID(), err)
	}
	servers, err = leader.node.Servers()
	if err != nil || len(servers) != 2 {
		t.Fatalf("servers after removal %+v, %v", servers, err)
	}
}
