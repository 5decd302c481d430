package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/scheduler/auth"
	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/scheduler/raftnode"
	"github.com/eddy-stream/eddy/storage"
)

// Coordinator is one coordinator process: a Raft member with its FSM, and
// the gRPC server for Control and Cluster. While it leads, it also runs the
// leader's loops (liveness, placement, restarts) and holds the workers'
// heartbeats in memory.
type Coordinator struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	now  func() time.Time

	fsm    *fsm.FSM
	node   *raftnode.Node
	lis    net.Listener
	server *grpc.Server
	health *health.Server
	addr   string // advertised API address
	conns  *rpc.Pool
	// stores are the checkpoint storages opened; checkpointStorage is the
	// default URL.
	stores            *storeCache
	checkpointStorage string
	cpMu              sync.Mutex
	cpConfigs         map[string]checkpointConfigEntry // by job id
	// logs holds the recent log lines of jobs while leading (JobLogs).
	logs *logStore

	ctx    context.Context // ends at Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	started     bool
	stopped     bool
	term        *term         // while leading
	termChanged chan struct{} // closed and replaced when term changes

	// tokenReady is closed once this member's first term has made the
	// bootstrap admin token, or found tokens there already.
	tokenReady chan struct{}
	tokenOnce  sync.Once
	tokenMu    sync.Mutex
	adminToken string // the bootstrap token, when this process made it
}

// New checks cfg and deps and returns a coordinator that Start runs.
func New(cfg Config, deps Deps) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.check(); err != nil {
		return nil, err
	}
	cfg.Raft.ID = cfg.NodeID
	if cfg.TLS != nil && cfg.Raft.TLS == nil {
		cfg.Raft.TLS = cfg.TLS.PeerConfig()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Raft.Logger == nil {
		cfg.Raft.Logger = cfg.Logger
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	open := deps.OpenStorage
	if open == nil {
		open = openStorage
	}
	defaultStorage, err := cfg.checkpointStorage()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg:               cfg,
		deps:              deps,
		log:               cfg.Logger.With("coordinator", cfg.NodeID),
		now:               now,
		fsm:               fsm.New(),
		conns:             cfg.TLS.NewPool(),
		stores:            &storeCache{open: open, stores: map[string]storage.Store{}},
		checkpointStorage: defaultStorage,
		cpConfigs:         map[string]checkpointConfigEntry{},
		logs:              newLogStore(),
		ctx:               ctx,
		cancel:            cancel,
		termChanged:       make(chan struct{}),
		tokenReady:        make(chan struct{}),
	}, nil
}

// Start listens on the API address, starts the Raft member and the gRPC
// server and, with Config.Join, asks the group to add this member (retrying
// for up to JoinTimeout, or until ctx ends). ctx bounds the start only; the
// coordinator runs until Stop. On error everything started is stopped
// again.
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("coordinator: started twice")
	}
	c.started = true
	c.mu.Unlock()
	if err := c.start(ctx); err != nil {
		c.Stop()
		return fmt.Errorf("coordinator %s: start: %w", c.cfg.NodeID, err)
	}
	return nil
}

func (c *Coordinator) start(ctx context.Context) error {
	lis, err := net.Listen("tcp", c.cfg.APIAddr)
	if err != nil {
		return err
	}
	c.lis = lis
	node, err := raftnode.Start(c.cfg.Raft, c.fsm)
	if err != nil {
		return err
	}
	c.node = node
	c.addr = c.cfg.advertised(lis.Addr().String(), node.Addr())

	opts := append(c.cfg.TLS.ServerOptions(rpc.VerifyIfGiven), c.cfg.TLS.MemberOnly(memberMethod)...)
	c.server = grpc.NewServer(opts...)
	eddyv1.RegisterControlServer(c.server, &controlServer{c: c})
	eddyv1.RegisterClusterServer(c.server, &clusterServer{c: c})
	c.health = rpc.RegisterStandard(c.server)
	c.health.SetServingStatus(eddyv1.Cluster_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	c.wg.Add(3)
	go func() {
		defer c.wg.Done()
		if err := c.server.Serve(lis); err != nil {
			c.log.Error("gRPC server stopped", "err", err)
		}
	}()
	go func() {
		defer c.wg.Done()
		c.supervise()
	}()
	go func() {
		defer c.wg.Done()
		c.keepRegistered()
	}()
	c.log.Info("coordinator started", "api", c.addr, "raft", node.Addr())

	if c.cfg.Join != "" {
		return c.join(ctx)
	}
	return nil
}

// memberMethod reports whether a method of the API is for cluster members
// only: the whole Cluster service (workers) and the membership changes of
// the Raft group.
// memberIdentity is who a cluster member calling Join or Leave with its
// certificate and no token is, for authorization and the audit log.
var memberIdentity = fsm.Token{ID: "cluster-member", Tenant: fsm.DefaultTenant, Role: fsm.RoleAdmin}

func memberMethod(fullMethod string) bool {
	switch fullMethod {
	case eddyv1.Control_Join_FullMethodName, eddyv1.Control_Leave_FullMethodName:
		return true
	}
	return strings.HasPrefix(fullMethod, "/"+eddyv1.Cluster_ServiceDesc.ServiceName+"/")
}

// CheckpointStorage is the URL of the checkpoint storage of jobs whose
// spec names none.
func (c *Coordinator) CheckpointStorage() string { return c.checkpointStorage }

type checkpointConfigEntry struct {
	cfg checkpointConfig
	err error
}

// checkpointConfig returns a job's checkpoint settings, read from its spec
// once.
func (c *Coordinator) checkpointConfig(j *fsm.Job) (checkpointConfig, error) {
	c.cpMu.Lock()
	defer c.cpMu.Unlock()
	e, ok := c.cpConfigs[j.ID]
	if !ok {
		def := c.checkpointStorage
		if j.CheckpointStorage != "" {
			def = j.CheckpointStorage // the spec's, or the default when it was submitted
		}
		e.cfg, e.err = checkpointConfigOf(j.Spec, def)
		if e.err != nil {
			e.err = fmt.Errorf("job %s: checkpoint settings: %w", j.ID, e.err)
		}
		c.cpConfigs[j.ID] = e
	}
	return e.cfg, e.err
}

// Addr is the API address other processes reach this coordinator at.
func (c *Coordinator) Addr() string { return c.addr }

// RaftAddr is the address of this member's Raft transport.
func (c *Coordinator) RaftAddr() string { return c.node.Addr() }

// FSM is the replicated state as this member has applied it, for tests and
// diagnostics; change it only through the API.
func (c *Coordinator) FSM() *fsm.FSM { return c.fsm }

// IsLeader reports whether this member leads the group now.
func (c *Coordinator) IsLeader() bool { return c.node != nil && c.node.IsLeader() }

// WaitLeader waits until the group has a leader that serves calls (this
// member once its term is ready, or another member whose API address is
// known here) and returns the leader's id and API address.
func (c *Coordinator) WaitLeader(ctx context.Context) (id, apiAddr string, err error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.node.IsLeader() {
			c.mu.Lock()
			t := c.term
			c.mu.Unlock()
			if t != nil {
				select {
				case <-t.ready:
					return c.cfg.NodeID, c.addr, nil
				default:
				}
			}
		} else if id, addr := c.leaderAPI(); addr != "" && addr != c.addr {
			return id, addr, nil
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("coordinator %s: wait for a leader: %w", c.cfg.NodeID, ctx.Err())
		case <-c.ctx.Done():
			return "", "", fmt.Errorf("coordinator %s: wait for a leader: stopped", c.cfg.NodeID)
		case <-tick.C:
		}
	}
}

// Stop stops serving, ends the leader's loops and shuts Raft down. What is
// committed stays in the data directory; a coordinator started on it
// resumes. Stop does not hand leadership over: the others elect a leader
// after their heartbeat timeout, as if this process had crashed. It is safe
// to call more than once.
func (c *Coordinator) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	c.mu.Unlock()
	if c.health != nil {
		c.health.Shutdown()
	}
	c.cancel()
	if c.server != nil {
		done := make(chan struct{})
		go func() {
			c.server.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			c.server.Stop()
			<-done
		}
	} else if c.lis != nil {
		c.lis.Close()
	}
	c.wg.Wait()
	if c.node != nil {
		if err := c.node.Shutdown(); err != nil {
			c.log.Warn("raft shutdown", "err", err)
		}
	}
	c.conns.Close()
	c.stores.close()
	c.log.Info("coordinator stopped")
}

// supervise follows Raft leadership: a term (the leader's loops and its
// in-memory view of the workers) starts when this member wins an election
// and ends when it loses leadership.
func (c *Coordinator) supervise() {
	for {
		select {
		case <-c.ctx.Done():
			c.endTerm()
			return
		case leader := <-c.node.LeaderCh():
			c.endTerm()
			if leader {
				c.beginTerm()
			}
		}
	}
}

func (c *Coordinator) beginTerm() {
	ctx, cancel := context.WithCancel(c.ctx)
	t := newTerm(ctx, cancel)
	c.mu.Lock()
	c.term = t
	close(c.termChanged)
	c.termChanged = make(chan struct{})
	c.mu.Unlock()
	c.log.Info("leading the group")
	go c.lead(t)
}

func (c *Coordinator) endTerm() {
	c.mu.Lock()
	t := c.term
	c.term = nil
	if t != nil {
		close(c.termChanged)
		c.termChanged = make(chan struct{})
	}
	c.mu.Unlock()
	if t == nil {
		return
	}
	t.cancel()
	<-t.done
	c.health.SetServingStatus(eddyv1.Cluster_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	c.log.Info("no longer leading")
}

// termWait bounds how long a call that reached the leader waits for its
// term to be ready (the barrier after an election).
const termWait = 10 * time.Second

// leading returns the current term once it is ready. ok is false when this
// member does not lead (the caller forwards or redirects); err is set when
// it leads but the term did not get ready in time.
func (c *Coordinator) leading(ctx context.Context) (t *term, ok bool, err error) {
	timer := time.NewTimer(termWait)
	defer timer.Stop()
	for {
		c.mu.Lock()
		t, changed := c.term, c.termChanged
		c.mu.Unlock()
		if !c.node.IsLeader() && t == nil {
			return nil, false, nil
		}
		var ready <-chan struct{}
		if t != nil {
			select {
			case <-t.ready:
				return t, true, nil
			default:
			}
			ready = t.ready
		}
		// Raft leads but the term is not ready, or the term outlived
		// leadership by a moment: wait for either to settle.
		select {
		case <-ready:
		case <-changed:
		case <-ctx.Done():
			return nil, false, status.FromContextError(ctx.Err()).Err()
		case <-timer.C:
			return nil, false, status.Error(codes.Unavailable, "the coordinator leader is starting; retry")
		case <-c.ctx.Done():
			return nil, false, status.Error(codes.Unavailable, "coordinator shutting down")
		}
	}
}

// leaderAPI returns the id and API address of the leader this member
// knows of; the address is empty when none is known.
func (c *Coordinator) leaderAPI() (id, addr string) {
	id, raftAddr := c.node.Leader()
	if id == "" {
		return "", ""
	}
	if id == c.cfg.NodeID {
		return id, c.addr
	}
	if co, err := c.fsm.Coordinator(id); err == nil && co.APIAddress != "" {
		return id, co.APIAddress
	}
	for _, co := range c.fsm.Coordinators() {
		if co.RaftAddress == raftAddr && co.APIAddress != "" {
			return id, co.APIAddress
		}
	}
	return id, ""
}

// notLeader is the UNAVAILABLE status with a NotLeader detail that a
// member that cannot serve or forward a call returns.
func (c *Coordinator) notLeader() error {
	id, addr := c.leaderAPI()
	if addr == c.addr {
		// Raft names this member but it does not lead any more, or not yet.
		addr = ""
	}
	return rpc.NotLeaderError(id, addr)
}

// propose encodes cmd with the leader's clock and commits it.
func (c *Coordinator) propose(ctx context.Context, cmd fsm.Command) (any, error) {
	data, err := fsm.Encode(cmd, c.now())
	if err != nil {
		return nil, err
	}
	return c.node.Apply(ctx, data)
}

// forwardedKey marks a call a follower forwarded to the leader; a member
// that gets one and does not lead answers NotLeader instead of forwarding
// again, so that two members with different ideas of the leader cannot
// bounce a call between them.
const forwardedKey = "eddy-forwarded-by"

func forwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

// serve runs a Control call: locally on the leader, forwarded to the leader
// elsewhere. newResp allocates the response a forwarded call decodes into.
func serve[Req any, Resp any](ctx context.Context, c *Coordinator, method string, req Req, newResp func() Resp,
	local func(context.Context, *term, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	t, ok, err := c.leading(ctx)
	if err != nil {
		return zero, err
	}
	if ok {
		short, access := auth.For(method)
		tok, err := c.authenticate(ctx)
		if err != nil && memberMethod(method) && rpc.IsMember(ctx) {
			// A cluster member joining or leaving, proven by its
			// certificate (checked on the caller's own connection by
			// whichever member it reached first).
			tok, err = memberIdentity, nil
		}
		if err != nil {
			// Not audited: an anonymous caller could flood the audit log.
			c.log.Warn("call refused", "method", short, "err", status.Convert(err).Message())
			return zero, err
		}
		if err := authorize(tok, short, access); err != nil {
			if access.Mutates {
				c.audit(ctx, tok, short, req, err)
			}
			return zero, err
		}
		resp, err := local(context.WithValue(ctx, identityKey{}, tok), t, req)
		if err != nil {
			err = c.toStatus(err)
		}
		if access.Mutates {
			c.audit(ctx, tok, short, req, err)
		}
		if err != nil {
			return zero, err
		}
		return resp, nil
	}
	if forwarded(ctx) {
		return zero, c.notLeader()
	}
	id, addr := c.leaderAPI()
	if addr == "" || addr == c.addr {
		return zero, rpc.NotLeaderError(id, "")
	}
	conn, err := c.conns.Get(addr)
	if err != nil {
		return zero, status.Errorf(codes.Unavailable, "forward to the leader %s at %s: %v", id, addr, err)
	}
	out := newResp()
	fctx := forwardCredentials(ctx, metadata.AppendToOutgoingContext(ctx, forwardedKey, c.cfg.NodeID))
	if err := conn.Invoke(fctx, method, req, out); err != nil {
		return zero, err // the leader's status, relayed as is
	}
	return out, nil
}

// toStatus maps an error of a local call to a gRPC status. Errors that are
// statuses already pass through.
func (c *Coordinator) toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, raftnode.ErrNotLeader):
		return c.notLeader()
	case errors.Is(err, raftnode.ErrOutcomeUnknown):
		return status.Errorf(codes.Unavailable, "leadership changed while the request was being committed; it may or may not have taken effect: retry (%v)", err)
	case errors.Is(err, raftnode.ErrShutdown):
		return status.Error(codes.Unavailable, "coordinator shutting down; retry")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, fsm.ErrJobNotFound), errors.Is(err, fsm.ErrModuleNotFound),
		errors.Is(err, fsm.ErrTenantNotFound), errors.Is(err, fsm.ErrWorkerNotFound), errors.Is(err, fsm.ErrTokenNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, fsm.ErrTenantExists), errors.Is(err, fsm.ErrTokenExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, fsm.ErrJobState), errors.Is(err, fsm.ErrStaleAttempt), errors.Is(err, fsm.ErrTenantInUse):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, fsm.ErrMalformed):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, fsm.ErrQuotaExceeded):
		return quotaStatus(err)
	}
	c.log.Error("internal error", "err", err)
	return status.Error(codes.Internal, err.Error())
}
