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
// Checkpoints: a deployment of a job whose spec has a checkpoint section
// (or that restores from a checkpoint or savepoint) checkpoints into the
// job's checkpoint storage (Deployment.checkpoint_storage, opened once per
// URL with credentials from EDDY_S3_*), under the job's root
// (checkpoint.JobRoot; the layout is package dataflow/checkpoint's).
// The worker hands the triggers and completions of heartbeat answers to the
// running deployment, each id once, and sends its tasks'
// acknowledgements to the leader (Cluster.AckCheckpoint) from a queue, so
// that a task never waits for the network. A trigger the deployment cannot
// take is declined at once, so that the checkpoint fails fast.
//
// Task logs: each deployment's logger also keeps its Info-and-above lines
// (the guest's output, which package host writes to the task's logger,
// and the tasks' lifecycle) in a bounded per-task buffer (logs.go), which
// heartbeats ship to the leader a bounded batch at a time, for `eddy job
// logs`.
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
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/cpushare"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/host"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/storage"
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
	// OpenStorage opens a job's checkpoint storage by URL (nil:
	// storage.Open with storage.ConfigFromEnv). Each URL is opened once.
	OpenStorage func(ctx context.Context, url string) (storage.Store, error)
	// TLS are the worker's credentials (nil: plaintext): its Exchange
	// requires a peer certificate of the cluster CA, and it dials the
	// coordinators and other workers' Exchange with them.
	TLS *rpc.Credentials
	// Logs bounds the task log lines kept for the leader (zero: the
	// defaults).
	Logs LogLimits
	// CPUShare configures how the worker shares its CPU between tenants:
	// every guest call of a deployment is admitted by its tenant's share,
	// weighted by the deployment's cpu_share. Zero fields: the defaults
	// (cpushare.DefaultConfig).
	CPUShare cpushare.Config
}

// DefaultConfig returns a configuration with every default filled in,
// except Coordinators and Job.
func DefaultConfig() Config {
	return Config{DataAddr: "127.0.0.1:0", Slots: 4, Logger: slog.Default(), Version: "dev", Logs: DefaultLogLimits(), CPUShare: cpushare.DefaultConfig()}
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
	return c.Logs.Validate()
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
	target  string                  // the coordinator heartbeats go to: the leader, when known
	next    int                     // the next entry of Coordinators to try
	pool    *rpc.Pool               // connections to coordinators
	modules map[string]*host.Module // by sha256
	// cpu admits the guest calls of every deployment by its tenant's
	// weight; one per worker, since the CPU it shares is the process's.
	cpu *cpushare.Scheduler
	// ended keeps the per-node counters of each job's latest ended
	// deployment, for NodeStats after the leader released its tasks.
	ended map[string][]dataflow.NodeSummary
	// stores are the checkpoint storages opened, by URL.
	stores map[string]storage.Store
	// unhold cancels the heartbeat call in flight, which the leader may
	// be holding (see loop); nil between calls.
	unhold context.CancelFunc

	cancel context.CancelFunc
	done   chan struct{}
	kickCh chan struct{}
	// acks queues checkpoint acknowledgements for the leader; ackDone is
	// closed when the goroutine sending them returned.
	acks    chan *eddyv1.AckCheckpointRequest
	ackDone chan struct{}
	// logs holds the task log lines not yet shipped with a heartbeat.
	logs *logBuffer

	// For readiness (metrics.go): registered with the leader, when a
	// heartbeat was last answered (unix ns) and the timeout after which
	// the leader gives the worker up (ns).
	registered       atomic.Bool
	lastHeartbeat    atomic.Int64
	heartbeatTimeout atomic.Int64
}

type jobAttempt struct {
	job     string
	attempt uint32
}

// running is one deployment this worker runs. Its fields but d and done
// are guarded by Worker.mu: the deployment's goroutine, the heartbeat
// loop and apply all reach them.
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
	// run is the started deployment (nil until StartDeployment returned);
	// checkpoints says whether it checkpoints. triggered and completed are
	// the highest checkpoint ids handed to it.
	run         *dataflow.Running
	checkpoints bool
	triggered   uint64
	completed   uint64
	// ctx is the deployment's context (with its tenant's instance
	// limits); swaps are the hot swaps asked of it, by id.
	ctx   context.Context
	swaps map[uint64]*preparedSwap
}

// New prepares a worker; Start runs it.
func New(cfg Config) (*Worker, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DataAddr == "" {
		cfg.DataAddr = "127.0.0.1:0"
	}
	if cfg.Logs == (LogLimits{}) {
		cfg.Logs = DefaultLogLimits()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cpu, err := cpushare.New(cfg.CPUShare.WithDefaults())
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	w := &Worker{
		cfg:      cfg,
		instance: hex.EncodeToString(id[:]),
		jobs:     map[jobAttempt]*running{},
		pool:     cfg.TLS.NewPool(),
		modules:  map[string]*host.Module{},
		cpu:      cpu,
		ended:    map[string][]dataflow.NodeSummary{},
		stores:   map[string]storage.Store{},
		target:   cfg.Coordinators[0],
		kickCh:   make(chan struct{}, 1),
		acks:     make(chan *eddyv1.AckCheckpointRequest, maxQueuedAcks),
		ackDone:  make(chan struct{}),
		logs:     newLogBuffer(cfg.Logs),
	}
	if w.cfg.OpenStorage == nil {
		w.cfg.OpenStorage = openStorage
	}
	return w, nil
}

// openStorage is the default Config.OpenStorage.
func openStorage(ctx context.Context, url string) (storage.Store, error) {
	cfg, err := storage.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return storage.Open(ctx, url, cfg)
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
	w.server = grpc.NewServer(w.cfg.TLS.ServerOptions(rpc.RequireMember)...)
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
		close(w.ackDone)
		return err
	}
	go w.loop(ctx, reg)
	go w.sendAcks(ctx)
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
	<-w.ackDone
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
	w.pool.Close()
	w.pool = w.cfg.TLS.NewPool()
	for _, st := range w.stores {
		st.Close()
	}
	w.stores = map[string]storage.Store{}
	w.mu.Unlock()
}

func (w *Worker) conn(addr string) (*grpc.ClientConn, error) {
	w.mu.Lock()
	pool := w.pool
	w.mu.Unlock()
	return pool.Get(addr)
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
	var lastErr string
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
		// Each new reason is a warning, so that a worker refused for good
		// (a certificate the coordinator does not trust) says why; the
		// same one again, as while a coordinator starts, is not.
		if msg := err.Error(); msg != lastErr {
			args := []any{"err", err}
			if w.cfg.TLS == nil && status.Code(err) == codes.Unavailable {
				args = append(args, "hint", "this worker has no TLS, and a coordinator that serves TLS closes plaintext connections: start it with --certs DIR")
			}
			w.log.Warn("register: retrying", args...)
			lastErr = msg
		} else {
			w.log.Debug("register", "err", err)
		}
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
//
// A leader that answers with a state index holds the next heartbeat until
// its state moves on from that index (or for up to the interval): the
// worker then keeps one heartbeat in flight, and learns of a placement or
// a checkpoint trigger as soon as it is committed. A kick cancels the held
// call, so that a task's end is reported at once.
func (w *Worker) loop(ctx context.Context, reg *eddyv1.RegisterWorkerResponse) {
	defer close(w.done)
	interval := durationMs(reg.GetHeartbeatIntervalMs(), time.Second)
	timeout := durationMs(reg.GetHeartbeatTimeoutMs(), 5*interval)
	lastOK := time.Now()
	w.heartbeatTimeout.Store(int64(timeout))
	w.lastHeartbeat.Store(lastOK.UnixNano())
	w.registered.Store(true)
	defer w.registered.Store(false)
	var index uint64 // the state index of the last answer; 0: none, or a leader that does not hold
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.kickCh:
		}
		resp, err := w.heartbeat(ctx, index, interval)
		again := false // call again at once
		switch {
		case err == nil:
			lastOK = time.Now()
			w.lastHeartbeat.Store(lastOK.UnixNano())
			if ms := resp.GetHeartbeatIntervalMs(); ms > 0 {
				interval = time.Duration(ms) * time.Millisecond
			}
			w.apply(ctx, resp)
			index = resp.GetStateIndex()
			again = index != 0
		case status.Code(err) == codes.Canceled && ctx.Err() == nil:
			again = true // a kick: report at once
		case status.Code(err) == codes.NotFound:
			w.log.Warn("the leader does not know this worker: cancelling its tasks and registering again", "err", err)
			w.cancelAll()
			index = 0
			w.registered.Store(false)
			if r, err := w.register(ctx); err == nil {
				reg = r
				lastOK = time.Now()
				w.lastHeartbeat.Store(lastOK.UnixNano())
				w.registered.Store(true)
			}
		default:
			w.log.Debug("heartbeat", "err", err)
			if time.Since(lastOK) > timeout {
				w.log.Warn("no answered heartbeat within the timeout: cancelling tasks", "timeout", timeout)
				w.cancelAll()
			}
		}
		if again {
			timer.Reset(0)
		} else {
			timer.Reset(interval)
		}
	}
}

func durationMs(ms int64, def time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	return time.Duration(ms) * time.Millisecond
}

// kick wakes the heartbeat loop early, when a task reached a terminal
// state, so that the leader learns it at once: it cancels the heartbeat
// in flight, which the leader may be holding.
func (w *Worker) kick() {
	select {
	case w.kickCh <- struct{}{}:
	default:
	}
	w.mu.Lock()
	if w.unhold != nil {
		w.unhold()
	}
	w.mu.Unlock()
}

// logFlushDelay bounds how long the leader may hold a heartbeat that
// ships log lines, so that while a job logs, its lines reach the leader
// within about this long (and it costs at most a few heartbeats a second).
// A held call is not cut short for a new line: a worker that kept
// canceling its calls would never see one answered (see RATIONALE.md).
const logFlushDelay = 200 * time.Millisecond

// heartbeatWait is how long the leader may hold a heartbeat: the whole
// wait, or at most logFlushDelay when the call ships log lines (more are
// likely to follow).
func heartbeatWait(wait time.Duration, shipsLogs bool) time.Duration {
	if shipsLogs {
		return min(wait, logFlushDelay)
	}
	return wait
}

// heartbeat makes one heartbeat, which the leader may hold for up to wait
// while its state is at index.
func (w *Worker) heartbeat(ctx context.Context, index uint64, wait time.Duration) (*eddyv1.HeartbeatResponse, error) {
	// A kick from now on cancels the call: its news may not be in the
	// reports.
	ctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	w.mu.Lock()
	w.unhold = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.unhold = nil
		w.mu.Unlock()
	}()
	req := &eddyv1.HeartbeatRequest{WorkerId: w.cfg.ID, InstanceId: w.instance, Tasks: w.reports(),
		StateIndex: index, Logs: w.logs.take()}
	w.mu.Lock()
	req.SwapPrepared = w.swapReports()
	w.mu.Unlock()
	req.WaitMs = uint32(heartbeatWait(wait, len(req.Logs) > 0).Milliseconds())
	var resp *eddyv1.HeartbeatResponse
	err := w.call(ctx, func(c eddyv1.ClusterClient) error {
		var err error
		resp, err = c.Heartbeat(ctx, req)
		return err
	})
	if err != nil {
		// The leader may have read them before the call failed (a kick
		// cancels a held call): it drops what it has by worker_seq.
		w.logs.putBack(req.Logs)
	}
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
					BytesIn: uint64(s.BytesIn), BytesOut: uint64(s.BytesOut),
					BackpressureRatio: s.BackpressureRatio, WatermarkMs: s.Watermark}
				if s.PendingRecords >= 0 {
					rep.Metrics.PendingRecords = proto.Int64(s.PendingRecords)
				}
			}
			if finished {
				var failure error
				switch {
				case r.startErr != nil:
					failure = r.startErr
				case r.canceled:
					rep.State = eddyv1.TaskState_TASK_STATE_CANCELED
				case r.err == nil:
					rep.State = eddyv1.TaskState_TASK_STATE_FINISHED
				case ok && s.State == dataflow.TaskFailed && s.Err != nil:
					failure = s.Err
				case ok && s.State == dataflow.TaskFinished:
					rep.State = eddyv1.TaskState_TASK_STATE_FINISHED
				default:
					// Stopped because another task failed (or the
					// deployment could not start).
					failure = r.err
				}
				if failure != nil {
					rep.State, rep.Error = eddyv1.TaskState_TASK_STATE_FAILED, failure.Error()
					if id, ok := checkpoint.FailedRestore(failure); ok {
						rep.FailedRestoreCheckpoint = uint64(id)
					}
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
	type trigger struct {
		r  *running
		tr *eddyv1.CheckpointTrigger
	}
	var triggers []trigger
	for _, tr := range resp.GetTriggerCheckpoints() {
		// Each id once; a deployment not started yet gets it at the next
		// heartbeat, which repeats it.
		r := w.jobs[jobAttempt{tr.GetJobId(), tr.GetAttempt()}]
		if r != nil && r.run != nil && tr.GetCheckpointId() > r.triggered && !isClosed(r.done) {
			r.triggered = tr.GetCheckpointId()
			triggers = append(triggers, trigger{r, tr})
		}
	}
	type completion struct {
		run *dataflow.Running
		id  uint64
	}
	var completions []completion
	for _, c := range resp.GetCompletedCheckpoints() {
		r := w.jobs[jobAttempt{c.GetJobId(), c.GetAttempt()}]
		if r != nil && r.run != nil && r.checkpoints && c.GetCheckpointId() > r.completed {
			r.completed = c.GetCheckpointId()
			completions = append(completions, completion{r.run, c.GetCheckpointId()})
		}
	}
	swaps := w.applySwaps(resp)
	w.mu.Unlock()
	for _, f := range swaps {
		go f()
	}
	for _, t := range triggers {
		w.trigger(t.r, t.tr)
	}
	for _, c := range completions {
		c.run.Complete(int64(c.id))
	}
	for _, d := range start {
		w.deploy(ctx, d)
	}
}

// trigger hands a checkpoint trigger to a running deployment, or declines
// it for the deployment's tasks when the deployment cannot take it.
func (w *Worker) trigger(r *running, tr *eddyv1.CheckpointTrigger) {
	id := tr.GetCheckpointId()
	err := errors.New("the job does not checkpoint: its spec has no checkpoint section")
	if r.checkpoints {
		kind := tr.GetKind()
		err = r.run.Trigger(dataflow.Trigger{ID: int64(id), Savepoint: kind == eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT || kind == eddyv1.CheckpointKind_CHECKPOINT_KIND_SWAP,
			SwapID: int64(tr.GetSwapId()), SwapNode: tr.GetSwapNode()})
	}
	if err == nil {
		return
	}
	w.log.Warn("checkpoint declined", "job", tr.GetJobId(), "attempt", tr.GetAttempt(), "checkpoint", id, "err", err)
	w.queueAck(&eddyv1.AckCheckpointRequest{JobId: tr.GetJobId(), Attempt: tr.GetAttempt(), CheckpointId: id,
		TaskId: r.d.GetTaskIds()[0], WorkerId: w.cfg.ID, DeclineReason: err.Error()})
}

// maxQueuedAcks bounds the acknowledgements waiting to be sent; beyond it
// they are dropped (their checkpoints time out).
const maxQueuedAcks = 4096

// ackTimeout bounds how long the worker keeps trying to deliver one
// acknowledgement (a checkpoint that old has timed out anyway, unless
// its timeout is longer).
const ackTimeout = time.Minute

func (w *Worker) queueAck(req *eddyv1.AckCheckpointRequest) {
	select {
	case w.acks <- req:
	default:
		w.log.Warn("checkpoint acknowledgement dropped: too many queued", "job", req.GetJobId(), "checkpoint", req.GetCheckpointId(), "task", req.GetTaskId())
	}
}

// sendAcks delivers queued acknowledgements to the leader, in order,
// retrying while no leader answers and following redirects, until ctx
// ends.
func (w *Worker) sendAcks(ctx context.Context) {
	defer close(w.ackDone)
	for {
		var req *eddyv1.AckCheckpointRequest
		select {
		case <-ctx.Done():
			return
		case req = <-w.acks:
		}
		deadline := time.Now().Add(ackTimeout)
		backoff := 50 * time.Millisecond
		for {
			var resp *eddyv1.AckCheckpointResponse
			err := w.call(ctx, func(c eddyv1.ClusterClient) error {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				var err error
				resp, err = c.AckCheckpoint(cctx, req)
				return err
			})
			if err == nil {
				if !resp.GetAccepted() {
					w.log.Debug("checkpoint acknowledgement not needed", "job", req.GetJobId(), "checkpoint", req.GetCheckpointId(),
						"task", req.GetTaskId(), "reason", resp.GetReason())
				}
				break
			}
			code := status.Code(err)
			if _, redirect := rpc.LeaderFromError(err); !redirect && code != codes.Unavailable && code != codes.DeadlineExceeded {
				w.log.Warn("checkpoint acknowledgement refused", "job", req.GetJobId(), "checkpoint", req.GetCheckpointId(), "task", req.GetTaskId(), "err", err)
				break
			}
			if time.Now().After(deadline) {
				w.log.Warn("checkpoint acknowledgement not delivered", "job", req.GetJobId(), "checkpoint", req.GetCheckpointId(), "task", req.GetTaskId(), "err", err)
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
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
	jctx, cancel := context.WithCancel(host.WithInstanceLimits(ctx, instanceLimits(d.GetLimits())))
	r := &running{d: d, cancel: cancel, done: make(chan struct{}), released: map[string]bool{}, ctx: jctx}
	w.mu.Lock()
	w.jobs[key] = r
	w.mu.Unlock()
	// log's lines are the tenant's too (eddy job logs); opLog's only the
	// worker's: a deployment's failure is each task's, which the leader
	// logs for the tenant from the task reports.
	opLog := w.log.With("job", d.GetJobId(), "attempt", d.GetAttempt())
	log := slog.New(&taskLogHandler{next: opLog.Handler(), buf: w.logs, job: d.GetJobId(), attempt: d.GetAttempt()})
	log.Info("deploying", "tasks", d.GetTaskIds())

	job, dep, err := w.build(jctx, d, log)
	if err != nil {
		opLog.Error("deployment failed to start", "err", err)
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
	r.checkpoints = dep.Checkpointing != nil
	w.mu.Unlock()
	go func() {
		run, err := w.start(jctx, job, dep, d)
		if err == nil {
			w.mu.Lock()
			r.run = run
			w.mu.Unlock()
			w.kick() // the next answer repeats the checkpoint in flight, if any
			_, err = run.Wait()
		}
		w.mu.Lock()
		r.err = err
		w.ended[d.GetJobId()] = job.Stats()
		canceled := r.canceled // written by apply and cancelAll under w.mu
		w.mu.Unlock()
		close(r.done)
		cancel()
		if err != nil && !canceled {
			opLog.Error("deployment failed", "err", err)
		} else {
			log.Info("deployment ended")
		}
		w.kick()
	}()
}

// start starts a deployment; when it restores, it first reads the
// checkpoint manifest it restores from. A manifest that cannot be read
// fails the deployment with a checkpoint.RestoreError naming the
// checkpoint the leader said it is (Deployment.restore_checkpoint), which
// the task reports tell the leader, so that it restores the next attempt
// from the checkpoint before.
func (w *Worker) start(ctx context.Context, job *dataflow.Job, dep dataflow.Deployment, d *eddyv1.Deployment) (*dataflow.Running, error) {
	if key := d.GetRestoreFrom(); key != "" && dep.Checkpointing != nil {
		id := int64(d.GetRestoreCheckpoint())
		m, err := checkpoint.ReadManifest(ctx, dep.Checkpointing.Store, key)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, err
		case err != nil:
			return nil, &checkpoint.RestoreError{Checkpoint: id, Err: err}
		case id != 0 && m.Checkpoint != id:
			return nil, &checkpoint.RestoreError{Checkpoint: id, Err: fmt.Errorf("checkpoint manifest %s is of checkpoint %d", key, m.Checkpoint)}
		}
		cp := *dep.Checkpointing
		cp.Restore = m
		dep.Checkpointing = &cp
	}
	return job.StartDeployment(ctx, dep, w.exchange)
}

// checkpointing sets up the checkpoints of a deployment: nil for a job that
// does not checkpoint (its sinks then write as without checkpoints) and
// does not restore.
func (w *Worker) checkpointing(ctx context.Context, d *eddyv1.Deployment, spec *jobspec.Spec) (*dataflow.Checkpointing, error) {
	url := d.GetCheckpointStorage()
	switch {
	case spec.Checkpoint == nil && d.GetRestoreFrom() == "":
		return nil, nil
	case url == "" && d.GetRestoreFrom() != "":
		return nil, fmt.Errorf("restore from %s: the coordinator named no checkpoint storage for the job", d.GetRestoreFrom())
	case url == "":
		// A coordinator older than checkpoints: run without.
		w.log.Warn("the coordinator named no checkpoint storage: the job runs without checkpoints", "job", d.GetJobId())
		return nil, nil
	}
	st, err := w.store(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage: %w", err)
	}
	tenant := rpc.Tenant(d.GetTenant())
	job, attempt := d.GetJobId(), d.GetAttempt()
	return &dataflow.Checkpointing{
		Store:  st,
		Prefix: checkpoint.JobRoot(tenant, job),
		Ack: func(a dataflow.Ack) {
			w.queueAck(&eddyv1.AckCheckpointRequest{JobId: job, Attempt: attempt, CheckpointId: uint64(a.CheckpointID), TaskId: a.Task,
				ManifestKey: a.Manifest, FullSizeBytes: uint64(max(a.FullSize, 0)), IncrementalSizeBytes: uint64(max(a.Incremental, 0)),
				DurationMs: a.Duration.Milliseconds(), WorkerId: w.cfg.ID, SwapPauseUs: a.SwapPause.Microseconds()})
		},
	}, nil
}

// store returns the checkpoint storage at url, opening it the first time.
func (w *Worker) store(ctx context.Context, url string) (storage.Store, error) {
	w.mu.Lock()
	st := w.stores[url]
	w.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := w.cfg.OpenStorage(ctx, url)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev := w.stores[url]; prev != nil {
		st.Close()
		return prev, nil
	}
	w.stores[url] = st
	return st, nil
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
	// The versions completed hot swaps put in place.
	for _, o := range d.GetOverrides() {
		if err := spec.Override(o.GetNode(), o.GetModule().GetRef(), o.GetConfigJson()); err != nil {
			return nil, dataflow.Deployment{}, fmt.Errorf("swapped node %s: %w", o.GetNode(), err)
		}
		refs[o.GetModule().GetRef()] = o.GetModule()
	}
	opts := w.cfg.Job
	opts.TLS = w.cfg.TLS
	opts.Tenant = rpc.Tenant(d.GetTenant())
	opts.Gate = w.cpu.Tenant(opts.Tenant, d.GetCpuShare())
	opts.StateLimit = int64(d.GetLimits().GetStateBytes())
	opts.Logger = log
	opts.LoadModule = func(ctx context.Context, ref string) (*host.Module, error) {
		m := refs[ref]
		if m == nil {
			return nil, fmt.Errorf("module %s was not resolved by the coordinator", ref)
		}
		return w.module(ctx, d.GetJobId(), m)
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
	if dep.Checkpointing, err = w.checkpointing(ctx, d, spec); err != nil {
		return nil, dataflow.Deployment{}, err
	}
	return job, dep, nil
}

// module returns the compiled module of a pinned reference, fetching its
// bytes from the coordinator the first time and checking their digest.
func (w *Worker) module(ctx context.Context, jobID string, ref *eddyv1.ModuleRef) (*host.Module, error) {
	w.mu.Lock()
	m := w.modules[ref.GetSha256()]
	w.mu.Unlock()
	if m != nil {
		return m, nil
	}
	var wasm []byte
	req := &eddyv1.FetchModuleRequest{WorkerId: w.cfg.ID, InstanceId: w.instance, JobId: jobID, Sha256: ref.GetSha256()}
	var err error
	// Cluster calls go to the leader; a redirect or an unavailable member
	// moves the target, so try once per coordinator.
	for range len(w.cfg.Coordinators) + 1 {
		err = w.call(ctx, func(c eddyv1.ClusterClient) error {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			resp, err := c.FetchModule(cctx, req)
			wasm = resp.GetWasm()
			return err
		})
		if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
			break
		}
	}
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

// instanceLimits are the tenant's bounds of each instance of a deployment
// (its quota, sent with the deployment); every instance its tasks create
// finds them in the deployment's context.
func instanceLimits(l *eddyv1.TaskLimits) host.InstanceLimits {
	return host.InstanceLimits{
		MemoryBytes: l.GetMemoryBytes(),
		CallTimeout: time.Duration(min(l.GetCallTimeoutMs(), uint64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond,
		EmitBytes:   int64(min(l.GetEmitBytes(), math.MaxInt64)),
		EmitRecords: int64(min(l.GetEmitRecords(), math.MaxInt64)),
	}
}
