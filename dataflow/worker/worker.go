// Package worker is the worker process of an Eddy cluster: it registers
// its slots with the coordinator, heartbeats, starts the deployments the
// leader hands it (each a share of one job attempt's tasks, run by
// dataflow.Job.RunDeployment), serves the Exchange through which tasks on
// other workers send it records, and cancels what the leader no longer
// expects.
//
// It is not the place for scheduling decisions (the coordinator makes
// them; a worker only does what the last heartbeat answer said), nor for
// running operators (package dataflow does).
//
// The protocol is the one of proto/eddy/v1/cluster.proto: pull-based and
// level-triggered. Every heartbeat reports every task the worker holds;
// the answer lists what to start and what to cancel, and the worker
// applies it idempotently, so a lost answer or a leader change loses
// nothing.
package worker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/host"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
)

// Config configures a worker. Flags and tests fill the same struct.
type Config struct {
	// ID is the worker's stable name; default: derived from the data
	// address.
	ID string
	// Coordinators are API addresses of coordinators; any member will do,
	// the worker follows redirects to the leader.
	Coordinators []string
	// DataAddr is where the Exchange server listens; default
	// 127.0.0.1:0. AdvertiseAddr is how other workers reach it (default:
	// the listener's address).
	DataAddr, AdvertiseAddr string
	// Slots is the number of tasks the worker runs at once.
	Slots int
	// Job is the template of every job's options: connectors, engine,
	// state backends, window operator, logger. LoadModule and Tenant are
	// set per deployment.
	Job dataflow.Options
	// Logger receives the worker's own log lines.
	Logger *slog.Logger
	// Version is reported at registration.
	Version string
}

// DefaultConfig returns a configuration with every default filled in,
// except Coordinators and Job.
func DefaultConfig() Config {
	return Config{DataAddr: "127.0.0.1:0", Slots: 4, Logger: slog.Default(), Version: "dev"}
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case len(c.Coordinators) == 0:
		return errors.New("worker: no coordinator address")
	case c.Slots < 1:
		return fmt.Errorf("worker: slots must be at least 1, not %d", c.Slots)
	case c.Job.Engine == nil:
		return errors.New("worker: Job.Engine is required")
	case c.Job.Connectors == nil:
		return errors.New("worker: Job.Connectors is required")
	}
	return nil
}

// Worker is one running worker process.
type Worker struct {
	cfg      Config
	log      *slog.Logger
	instance string
	exchange *dataflow.Exchange
	server   *grpc.Server
	listener net.Listener
	addr     string

	mu      sync.Mutex
	jobs    map[jobAttempt]*running
	target  string // the coordinator heartbeats go to: the leader, when known
	next    int    // the next entry of Coordinators to try
	conns   map[string]*grpc.ClientConn
	modules map[string]*host.Module // by sha256
	// ended keeps the per-node counters of each job's latest ended
	// deployment, for NodeStats after the leader released its tasks.
	ended map[string][]dataflow.NodeSummary

	cancel context.CancelFunc
	done   chan struct{}
	kickCh chan struct{}
}

type jobAttempt struct {
	job     string
	attempt uint32
}

// running is one deployment this worker runs.
type running struct {
	d      *eddyv1.Deployment
	job    *dataflow.Job
	cancel context.CancelFunc
	done   chan struct{} // closed when RunDeployment returned
	err    error         // its error, once done
	// canceled: the leader asked for it (its tasks end CANCELED, not
	// FAILED).
	canceled bool
	released map[string]bool // tasks whose final report the leader committed
	startErr error           // the deployment could not even start
}

// New prepares a worker; Start runs it.
func New(cfg Config) (*Worker, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DataAddr == "" {
		cfg.DataAddr = "127.0.0.1:0"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	w := &Worker{
		cfg:      cfg,
		instance: hex.EncodeToString(id[:]),
		jobs:     map[jobAttempt]*running{},
		conns:    map[string]*grpc.ClientConn{},
		modules:  map[string]*host.Module{},
		ended:    map[string][]dataflow.NodeSummary{},
		target:   cfg.Coordinators[0],
		kickCh:   make(chan struct{}, 1),
	}
	return w, nil
}

// Start listens for the Exchange, registers with the coordinator and runs
// the heartbeat loop until Stop or ctx ends. It returns once the worker
// has registered (or could not).
func (w *Worker) Start(ctx context.Context) error {
	lis, err := net.Listen("tcp", w.cfg.DataAddr)
	if err != nil {
		return fmt.Errorf("worker: listen on %s: %w", w.cfg.DataAddr, err)
	}
	w.listener = lis
	w.addr = w.cfg.AdvertiseAddr
	if w.addr == "" {
		w.addr = lis.Addr().String()
	}
	if w.cfg.ID == "" {
		w.cfg.ID = "worker-" + w.addr
	}
	w.log = w.cfg.Logger.With("worker", w.cfg.ID)
	w.exchange = dataflow.NewExchange(w.log)
	w.server = grpc.NewServer(rpc.ServerOptions()...)
	eddyv1.RegisterExchangeServer(w.server, w.exchange)
	rpc.RegisterStandard(w.server)
	go func() { _ = w.server.Serve(lis) }()

	ctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.done = make(chan struct{})
	reg, err := w.register(ctx)
	if err != nil {
		cancel()
		w.server.Stop()
		close(w.done)
		return err
	}
	go w.loop(ctx, reg)
	return nil
}

// ID is the worker's name; Addr its Exchange address.
func (w *Worker) ID() string   { return w.cfg.ID }
func (w *Worker) Addr() string { return w.addr }

// Stop cancels every task, stops heartbeating and closes the servers and
// connections. It waits for the tasks to end.
func (w *Worker) Stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
	w.mu.Lock()
	var waits []chan struct{}
	for _, r := range w.jobs {
		r.cancel()
		waits = append(waits, r.done)
	}
	w.mu.Unlock()
	for _, d := range waits {
		<-d
	}
	w.server.Stop()
	w.mu.Lock()
	for _, c := range w.conns {
		c.Close()
	}
	w.conns = map[string]*grpc.ClientConn{}
	w.mu.Unlock()
}

func (w *Worker) conn(addr string) (*grpc.ClientConn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, rpc.DialOptions()...)
	if err != nil {
		return nil, err
	}
	w.conns[addr] = c
	return c, nil
}

// call runs fn against the current target coordinator, following a
// NotLeader redirect once and moving on to the next known coordinator when
// this one does not answer.
func (w *Worker) call(ctx context.Context, fn func(eddyv1.ClusterClient) error) error {
	w.mu.Lock()
	target := w.target
	w.mu.Unlock()
	c, err := w.conn(target)
	if err != nil {
		return err
	}
	err = fn(eddyv1.NewClusterClient(c))
	if err == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if nl, ok := rpc.LeaderFromError(err); ok && nl.GetLeaderAddress() != "" && nl.GetLeaderAddress() != target {
		w.target = nl.GetLeaderAddress()
	} else if status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded {
		w.target = w.cfg.Coordinators[w.next%len(w.cfg.Coordinators)]
		w.next++
	}
	return err
}

// register announces the worker, retrying (redirects, a coordinator that
// is not up yet) until ctx ends.
func (w *Worker) register(ctx context.Context) (*eddyv1.RegisterWorkerResponse, error) {
	req := &eddyv1.RegisterWorkerRequest{WorkerId: w.cfg.ID, InstanceId: w.instance, DataAddress: w.addr,
		Slots: uint32(w.cfg.Slots), Version: w.cfg.Version}
	backoff := 50 * time.Millisecond
	for {
		var resp *eddyv1.RegisterWorkerResponse
		err := w.call(ctx, func(c eddyv1.ClusterClient) error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var err error
			resp, err = c.RegisterWorker(cctx, req)
			return err
		})
		if err == nil {
			if !resp.GetAccepted() {
				return nil, fmt.Errorf("worker %s: the coordinator refused it: %s", w.cfg.ID, resp.GetReason())
			}
			w.log.Info("registered", "slots", w.cfg.Slots, "data_address", w.addr)
			return resp, nil
		}
		w.log.Debug("register", "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worker %s: register with %v: %w", w.cfg.ID, w.cfg.Coordinators, context.Cause(ctx))
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// loop heartbeats until ctx ends. A worker whose heartbeats have gone
// unanswered for the heartbeat timeout cancels its tasks: the leader has
// declared it lost and placed them elsewhere, and the same task must not
// run twice for long.
func (w *Worker) loop(ctx context.Context, reg *eddyv1.RegisterWorkerResponse) {
	defer close(w.done)
	interval := durationMs(reg.GetHeartbeatIntervalMs(), time.Second)
	timeout := durationMs(reg.GetHeartbeatTimeoutMs(), 5*interval)
	lastOK := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.kickCh:
		}
		resp, err := w.heartbeat(ctx)
		switch {
		case err == nil:
			lastOK = time.Now()
			if ms := resp.GetHeartbeatIntervalMs(); ms > 0 {
				interval = time.Duration(ms) * time.Millisecond
			}
			w.apply(ctx, resp)
		case status.Code(err) == codes.NotFound:
			w.log.Warn("the leader does not know this worker: cancelling its tasks and registering again", "err", err)
			w.cancelAll()
			if r, err := w.register(ctx); err == nil {
				reg = r
				lastOK = time.Now()
			}
		default:
			w.log.Debug("heartbeat", "err", err)
			if time.Since(lastOK) > timeout {
				w.log.Warn("no answered heartbeat within the timeout: cancelling tasks", "timeout", timeout)
				w.cancelAll()
			}
		}
		timer.Reset(interval)
	}
}

func durationMs(ms int64, def time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	return time.Duration(ms) * time.Millisecond
}

// kick wakes the heartbeat loop early, when a task reached a terminal
// state, so that the leader learns it at once.
func (w *Worker) kick() {
	select {
	case w.kickCh <- struct{}{}:
	default:
	}
}

func (w *Worker) heartbeat(ctx context.Context) (*eddyv1.HeartbeatResponse, error) {
	req := &eddyv1.HeartbeatRequest{WorkerId: w.cfg.ID, InstanceId: w.instance, Tasks: w.reports()}
	var resp *eddyv1.HeartbeatResponse
	err := w.call(ctx, func(c eddyv1.ClusterClient) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		resp, err = c.Heartbeat(cctx, req)
		return err
	})
	return resp, err
}

// reports lists every task the worker holds.
func (w *Worker) reports() []*eddyv1.TaskReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*eddyv1.TaskReport
	for key, r := range w.jobs {
		stats := map[string]dataflow.TaskStat{}
		if r.job != nil {
			for _, s := range r.job.TaskStats() {
				stats[s.ID] = s
			}
		}
		finished := isClosed(r.done)
		for _, id := range r.d.GetTaskIds() {
			if r.released[id] {
				continue
			}
			rep := &eddyv1.TaskReport{Task: &eddyv1.TaskRef{JobId: key.job, Attempt: key.attempt, TaskId: id},
				State: eddyv1.TaskState_TASK_STATE_RUNNING}
			s, ok := stats[id]
			if ok {
				rep.Metrics = &eddyv1.TaskMetrics{RecordsIn: uint64(s.RecordsIn), RecordsOut: uint64(s.RecordsOut),
					BackpressureRatio: s.BackpressureRatio, WatermarkMs: s.Watermark}
			}
			if finished {
				switch {
				case r.startErr != nil:
					rep.State, rep.Error = eddyv1.TaskState_TASK_STATE_FAILED, r.startErr.Error()
				case r.canceled:
					rep.State = eddyv1.TaskState_TASK_STATE_CANCELED
				case r.err == nil:
					rep.State = eddyv1.TaskState_TASK_STATE_FINISHED
				case ok && s.State == dataflow.TaskFailed:
					rep.State, rep.Error = eddyv1.TaskState_TASK_STATE_FAILED, s.Error
				case ok && s.State == dataflow.TaskFinished:
					rep.State = eddyv1.TaskState_TASK_STATE_FINISHED
				default:
					// Stopped because another task failed.
					rep.State, rep.Error = eddyv1.TaskState_TASK_STATE_FAILED, r.err.Error()
				}
			}
			out = append(out, rep)
		}
	}
	return out
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// apply carries out a heartbeat answer.
func (w *Worker) apply(ctx context.Context, resp *eddyv1.HeartbeatResponse) {
	cancelJobs := map[string]bool{}
	for _, j := range resp.GetCancelJobs() {
		cancelJobs[j] = true
	}
	w.mu.Lock()
	for key, r := range w.jobs {
		if cancelJobs[key.job] {
			r.canceled = true
			r.cancel()
		}
	}
	for _, t := range resp.GetCancelTasks() {
		// A task belongs to its job attempt's deployment, which runs as a
		// whole: cancelling one of its tasks cancels the deployment.
		if r := w.jobs[jobAttempt{t.GetJobId(), t.GetAttempt()}]; r != nil {
			r.canceled = true
			r.cancel()
		}
	}
	for _, t := range resp.GetReleased() {
		key := jobAttempt{t.GetJobId(), t.GetAttempt()}
		r := w.jobs[key]
		if r == nil {
			continue
		}
		r.released[t.GetTaskId()] = true
		if len(r.released) >= len(r.d.GetTaskIds()) && isClosed(r.done) {
			delete(w.jobs, key)
		}
	}
	var start []*eddyv1.Deployment
	for _, d := range resp.GetDeployments() {
		if _, ok := w.jobs[jobAttempt{d.GetJobId(), d.GetAttempt()}]; !ok {
			start = append(start, d)
		}
	}
	w.mu.Unlock()
	for _, d := range start {
		w.deploy(ctx, d)
	}
}

func (w *Worker) cancelAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.jobs {
		r.canceled = true
		r.cancel()
	}
}

// deploy starts one deployment.
func (w *Worker) deploy(ctx context.Context, d *eddyv1.Deployment) {
	key := jobAttempt{d.GetJobId(), d.GetAttempt()}
	jctx, cancel := context.WithCancel(ctx)
	r := &running{d: d, cancel: cancel, done: make(chan struct{}), released: map[string]bool{}}
	w.mu.Lock()
	w.jobs[key] = r
	w.mu.Unlock()
	log := w.log.With("job", d.GetJobId(), "attempt", d.GetAttempt())
	log.Info("deploying", "tasks", d.GetTaskIds())

	job, dep, err := w.build(jctx, d, log)
	if err != nil {
		log.Error("deployment failed to start", "err", err)
		w.mu.Lock()
		r.startErr = err
		w.mu.Unlock()
		close(r.done)
		cancel()
		w.kick()
		return
	}
	w.mu.Lock()
	r.job = job
	w.mu.Unlock()
	go func() {
		_, err := job.RunDeployment(jctx, dep, w.exchange)
		w.mu.Lock()
		r.err = err
		w.ended[d.GetJobId()] = job.Stats()
		w.mu.Unlock()
		close(r.done)
		cancel()
		if err != nil && !r.canceled {
			log.Error("deployment failed", "err", err)
		} else {
			log.Info("deployment ended")
		}
		w.kick()
	}()
}

// build makes the job of a deployment: the spec as submitted, its modules
// pinned by the leader.
func (w *Worker) build(ctx context.Context, d *eddyv1.Deployment, log *slog.Logger) (*dataflow.Job, dataflow.Deployment, error) {
	spec, err := jobspec.Parse(d.GetSpecYaml(), d.GetJobId()+".yaml")
	if err != nil {
		return nil, dataflow.Deployment{}, err
	}
	refs := map[string]*eddyv1.ModuleRef{}
	for _, m := range d.GetModules() {
		refs[m.GetRef()] = m
	}
	opts := w.cfg.Job
	opts.Tenant = rpc.Tenant(d.GetTenant())
	opts.Logger = log
	opts.LoadModule = func(ctx context.Context, ref string) (*host.Module, error) {
		m := refs[ref]
		if m == nil {
			return nil, fmt.Errorf("module %s was not resolved by the coordinator", ref)
		}
		return w.module(ctx, d.GetTenant(), m)
	}
	job, err := dataflow.NewJob(ctx, spec, opts)
	if err != nil {
		return nil, dataflow.Deployment{}, err
	}
	dep := dataflow.Deployment{JobID: d.GetJobId(), Attempt: int64(d.GetAttempt()), Tasks: d.GetTaskIds(),
		Addresses: map[string]string{}, Self: w.addr}
	for _, p := range d.GetPlacements() {
		dep.Addresses[p.GetTaskId()] = p.GetDataAddress()
	}
	return job, dep, nil
}

// module returns the compiled module of a pinned reference, fetching its
// bytes from the coordinator the first time and checking their digest.
func (w *Worker) module(ctx context.Context, tenant string, ref *eddyv1.ModuleRef) (*host.Module, error) {
	w.mu.Lock()
	m := w.modules[ref.GetSha256()]
	w.mu.Unlock()
	if m != nil {
		return m, nil
	}
	var wasm []byte
	err := w.callControl(ctx, func(c eddyv1.ControlClient) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := c.GetModule(cctx, &eddyv1.GetModuleRequest{Tenant: tenant, Name: ref.GetName(), Version: ref.GetVersion()})
		if err != nil {
			return err
		}
		wasm = resp.GetWasm()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("module %s: fetch from the coordinator: %w", ref.GetRef(), err)
	}
	sum := sha256.Sum256(wasm)
	if got := hex.EncodeToString(sum[:]); got != ref.GetSha256() {
		return nil, fmt.Errorf("module %s: the coordinator sent bytes with sha256 %s, want %s", ref.GetRef(), got, ref.GetSha256())
	}
	m, err = w.cfg.Job.Engine.Compile(ctx, fmt.Sprintf("%s@%d", ref.GetName(), ref.GetVersion()), wasm)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev := w.modules[ref.GetSha256()]; prev != nil {
		return prev, nil
	}
	w.modules[ref.GetSha256()] = m
	return m, nil
}

// callControl is call for the Control service (any coordinator forwards
// it to the leader).
func (w *Worker) callControl(ctx context.Context, fn func(eddyv1.ControlClient) error) error {
	var err error
	for range len(w.cfg.Coordinators) + 1 {
		w.mu.Lock()
		target := w.target
		w.mu.Unlock()
		var c *grpc.ClientConn
		if c, err = w.conn(target); err != nil {
			return err
		}
		if err = fn(eddyv1.NewControlClient(c)); err == nil {
			return nil
		}
		if code := status.Code(err); code != codes.Unavailable {
			return err
		}
		w.mu.Lock()
		w.target = w.cfg.Coordinators[w.next%len(w.cfg.Coordinators)]
		w.next++
		w.mu.Unlock()
	}
	return err
}

// Jobs lists the deployments the worker holds, for tests and diagnostics:
// job id and attempt.
func (w *Worker) Jobs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range w.jobs {
		out = append(out, fmt.Sprintf("%s#%d", k.job, k.attempt))
	}
	return out
}

// NodeStats returns the per-node counters of the latest attempt of job on
// this worker (nil when it has none): what `eddy run` prints, as the
// standalone worker saw it.
func (w *Worker) NodeStats(jobID string) []dataflow.NodeSummary {
	w.mu.Lock()
	defer w.mu.Unlock()
	var best *running
	var attempt uint32
	for k, r := range w.jobs {
		if k.job == jobID && r.job != nil && (best == nil || k.attempt > attempt) {
			best, attempt = r, k.attempt
		}
	}
	if best == nil {
		return w.ended[jobID]
	}
	return best.job.Stats()
}
