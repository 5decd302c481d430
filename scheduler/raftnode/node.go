// Package raftnode runs one member of the coordinator's Raft group: it wires
// hashicorp/raft to a durable write-ahead log and stable store (raft-wal), a
// file snapshot store and a TCP transport (mutual TLS with Config.TLS),
// around the caller's raft.FSM.
//
// A group of one bootstraps itself (Config.Bootstrap). A group of three or
// five bootstraps one member; the others start without Bootstrap and are
// added by the leader with [Node.AddVoter] when they ask to join (the
// request itself arrives over the coordinator's gRPC API). A member
// restarted on its data directory rejoins the group and catches up from the
// log or a snapshot.
//
// Proposals ([Node.Apply]) succeed only on the leader. Elsewhere they fail
// with a [*NotLeaderError] naming the leader, so that the caller can forward
// the request or redirect its client. Leader loops follow [Node.LeaderCh]
// and call [Node.Barrier] after winning an election, before acting on the
// FSM's state.
//
// The package knows nothing of Eddy's commands: it moves opaque bytes to the
// FSM and hands back what the FSM's Apply returned. It is not the place for
// scheduling logic or the gRPC services.
package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

var (
	// ErrInvalidConfig is matched by the errors of Config.Validate.
	ErrInvalidConfig = errors.New("raftnode: invalid config")
	// ErrNotLeader is matched by *NotLeaderError.
	ErrNotLeader = errors.New("raftnode: not the leader")
	// ErrOutcomeUnknown: leadership was lost, or the caller gave up, after
	// the proposal was sent: it may or may not have been committed.
	// Commands should be safe to propose again (the FSM refuses stale
	// decisions).
	ErrOutcomeUnknown = errors.New("raftnode: outcome of the proposal unknown")
	// ErrShutdown: the node is shut down.
	ErrShutdown = errors.New("raftnode: node is shut down")
)

// NotLeaderError is returned by the operations only a leader can perform. It
// names the leader when one is known, so that the caller can forward.
type NotLeaderError struct {
	// LeaderID and LeaderAddr (its Raft address) are empty while no leader
	// is known, as during an election.
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderAddr == "" {
		return "raftnode: not the leader, and no leader is known"
	}
	return fmt.Sprintf("raftnode: not the leader; the leader is %s at %s", e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Node is a running member of the group.
type Node struct {
	cfg       Config
	log       *slog.Logger
	raft      *raft.Raft
	transport *raft.NetworkTransport
	wal       *wal.WAL
	meta      *metadb.BoltMetaDB

	shutdownOnce sync.Once
	shutdownErr  error

	metrics      *nodeMetrics
	observer     *raft.Observer
	observerDone chan struct{}
}

// Server is a member of the group's configuration.
type Server struct {
	ID      string
	Address string
	Voter   bool
}

// Start opens (or creates) the node's data directory, starts Raft with fsm
// and, with Config.Bootstrap on a fresh directory, makes it a group of one.
// It returns once Raft runs, before any leader is elected (see WaitLeader).
func Start(cfg Config, fsm raft.FSM) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	logger := cfg.Logger.With("raft_id", cfg.ID)
	hl := newHCLog(logger, "raft")
	n := &Node{cfg: cfg, log: logger, metrics: newNodeMetrics(), observerDone: make(chan struct{})}
	if err := n.start(fsm, hl); err != nil {
		n.close()
		return nil, fmt.Errorf("raftnode %s: start: %w", cfg.ID, err)
	}
	return n, nil
}

func (n *Node) start(fsm raft.FSM, hl hclog.Logger) error {
	walDir := filepath.Join(n.cfg.DataDir, "wal")
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		return err
	}
	// The WAL does not close the metadata database it opens itself, which
	// would keep its file locked after Shutdown and block a restart in the
	// same process; so it gets one that Shutdown closes.
	n.meta = &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir,
		wal.WithMetaStore(n.meta),
		wal.WithLogger(hl.Named("wal")),
		wal.WithSegmentSize(n.cfg.WALSegmentSize))
	if err != nil {
		return fmt.Errorf("open log %s: %w", walDir, err)
	}
	n.wal = w
	snaps, err := raft.NewFileSnapshotStoreWithLogger(n.cfg.DataDir, n.cfg.SnapshotRetain, hl.Named("snapshots"))
	if err != nil {
		return fmt.Errorf("open snapshots in %s: %w", n.cfg.DataDir, err)
	}
	var advertise net.Addr
	if n.cfg.AdvertiseAddr != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", n.cfg.AdvertiseAddr); err != nil {
			return fmt.Errorf("advertise address: %w", err)
		}
	}
	if n.cfg.TLS == nil {
		n.transport, err = raft.NewTCPTransportWithLogger(n.cfg.BindAddr, advertise, n.cfg.MaxPool, n.cfg.TransportTimeout, hl.Named("transport"))
		if err != nil {
			return fmt.Errorf("listen on %s: %w", n.cfg.BindAddr, err)
		}
	} else {
		stream, err := newTLSStreamLayer(n.cfg.BindAddr, advertise, n.cfg.TLS)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", n.cfg.BindAddr, err)
		}
		n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: stream, MaxPool: n.cfg.MaxPool, Timeout: n.cfg.TransportTimeout, Logger: hl.Named("transport"),
		})
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	rc.CommitTimeout = n.cfg.CommitTimeout
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.TrailingLogs = n.cfg.TrailingLogs
	rc.Logger = hl
	rc.NoLegacyTelemetry = true
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}

	if n.cfg.Bootstrap {
		existing, err := raft.HasExistingState(w, w, snaps)
		if err != nil {
			return fmt.Errorf("read existing state: %w", err)
		}
		if !existing {
			self := raft.Server{Suffrage: raft.Voter, ID: rc.LocalID, Address: n.transport.LocalAddr()}
			if err := raft.BootstrapCluster(rc, w, w, snaps, n.transport, raft.Configuration{Servers: []raft.Server{self}}); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
			n.log.Info("bootstrapped a new group", "addr", self.Address)
		}
	}

	r, err := raft.NewRaft(rc, &timedFSM{fsm: fsm, hist: n.metrics.apply}, w, w, snaps, n.transport)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	n.raft = r
	n.observeLeaders()
	n.log.Info("raft started", "addr", n.Addr(), "data_dir", n.cfg.DataDir)
	return nil
}

// ID is the node's server id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr is the Raft address the other members reach this node at.
func (n *Node) Addr() string { return string(n.transport.LocalAddr()) }

// IsLeader reports whether this node is the leader now. Leadership can end
// at any moment; proposals check it again.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// State is the node's Raft role: "Follower", "Candidate", "Leader" or
// "Shutdown".
func (n *Node) State() string { return n.raft.State().String() }

// Leader returns the id and Raft address of the leader this node knows of;
// both empty when none is known.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// LeaderCh delivers true when this node becomes leader and false when it
// stops being one. It holds only the latest transition: a slow reader may
// miss a false-true pair (two trues in a row mean leadership was lost and
// regained) but always sees the current state last. There is one channel
// per node: give it one reader, the supervisor of the leader loops, which
// starts them on true (after Barrier) and stops them on false.
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// WaitLeader waits until some leader is known (to this node) and returns it.
func (n *Node) WaitLeader(ctx context.Context) (id, addr string, err error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, addr = n.Leader(); addr != "" {
			return id, addr, nil
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("raftnode %s: wait for a leader: %w", n.cfg.ID, ctx.Err())
		case <-tick.C:
		}
	}
}

func (n *Node) notLeader() error {
	id, addr := n.Leader()
	return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// bound gives ctx the configured ApplyTimeout when it has no deadline, and
// returns the time left, which raft takes as its enqueue timeout.
func (n *Node) bound(ctx context.Context) (context.Context, context.CancelFunc, time.Duration, error) {
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	}
	if err := ctx.Err(); err != nil {
		cancel()
		return nil, nil, 0, err
	}
	dl, _ := ctx.Deadline()
	left := time.Until(dl)
	if left <= 0 {
		cancel()
		return nil, nil, 0, context.DeadlineExceeded
	}
	return ctx, cancel, left, nil
}

// errGaveUp marks a wait abandoned because its context ended.
var errGaveUp = errors.New("gave up waiting")

// wait waits for a future, or for ctx.
func wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errGaveUp, ctx.Err())
	}
}

// mapError turns raft's errors into this package's. A proposal is an
// operation that changes the log (Apply, AddVoter, RemoveServer).
func (n *Node) mapError(op string, proposal bool, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("raftnode %s: %s: %w: %w", n.cfg.ID, op, ErrOutcomeUnknown, err)
	case errors.Is(err, errGaveUp) && proposal:
		// The proposal was handed to raft and may still commit.
		return fmt.Errorf("raftnode %s: %s: %w: %w", n.cfg.ID, op, ErrOutcomeUnknown, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("raftnode %s: %s: %w", n.cfg.ID, op, ErrShutdown)
	}
	return fmt.Errorf("raftnode %s: %s: %w", n.cfg.ID, op, err)
}

// Apply proposes cmd, waits until it is committed and applied by this
// node's FSM, and returns what the FSM's Apply returned. When the FSM
// returned an error value (it refused the command), Apply returns that error
// as is, so errors.Is matches the FSM's sentinels.
//
// On a follower it returns a *NotLeaderError. If leadership is lost or ctx
// ends after the proposal was sent, the error matches ErrOutcomeUnknown.
func (n *Node) Apply(ctx context.Context, cmd []byte) (any, error) {
	ctx, cancel, timeout, err := n.bound(ctx)
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: apply: %w", n.cfg.ID, err)
	}
	defer cancel()
	f := n.raft.Apply(cmd, timeout)
	if err := wait(ctx, f); err != nil {
		return nil, n.mapError("apply", true, err)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// Barrier waits until every entry committed before it has been applied to
// this node's FSM. A new leader calls it before reading the FSM to decide.
func (n *Node) Barrier(ctx context.Context) error {
	ctx, cancel, timeout, err := n.bound(ctx)
	if err != nil {
		return fmt.Errorf("raftnode %s: barrier: %w", n.cfg.ID, err)
	}
	defer cancel()
	return n.mapError("barrier", false, wait(ctx, n.raft.Barrier(timeout)))
}

// VerifyLeader confirms with a quorum that this node is still the leader,
// for reads that must not be stale.
func (n *Node) VerifyLeader(ctx context.Context) error {
	ctx, cancel, _, err := n.bound(ctx)
	if err != nil {
		return fmt.Errorf("raftnode %s: verify leader: %w", n.cfg.ID, err)
	}
	defer cancel()
	return n.mapError("verify leader", false, wait(ctx, n.raft.VerifyLeader()))
}

// AddVoter adds (or re-addresses) a voting member; only the leader can.
// Adding a member already present with the same address changes nothing.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	if id == "" || addr == "" {
		return fmt.Errorf("raftnode %s: add voter %q at %q: id and address required", n.cfg.ID, id, addr)
	}
	if !n.IsLeader() {
		return n.notLeader()
	}
	servers, err := n.Servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.ID == id && s.Address == addr && s.Voter {
			return nil
		}
	}
	ctx, cancel, timeout, err := n.bound(ctx)
	if err != nil {
		return fmt.Errorf("raftnode %s: add voter %s: %w", n.cfg.ID, id, err)
	}
	defer cancel()
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	if err := n.mapError("add voter "+id, true, wait(ctx, f)); err != nil {
		return err
	}
	n.log.Info("added voter", "id", id, "addr", addr)
	return nil
}

// RemoveServer removes a member from the group; only the leader can.
// Removing an unknown member changes nothing.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	ctx, cancel, timeout, err := n.bound(ctx)
	if err != nil {
		return fmt.Errorf("raftnode %s: remove server %s: %w", n.cfg.ID, id, err)
	}
	defer cancel()
	f := n.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	if err := n.mapError("remove server "+id, true, wait(ctx, f)); err != nil {
		return err
	}
	n.log.Info("removed server", "id", id)
	return nil
}

// Servers returns the group's latest configuration as this node knows it.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.mapError("configuration", false, err)
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// Snapshot takes a snapshot now and compacts the log (Raft also does so on
// its own, per SnapshotInterval and SnapshotThreshold).
func (n *Node) Snapshot() error {
	err := n.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return n.mapError("snapshot", false, err)
}

// AppliedIndex is the index of the last log entry applied to the FSM.
func (n *Node) AppliedIndex() uint64 { return n.raft.AppliedIndex() }

// Shutdown stops Raft and closes the transport and the log. The data
// directory keeps everything committed; Start on it resumes. Shutting down
// the leader does not hand leadership over: the others elect a new leader
// after their heartbeat timeout, as if it had crashed.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		n.shutdownErr = n.close()
		if n.shutdownErr != nil {
			n.shutdownErr = fmt.Errorf("raftnode %s: shutdown: %w", n.cfg.ID, n.shutdownErr)
		}
		n.log.Info("raft stopped")
	})
	return n.shutdownErr
}

// close releases whatever start acquired, in reverse order.
func (n *Node) close() error {
	var errs []error
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
		if n.observer != nil {
			n.raft.DeregisterObserver(n.observer)
			close(n.observerDone)
		}
	}
	if n.transport != nil {
		errs = append(errs, n.transport.Close())
	}
	if n.wal != nil {
		errs = append(errs, n.wal.Close())
	}
	if n.meta != nil {
		errs = append(errs, n.meta.Close())
	}
	return errors.Join(errs...)
}
