package dataflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// TaskSpec is one task of a job: one parallel instance (subtask) of a
// chain of nodes that run as plain calls in one goroutine. The coordinator
// places tasks by ID; every process derives the same tasks from the same
// spec (PlanTasks), so ids agree across workers.
type TaskSpec struct {
	// ID is "<head node name>[<subtask>]", such as "per_card[3]": node
	// names are unique within a spec.
	ID string
	// Chain is the names of the chained nodes, head first.
	Chain       []string
	Subtask     int
	Parallelism int
}

// PlanTasks returns the tasks of spec, in a deterministic order: chains in
// topological order, subtasks in order within a chain. It loads nothing:
// the coordinator calls it to place a job before any worker runs it.
func PlanTasks(spec *jobspec.Spec) ([]TaskSpec, error) {
	_, chains, err := plan(spec)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", spec.Name, err)
	}
	return taskSpecs(chains), nil
}

// Tasks returns the job's tasks, as PlanTasks does.
func (j *Job) Tasks() []TaskSpec { return taskSpecs(j.chains) }

func taskSpecs(chains []*chain) []TaskSpec {
	var out []TaskSpec
	for _, c := range chains {
		names := make([]string, len(c.vertices))
		for i, v := range c.vertices {
			names[i] = v.node.Name
		}
		for s := 0; s < c.parallelism; s++ {
			out = append(out, TaskSpec{ID: c.taskID(s), Chain: names, Subtask: s, Parallelism: c.parallelism})
		}
	}
	return out
}

// Deployment is one worker's share of one attempt of a job: which of the
// job's tasks run here, and where every task runs, so that each channel
// between tasks is either a local queue or an Exchange stream.
type Deployment struct {
	// JobID and Attempt name the job attempt cluster-wide; channels of
	// different attempts never meet. A restarted job gets a higher
	// attempt, and an Exchange refuses channels of older attempts.
	JobID   string
	Attempt int64
	// Tasks are the ids (TaskSpec.ID) of the tasks this call runs.
	Tasks []string
	// Addresses maps every task id of the attempt to the data address
	// (host:port of the Exchange server) of the worker running it.
	// Required for every consumer of a local task that is not in Tasks;
	// used in error messages for producers of local tasks.
	Addresses map[string]string
	// Self is this worker's data address. When set, Addresses must not
	// place a task of Tasks elsewhere.
	Self string
	// Checkpointing, when set, makes the tasks take the checkpoints that
	// Running.Trigger starts, and restore from one. nil: no checkpoints,
	// and sinks write as they always did.
	Checkpointing *Checkpointing
}

// ErrInvalidDeployment marks a Deployment that does not fit the job.
var ErrInvalidDeployment = errors.New("dataflow: invalid deployment")

// TaskState is the life-cycle state of a task in TaskStat.
type TaskState string

const (
	// TaskDeploying: opening operators, state and output channels (which
	// waits for remote consumers to be deployed).
	TaskDeploying TaskState = "deploying"
	TaskRunning   TaskState = "running"
	// TaskFinished: the inputs ended and every output was delivered.
	TaskFinished TaskState = "finished"
	// TaskFailed: the task stopped with an error (TaskStat.Error).
	TaskFailed TaskState = "failed"
	// TaskCanceled: stopped because the run was cancelled or another task
	// of the run failed.
	TaskCanceled TaskState = "canceled"
)

// TaskStat is a snapshot of one task's live metrics.
type TaskStat struct {
	ID    string
	State TaskState
	// Error is the task's error, one line, when State is TaskFailed; Err
	// is the error itself, for errors.Is and errors.As (a
	// *checkpoint.RestoreError names the checkpoint it could not restore).
	Error string
	Err   error
	// RecordsIn are the records the task read from its input gate (for a
	// source task: that its source produced); RecordsOut the records it
	// delivered to output channels (once per edge) plus those it handed
	// to a sink.
	RecordsIn, RecordsOut int64
	// Backpressured is the time the task spent blocked delivering to a
	// full local queue or waiting for credits of a remote consumer, and
	// BackpressureRatio is its share of the task's run time so far, in
	// [0, 1]. A caller wanting a ratio over an interval takes differences
	// of Backpressured.
	Backpressured     time.Duration
	BackpressureRatio float64
	// Watermark is the task's event-time watermark: math.MinInt64 before
	// the first, math.MaxInt64 once its inputs ended.
	Watermark int64
	// PendingRecords are the records waiting for the task's source
	// (PendingReporter); -1 when it has none or cannot tell.
	PendingRecords int64

	// Node is the first node of the task's chain and Subtask its index:
	// with the job, what the task's metrics are labelled by.
	Node    string
	Subtask int
	// BytesIn and BytesOut are the key and value bytes of the records
	// counted by RecordsIn and RecordsOut.
	BytesIn, BytesOut int64
	// Idle is the time the task waited for input on its input gate (0 for
	// a source task: a source's waits are its own), Busy the rest of its
	// run time that it was neither idle nor backpressured: Flink's
	// idle/busy/backPressured time.
	Idle, Busy time.Duration
	// InputWatermark is the minimum of the watermarks of the task's
	// active input channels (math.MinInt64 before one of each); for a
	// source task, the watermark it generates, as Watermark.
	InputWatermark int64
	// LateDropped counts records dropped as late by the chain's windows
	// (those without a late_output).
	LateDropped int64
}

// taskMetrics are the live counters behind TaskStat, written by the task's
// goroutine and read by any.
type taskMetrics struct {
	id           string
	state        atomic.Pointer[TaskState]
	err          atomic.Pointer[error]
	in, out      atomic.Int64
	blocked      atomic.Int64 // ns, completed waits
	blockedSince atomic.Int64 // unix ns of the wait in progress, 0 if none
	start, end   atomic.Int64 // unix ns; end 0 while running
	watermark    atomic.Int64
	pending      atomic.Int64 // -1: unknown

	node              string
	subtask           int
	hasInput          bool // reads an input gate (not a source task)
	bytesIn, bytesOut atomic.Int64
	idle              atomic.Int64 // ns, completed waits for input
	idleSince         atomic.Int64 // unix ns of the wait in progress, 0 if none
	inWatermark       atomic.Int64
	late              atomic.Int64
}

func newTaskMetrics(id, node string, subtask int, hasInput bool) *taskMetrics {
	m := &taskMetrics{id: id, node: node, subtask: subtask, hasInput: hasInput}
	m.setState(TaskDeploying)
	m.start.Store(time.Now().UnixNano())
	m.watermark.Store(math.MinInt64)
	m.inWatermark.Store(math.MinInt64)
	m.pending.Store(-1)
	return m
}

func (m *taskMetrics) setState(s TaskState) { m.state.Store(&s) }

// blockStart and blockEnd bracket a wait for room downstream.
func (m *taskMetrics) blockStart() { m.blockedSince.Store(time.Now().UnixNano()) }

func (m *taskMetrics) blockEnd() {
	since := m.blockedSince.Swap(0)
	if since != 0 {
		m.blocked.Add(time.Now().UnixNano() - since)
	}
}

// idleStart and idleEnd bracket a wait for input.
func (m *taskMetrics) idleStart() { m.idleSince.Store(time.Now().UnixNano()) }

func (m *taskMetrics) idleEnd() {
	since := m.idleSince.Swap(0)
	if since != 0 {
		m.idle.Add(time.Now().UnixNano() - since)
	}
}

func (m *taskMetrics) stat() TaskStat {
	now := time.Now().UnixNano()
	blocked := m.blocked.Load()
	if since := m.blockedSince.Load(); since != 0 && since < now {
		blocked += now - since
	}
	idle := m.idle.Load()
	if since := m.idleSince.Load(); since != 0 && since < now {
		idle += now - since
	}
	end := m.end.Load()
	if end == 0 {
		end = now
	}
	ratio := 0.0
	run := end - m.start.Load()
	if run > 0 {
		ratio = min(1, max(0, float64(blocked)/float64(run)))
	}
	inWM := m.inWatermark.Load()
	if !m.hasInput {
		inWM = m.watermark.Load()
	}
	st := TaskStat{ID: m.id, State: *m.state.Load(), RecordsIn: m.in.Load(), RecordsOut: m.out.Load(),
		Backpressured: time.Duration(blocked), BackpressureRatio: ratio, Watermark: m.watermark.Load(), PendingRecords: m.pending.Load(),
		Node: m.node, Subtask: m.subtask, BytesIn: m.bytesIn.Load(), BytesOut: m.bytesOut.Load(),
		Idle: time.Duration(idle), Busy: time.Duration(max(0, run-idle-blocked)), InputWatermark: inWM, LateDropped: m.late.Load()}
	if e := m.err.Load(); e != nil {
		st.Error, st.Err = (*e).Error(), *e
	}
	return st
}

// TaskStats snapshots the tasks of the current (or last) run of the job in
// this process: every task for Run, the deployment's tasks for
// RunDeployment. Safe to call from any goroutine while the job runs; nil
// before the first run.
func (j *Job) TaskStats() []TaskStat {
	ms := j.taskMetrics.Load()
	if ms == nil {
		return nil
	}
	out := make([]TaskStat, len(*ms))
	for i, m := range *ms {
		out[i] = m.stat()
	}
	return out
}

// localDeployment is every task of j in this process, as Run runs them.
func (j *Job) localDeployment() Deployment {
	d := Deployment{JobID: j.id}
	for _, c := range j.chains {
		for s := 0; s < c.parallelism; s++ {
			d.Tasks = append(d.Tasks, c.taskID(s))
		}
	}
	return d
}

// deployment is a Deployment resolved against the job graph.
type deployment struct {
	Deployment
	attempt uint32
	local   map[string]bool
	// gates are the input gates of local consumer tasks, by task id.
	gates map[string]*inputGate
	// exchange: some local consumer has a producer elsewhere.
	needsExchange bool
}

func (j *Job) resolve(d Deployment) (*deployment, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: job %s: %s", ErrInvalidDeployment, j.spec.Name, fmt.Sprintf(format, args...))
	}
	if d.Attempt < 0 || d.Attempt > math.MaxUint32 {
		return nil, bad("attempt %d is out of range", d.Attempt)
	}
	if len(d.Tasks) == 0 {
		return nil, bad("no tasks to run")
	}
	if d.Checkpointing != nil {
		if err := d.Checkpointing.validate(); err != nil {
			return nil, bad("%v", err)
		}
	}
	r := &deployment{Deployment: d, attempt: uint32(d.Attempt), local: map[string]bool{}, gates: map[string]*inputGate{}}
	known := map[string]bool{}
	for _, c := range j.chains {
		for s := 0; s < c.parallelism; s++ {
			known[c.taskID(s)] = true
		}
	}
	for _, id := range d.Tasks {
		switch {
		case !known[id]:
			return nil, bad("unknown task %q", id)
		case r.local[id]:
			return nil, bad("task %q is listed twice", id)
		case d.Self != "" && d.Addresses[id] != "" && d.Addresses[id] != d.Self:
			return nil, bad("task %q runs here (%s) but its address is %s", id, d.Self, d.Addresses[id])
		}
		r.local[id] = true
	}
	for _, c := range j.chains {
		for s := 0; s < c.parallelism; s++ {
			id := c.taskID(s)
			if !r.local[id] {
				continue
			}
			// Consumers this task sends to.
			for _, o := range c.outputs {
				for t := 0; t < o.to.parallelism; t++ {
					if o.mode == forward && t != s {
						continue
					}
					if cid := o.to.taskID(t); !r.local[cid] && d.Addresses[cid] == "" {
						return nil, bad("task %s sends to task %s, which has no address", id, cid)
					}
				}
			}
			if c.head().node.Source != nil {
				continue
			}
			g := newInputGate(id, j.opts.QueueCapacity)
			for _, u := range j.chains {
				for _, o := range u.outputs {
					if o.to != c {
						continue
					}
					for p := 0; p < u.parallelism; p++ {
						if o.mode == forward && p != s {
							continue
						}
						pid := u.taskID(p)
						if r.local[pid] {
							continue
						}
						g.remote[o.channel(p)] = remoteInput{producer: pid, edge: o.edge(), addr: d.Addresses[pid]}
						r.needsExchange = true
					}
				}
			}
			r.gates[id] = g
		}
	}
	if r.needsExchange && d.JobID == "" {
		return nil, bad("a job id is required for channels between workers")
	}
	return r, nil
}

// Run executes the job until its sources end and everything is flushed, or
// until ctx is cancelled (then the summary covers what ran and the error is
// ctx's), or until a task fails (then every task stops and the error names
// the task). Every task runs in this process, connected by local queues.
func (j *Job) Run(ctx context.Context) (*Summary, error) {
	return j.RunDeployment(ctx, j.localDeployment(), nil)
}

// RunDeployment runs the tasks of d in this process, until they end, ctx
// is cancelled or one of them fails, as Run does for a whole job. It is
// StartDeployment followed by Running.Wait.
//
// A channel between two tasks of d is a local queue. A channel from a task
// of d to a consumer elsewhere is an Exchange Transfer stream to
// d.Addresses[consumer], opened by the producing task before it starts
// (retried with backoff while the consumer's worker answers UNAVAILABLE,
// i.e. has not deployed it yet, for as long as ctx allows) and written by
// the producing task's own goroutine, which blocks while it has no credit:
// that is the backpressure. A channel from a producer elsewhere reaches a
// task of d through ex: RunDeployment registers the input gates of its
// consumer tasks with ex (by d.JobID, d.Attempt and task id) before
// starting any task, and unregisters them when it returns. ex may be nil
// when no task of d has a producer elsewhere.
//
// A broken channel (a peer worker killed, or its task stopped) fails the
// tasks involved with an error wrapping ErrChannelLost and naming the
// peer's address, and so the run. Client connections are pooled by
// address for the run and closed when it returns.
//
// A producer keeps retrying a consumer that is not deployed (its task
// stays TaskDeploying) until ctx ends: deciding that a peer is gone for
// good is the coordinator's job, which then cancels ctx.
//
// Per-node counters (Stats, the Summary) and TaskStats cover the tasks of
// d only. A Job runs one deployment at a time. A d that does not fit the
// job is refused with an error wrapping ErrInvalidDeployment and a nil
// Summary, before anything runs.
func (j *Job) RunDeployment(ctx context.Context, d Deployment, ex *Exchange) (*Summary, error) {
	r, err := j.StartDeployment(ctx, d, ex)
	if err != nil {
		return nil, err
	}
	return r.Wait()
}

// Running is a deployment that StartDeployment started. Its methods are
// safe for concurrent use.
type Running struct {
	job  *Job
	cp   *Checkpointing
	done chan struct{}
	sum  *Summary // set before done is closed
	err  error

	// sources are the mailboxes of the tasks that take triggers (a source
	// at their head), completions those of the tasks that hear of
	// completed checkpoints (a source at their head, which may be a
	// CheckpointListener, or a sink at their tail), each once.
	sources, completions []*mailbox
	// swaps are the swap slots of the deployment's tasks by node: one per
	// local task of each Wasm node (swap.go).
	swaps map[string][]*swapSlot

	mu        sync.Mutex
	triggered int64
}

// StartDeployment starts the tasks of d as RunDeployment does and returns
// at once; Wait returns what RunDeployment would.
//
// With d.Checkpointing.Restore set, it first reads every task manifest of
// that checkpoint: one that is missing or corrupt fails it with a
// *checkpoint.RestoreError (matching checkpoint.ErrRestore), a checkpoint
// that does not fit the job (a source's parallelism or the max
// parallelism changed) with an error matching checkpoint.ErrIncompatible,
// before anything runs. The tasks then restore their keyed state (by
// key-group range, from the state of any old task overlapping it: the
// parallelism of keyed nodes may change), seek their sources and bring
// their sinks' output back to the checkpoint; a state file that cannot be
// read fails the run (Wait, and the task's TaskStat.Err) with a
// *checkpoint.RestoreError.
func (j *Job) StartDeployment(ctx context.Context, d Deployment, ex *Exchange) (*Running, error) {
	start := time.Now()
	dep, err := j.resolve(d)
	if err != nil {
		return nil, err
	}
	if dep.needsExchange && ex == nil {
		return nil, fmt.Errorf("%w: job %s: tasks here have producers on other workers, which needs an Exchange", ErrInvalidDeployment, j.spec.Name)
	}
	cp := d.Checkpointing
	var restore *restorePoint
	if cp != nil && cp.Restore != nil {
		if restore, err = j.loadRestorePoint(ctx, cp); err != nil {
			return nil, err
		}
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)

	var (
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() {
			firstErr = err
			cancel(err)
		})
	}
	pool := j.opts.TLS.NewPool() // one connection per peer for this run
	r := &Running{job: j, cp: cp, done: make(chan struct{})}
	var taskSwaps map[string]map[string]*swapSlot
	r.swaps, taskSwaps = j.swapSlots(dep)

	var tasks []*task
	var metrics []*taskMetrics
	for _, c := range j.chains {
		for i := 0; i < c.parallelism; i++ {
			id := c.taskID(i)
			if !dep.local[id] {
				continue
			}
			t := &task{job: j, chain: c, subtask: i, id: id, dep: dep, pool: pool, metrics: newTaskMetrics(id, c.head().node.Name, i, dep.gates[id] != nil), input: dep.gates[id],
				cp: cp, restore: restore, swaps: taskSwaps[id]}
			if t.input != nil {
				t.input.onFail = fail
				t.input.runDone = ctx.Done()
				t.input.taskName = t.displayName()
			}
			if cp != nil {
				t.mailbox = newMailbox()
				if c.head().node.Source != nil {
					r.sources = append(r.sources, t.mailbox)
				}
				if c.head().node.Source != nil || c.tail().node.Sink != nil {
					r.completions = append(r.completions, t.mailbox)
				}
			}
			tasks = append(tasks, t)
			metrics = append(metrics, t.metrics)
		}
	}
	j.taskMetrics.Store(&metrics)
	if ex != nil && len(dep.gates) > 0 {
		if err := ex.register(dep); err != nil {
			cancel(nil)
			pool.Close()
			return nil, fmt.Errorf("job %s: %w", j.spec.Name, err)
		}
	}
	var wg sync.WaitGroup
	for _, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.run(ctx); err != nil {
				fail(err)
			}
		}()
	}
	go func() {
		wg.Wait()
		if ex != nil && len(dep.gates) > 0 {
			ex.unregister(dep)
		}
		pool.Close()
		cancel(nil)
		r.sum = &Summary{Job: j.spec.Name, Nodes: j.Stats(), Elapsed: time.Since(start)}
		switch {
		case parent.Err() != nil:
			r.err = parent.Err()
		case firstErr != nil:
			r.err = &jobError{job: j.spec.Name, err: firstErr}
		}
		close(r.done)
	}()
	return r, nil
}

// Wait waits until the deployment's tasks ended and returns what
// RunDeployment returns.
func (r *Running) Wait() (*Summary, error) {
	<-r.done
	return r.sum, r.err
}

// Done is closed when the deployment's tasks ended.
func (r *Running) Done() <-chan struct{} { return r.done }

// Trigger starts checkpoint t.ID at the deployment's source tasks: each
// injects a barrier between two batches. A deployment without source
// tasks has nothing to do; one whose sources ended never acknowledges. An
// id at or below one already triggered is ignored (heartbeats may repeat
// a trigger). It fails only when the deployment does not checkpoint or
// the id is not positive.
func (r *Running) Trigger(t Trigger) error {
	if r.cp == nil {
		return fmt.Errorf("job %s: checkpoint %d: the deployment does not checkpoint", r.job.spec.Name, t.ID)
	}
	if t.ID <= 0 {
		return fmt.Errorf("job %s: checkpoint id %d, want > 0", r.job.spec.Name, t.ID)
	}
	if t.SwapNode != "" {
		if err := r.job.checkSwapNode(t.SwapNode); err != nil {
			return fmt.Errorf("job %s: checkpoint %d: swap %d: %w", r.job.spec.Name, t.ID, t.SwapID, err)
		}
		if t.SwapID <= 0 {
			return fmt.Errorf("job %s: checkpoint %d: swap id %d, want > 0", r.job.spec.Name, t.ID, t.SwapID)
		}
		t.Savepoint = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.ID <= r.triggered {
		return nil
	}
	r.triggered = t.ID
	for _, mb := range r.sources {
		mb.trigger(t)
	}
	return nil
}

// Complete tells the deployment's sinks that checkpoint id completed:
// each publishes what it staged for the checkpoints up to id; and its
// sources that are CheckpointListeners. Repeats and completions that
// arrive late are harmless.
func (r *Running) Complete(id int64) {
	for _, mb := range r.completions {
		mb.completed(id)
	}
}
