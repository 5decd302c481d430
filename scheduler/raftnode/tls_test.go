package raftnode

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/certgen"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// peerTLS makes a CA in a new directory and returns the Raft TLS config
// of a member holding its certificate.
func peerTLS(t *testing.T) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	if _, err := certgen.Init(dir, nil, false); err != nil {
		t.Fatal(err)
	}
	creds, err := rpc.TLS{CA: filepath.Join(dir, certgen.CAFile), Cert: filepath.Join(dir, certgen.NodeFile),
		Key: filepath.Join(dir, certgen.NodeKeyFile)}.Load(true)
	if err != nil {
		t.Fatal(err)
	}
	return creds.PeerConfig()
}

// TestTLSGroup: members with certificates of the cluster CA form a group
// over mutual TLS and replicate; a member with another CA's certificate
// added as a voter never takes part (the handshakes fail both ways), so
// the group loses its quorum rather than admit it.
func TestTLSGroup(t *testing.T) {
	logger := testkit.Logger(t)
	cluster, foreign := peerTLS(t), peerTLS(t)
	start := func(id string, cfg *tls.Config, bootstrap bool) *member {
		c := testConfig(t, logger, id, t.TempDir(), "127.0.0.1:0", bootstrap)
		c.TLS = cfg
		return startMember(t, c)
	}

	a := start("a", cluster, true)
	testkit.Eventually(t, 10*time.Second, "a leads", a.node.IsLeader)
	b := start("b", cluster, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.node.AddVoter(ctx, "b", b.node.Addr()); err != nil {
		t.Fatalf("add b: %v", err)
	}
	mustPropose(t, a.node, &fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "j", Tasks: []string{"t0"}})
	testkit.Eventually(t, 10*time.Second, "b replicates over TLS", func() bool { return converged(t, a, b) })

	x := start("x", cluster, true)
	testkit.Eventually(t, 10*time.Second, "x leads", x.node.IsLeader)
	intruder := start("intruder", foreign, false)
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := x.node.AddVoter(ctx, "intruder", intruder.node.Addr())
	t.Logf("add the intruder as a voter: %v", err)
	// With the intruder a voter, x alone is no quorum: nothing commits,
	// since the intruder cannot take part.
	data, err := fsm.Encode(&fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "j", Tasks: []string{"t0"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := x.node.Apply(ctx, data); err == nil {
		t.Error("a proposal committed with the intruder a voter: it took part in the group")
	}
	if id, _ := intruder.node.Leader(); id != "" {
		t.Errorf("the intruder knows a leader: %s", id)
	}
	if intruder.node.AppliedIndex() != 0 {
		t.Errorf("the intruder applied entries up to %d", intruder.node.AppliedIndex())
	}
}
