package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
)

// wasmMagic starts every module the test validator accepts.
var wasmMagic = []byte("\x00asm\x01\x00\x00\x00")

// testValidator stands in for host.Engine: it refuses bytes that are not
// Wasm with a one-line message, as the real validator does.
func testValidator(_ context.Context, name string, wasm []byte) error {
	if !bytes.HasPrefix(wasm, wasmMagic) {
		return fmt.Errorf("module %s: not a WebAssembly binary (bad magic number)", name)
	}
	return nil
}

func wasmModule(body string) []byte { return append(slices.Clone(wasmMagic), body...) }

// testPlanner stands in for dataflow.PlanTasks: one task per parallel
// instance of the job, t0, t1, ...
func testPlanner(spec []byte) ([]string, error) {
	s, err := jobspec.Parse(spec, "")
	if err != nil {
		return nil, err
	}
	var tasks []string
	for i := range max(s.Parallelism, 1) {
		tasks = append(tasks, fmt.Sprintf("t%d", i))
	}
	return tasks, nil
}

// testSpec is a job of parallelism tasks that runs module.
func testSpec(name string, parallelism int, module string) []byte {
	return fmt.Appendf(nil, `name: %s
parallelism: %d
nodes:
  - name: src
    source: {generator: {kind: sequence, count: 10}}
  - name: op
    input: src
    wasm: {module: %s}
  - name: out
    input: op
    sink: {stdout: {}}
`, name, parallelism, module)
}

type clusterOpts struct {
	heartbeatTimeout time.Duration
	restart          RestartStrategy
}

func defaultOpts() clusterOpts {
	return clusterOpts{
		heartbeatTimeout: 5 * time.Second,
		restart:          RestartStrategy{Kind: RestartFixed, Delay: 200 * time.Millisecond, MaxAttempts: 5},
	}
}

// testConfig configures a coordinator on 127.0.0.1 with free ports.
func testConfig(t testing.TB, logger *slog.Logger, id string, opts clusterOpts) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.APIAddr = "127.0.0.1:0"
	cfg.Raft.BindAddr = "127.0.0.1:0"
	cfg.Raft.DataDir = t.TempDir()
	// As short as is safe on a loaded two-core machine.
	cfg.Raft.HeartbeatTimeout = 500 * time.Millisecond
	cfg.Raft.ElectionTimeout = 500 * time.Millisecond
	cfg.Raft.LeaderLeaseTimeout = 500 * time.Millisecond
	cfg.Raft.WALSegmentSize = 1 << 20
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.HeartbeatTimeout = opts.heartbeatTimeout
	cfg.Restart = opts.restart
	cfg.JoinTimeout = 30 * time.Second
	cfg.Logger = logger.With("node", id)
	cfg.BootstrapToken = testAdminToken
	cfg.JoinToken = testAdminToken
	return cfg
}

// testAdminToken is the bootstrap admin token of every test cluster.
var testAdminToken = "eddy_" + strings.Repeat("a", 16) + "_" + strings.Repeat("5", 64)

func startCoordinator(t testing.TB, cfg Config, store ModuleStore) *Coordinator {
	t.Helper()
	c, err := New(cfg, Deps{Store: store, Validator: testValidator, Planner: testPlanner})
	if err != nil {
		t.Fatalf("new %s: %v", cfg.NodeID, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	t.Cleanup(c.Stop)
	return c
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, rpc.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// control is a Control client with the admin token.
func control(t testing.TB, addr string) eddyv1.ControlClient {
	return controlAs(t, addr, testAdminToken)
}

// controlAs is a Control client that sends token ("": none).
func controlAs(t testing.TB, addr, token string) eddyv1.ControlClient {
	t.Helper()
	opts := rpc.DialOptions()
	if token != "" {
		opts = append(opts, rpc.WithToken(token))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return eddyv1.NewControlClient(cc)
}

func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode checks a call's status code and that its message contains
// every one of parts.
func wantCode(t testing.TB, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Fatalf("message %q does not contain %q", st.Message(), p)
		}
	}
}

func jobStatusOf(t testing.TB, cl eddyv1.ControlClient, id string) *eddyv1.JobStatusResponse {
	t.Helper()
	st, err := cl.JobStatus(callCtx(t), &eddyv1.JobStatusRequest{JobId: id})
	if err != nil {
		t.Fatalf("status of %s: %v", id, err)
	}
	return st
}

// waitJob polls JobStatus until the job is in state (and cond, if given,
// holds), and returns that status.
func waitJob(t testing.TB, cl eddyv1.ControlClient, id string, state eddyv1.JobState, timeout time.Duration, cond func(*eddyv1.JobStatusResponse) bool) *eddyv1.JobStatusResponse {
	t.Helper()
	var (
		last    *eddyv1.JobStatusResponse
		lastErr error
	)
	defer func() { // also when Eventually fails the test: it says why
		if t.Failed() {
			t.Logf("job %s: last status %v, error %v", id, last, lastErr)
		}
	}()
	testkit.Eventually(t, timeout, fmt.Sprintf("job %s to be %s", id, state), func() bool {
		st, err := cl.JobStatus(callCtx(t), &eddyv1.JobStatusRequest{JobId: id})
		if lastErr = err; err != nil {
			return false
		}
		last = st
		return st.GetJob().GetState() == state && (cond == nil || cond(st))
	})
	return last
}

// fakeWorker speaks the worker's side of Cluster the way the proto
// describes it, without running anything: a deployed task is RUNNING at
// once, and the test moves it on with setState.
type fakeWorker struct {
	t        testing.TB
	id       string
	instance string
	dataAddr string
	slots    uint32
	// keepTasksOnNotFound makes the worker disobey NOT_FOUND (it does not
	// cancel its tasks), as a worker whose tasks are slow to stop would
	// look: the leader must then cancel them by instruction.
	keepTasksOnNotFound bool
	// wait, when set, asks the leader to hold each heartbeat while its
	// state is at the index of the previous answer, as the real worker
	// does.
	wait time.Duration

	mu          sync.Mutex
	stateIndex  uint64   // of the latest answer
	known       []string // coordinator API addresses, in the order learned
	target      string   // where the next call goes
	paused      bool
	tasks       map[taskKey]*eddyv1.TaskReport
	deployments []*eddyv1.Deployment
	cancels     []taskKey
	cancelJobs  []string
	notFound    int
	redirects   int
	beats       int // heartbeats answered
	conns       map[string]*grpc.ClientConn
	// onTrigger, when set, is called (from the heartbeat loop, without the
	// lock) once for every checkpoint a heartbeat answer triggers; the
	// test acknowledges it as the worker's tasks would.
	onTrigger func(*eddyv1.CheckpointTrigger)
	triggered map[string]bool   // "job/attempt/id" of the triggers seen
	completed map[string]uint64 // "job/attempt" → latest checkpoint announced as completed
	// onPrepare, when set, decides the outcome of each swap a heartbeat
	// answer asks the worker to prepare (once per swap); without it every
	// swap is prepared. prepared holds the outcomes reported.
	onPrepare func(*eddyv1.SwapPrepare) (ok bool, reason string)
	prepared  map[string]*eddyv1.SwapPrepared // "job/attempt/swap"
	prepares  []*eddyv1.SwapPrepare
}

func newFakeWorker(t testing.TB, id string, slots uint32, coordinators ...string) *fakeWorker {
	w := &fakeWorker{
		t: t, id: id, instance: id + "-instance-1", dataAddr: "127.0.0.1:9" + id[len(id)-1:], slots: slots,
		known: slices.Clone(coordinators), target: coordinators[0],
		tasks: map[taskKey]*eddyv1.TaskReport{}, conns: map[string]*grpc.ClientConn{},
		triggered: map[string]bool{}, completed: map[string]uint64{}, prepared: map[string]*eddyv1.SwapPrepared{},
	}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, cc := range w.conns {
			cc.Close()
		}
	})
	return w
}

func (w *fakeWorker) conn(addr string) eddyv1.ClusterClient {
	w.mu.Lock()
	defer w.mu.Unlock()
	cc, ok := w.conns[addr]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(addr, rpc.DialOptions()...); err != nil {
			w.t.Error(err)
		}
		w.conns[addr] = cc
	}
	return eddyv1.NewClusterClient(cc)
}

// call makes one Cluster call, following NotLeader redirects; when the
// coordinator is unreachable or knows no leader it moves on to the next
// known coordinator for the next call.
func (w *fakeWorker) call(ctx context.Context, fn func(context.Context, eddyv1.ClusterClient) error) error {
	for range 5 {
		w.mu.Lock()
		target := w.target
		w.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second+w.wait)
		err := fn(cctx, w.conn(target))
		cancel()
		if err == nil {
			return nil
		}
		if nl, ok := rpc.LeaderFromError(err); ok && nl.GetLeaderAddress() != "" && nl.GetLeaderAddress() != target {
			w.mu.Lock()
			w.redirects++
			w.target = nl.GetLeaderAddress()
			if !slices.Contains(w.known, w.target) {
				w.known = append(w.known, w.target)
			}
			w.mu.Unlock()
			continue
		}
		if c := status.Code(err); c == codes.Unavailable || c == codes.DeadlineExceeded {
			w.mu.Lock()
			i := slices.Index(w.known, target)
			w.target = w.known[(i+1)%len(w.known)]
			w.mu.Unlock()
		}
		return err
	}
	return errors.New("too many redirects")
}

func (w *fakeWorker) register(ctx context.Context) error {
	return w.call(ctx, func(ctx context.Context, cl eddyv1.ClusterClient) error {
		resp, err := cl.RegisterWorker(ctx, &eddyv1.RegisterWorkerRequest{
			WorkerId: w.id, InstanceId: w.instance, DataAddress: w.dataAddr, Slots: w.slots, Version: "test",
		})
		if err == nil && !resp.GetAccepted() {
			return fmt.Errorf("refused: %s", resp.GetReason())
		}
		return err
	})
}

// heartbeat makes one heartbeat and applies the answer; on NOT_FOUND it
// cancels its tasks (unless told to keep them) and registers again.
func (w *fakeWorker) heartbeat(ctx context.Context) error {
	w.mu.Lock()
	req := &eddyv1.HeartbeatRequest{WorkerId: w.id, InstanceId: w.instance}
	if w.wait > 0 {
		req.StateIndex, req.WaitMs = w.stateIndex, uint32(w.wait.Milliseconds())
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.tasks), compareKeys) {
		req.Tasks = append(req.Tasks, cloneReport(w.tasks[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(w.prepared)) {
		req.SwapPrepared = append(req.SwapPrepared, w.prepared[k])
	}
	w.mu.Unlock()
	var resp *eddyv1.HeartbeatResponse
	err := w.call(ctx, func(ctx context.Context, cl eddyv1.ClusterClient) error {
		var err error
		resp, err = cl.Heartbeat(ctx, req)
		return err
	})
	if status.Code(err) == codes.NotFound {
		w.mu.Lock()
		w.notFound++
		if !w.keepTasksOnNotFound {
			for _, r := range w.tasks {
				if !terminalTask(r.GetState()) {
					r.State = canceled
				}
			}
		}
		w.mu.Unlock()
		return w.register(ctx)
	}
	if err != nil {
		return err
	}
	triggers := w.apply(resp)
	w.mu.Lock()
	hook := w.onTrigger
	w.mu.Unlock()
	if hook != nil {
		for _, tr := range triggers {
			hook(tr)
		}
	}
	return nil
}

// apply carries out a heartbeat answer and returns the checkpoint triggers
// it sees for the first time.
func (w *fakeWorker) apply(resp *eddyv1.HeartbeatResponse) []*eddyv1.CheckpointTrigger {
	w.mu.Lock()
	defer w.mu.Unlock()
	var triggers []*eddyv1.CheckpointTrigger
	for _, tr := range resp.GetTriggerCheckpoints() {
		k := fmt.Sprintf("%s/%d/%d", tr.GetJobId(), tr.GetAttempt(), tr.GetCheckpointId())
		if !w.triggered[k] {
			w.triggered[k] = true
			triggers = append(triggers, tr)
		}
	}
	for _, sp := range resp.GetPrepareSwaps() {
		k := fmt.Sprintf("%s/%d/%d", sp.GetJobId(), sp.GetAttempt(), sp.GetSwapId())
		if w.prepared[k] == nil {
			w.prepares = append(w.prepares, sp)
			ok, reason := true, ""
			if w.onPrepare != nil {
				ok, reason = w.onPrepare(sp)
			}
			w.prepared[k] = &eddyv1.SwapPrepared{JobId: sp.GetJobId(), Attempt: sp.GetAttempt(), SwapId: sp.GetSwapId(), Ok: ok, Reason: reason}
		}
	}
	for _, c := range resp.GetCompletedCheckpoints() {
		k := fmt.Sprintf("%s/%d", c.GetJobId(), c.GetAttempt())
		w.completed[k] = max(w.completed[k], c.GetCheckpointId())
	}
	w.beats++
	w.stateIndex = resp.GetStateIndex()
	for _, d := range resp.GetDeployments() {
		w.deployments = append(w.deployments, d)
		for _, task := range d.GetTaskIds() {
			k := taskKey{d.GetJobId(), int(d.GetAttempt()), task}
			if _, ok := w.tasks[k]; !ok {
				w.tasks[k] = &eddyv1.TaskReport{Task: k.ref(), State: running, Metrics: &eddyv1.TaskMetrics{}}
			}
		}
	}
	for _, ref := range resp.GetCancelTasks() {
		k := keyOf(ref)
		w.cancels = append(w.cancels, k)
		if r, ok := w.tasks[k]; ok && !terminalTask(r.GetState()) {
			r.State = canceled
		}
	}
	for _, job := range resp.GetCancelJobs() {
		w.cancelJobs = append(w.cancelJobs, job)
		for k, r := range w.tasks {
			if k.job == job && !terminalTask(r.GetState()) {
				r.State = canceled
			}
		}
	}
	for _, ref := range resp.GetReleased() {
		delete(w.tasks, keyOf(ref))
	}
	// Running tasks make progress.
	for _, r := range w.tasks {
		if r.GetState() == running {
			r.Metrics.RecordsIn += 10
			r.Metrics.RecordsOut += 5
		}
	}
	return triggers
}

// setOnTrigger sets (or, with nil, clears) the checkpoint hook.
func (w *fakeWorker) setOnTrigger(fn func(*eddyv1.CheckpointTrigger)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onTrigger = fn
}

// completedCheckpoint is the latest checkpoint of a job attempt announced
// to the worker as completed.
func (w *fakeWorker) completedCheckpoint(job string, attempt int) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.completed[fmt.Sprintf("%s/%d", job, attempt)]
}

// tasksOf lists the tasks of a job attempt the worker holds, sorted.
func (w *fakeWorker) tasksOf(job string, attempt int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range w.tasks {
		if k.job == job && k.attempt == attempt {
			out = append(out, k.task)
		}
	}
	slices.Sort(out)
	return out
}

func cloneReport(r *eddyv1.TaskReport) *eddyv1.TaskReport {
	c := &eddyv1.TaskReport{Task: r.GetTask(), State: r.GetState(), Error: r.GetError(), FailedRestoreCheckpoint: r.GetFailedRestoreCheckpoint()}
	if m := r.GetMetrics(); m != nil {
		c.Metrics = &eddyv1.TaskMetrics{RecordsIn: m.GetRecordsIn(), RecordsOut: m.GetRecordsOut()}
	}
	return c
}

// run registers and then heartbeats every interval until ctx ends; while
// paused it stays silent.
func (w *fakeWorker) run(ctx context.Context, interval time.Duration) {
	for {
		if err := w.register(ctx); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		paused := w.paused
		w.mu.Unlock()
		if !paused {
			_ = w.heartbeat(ctx) // a failed heartbeat is retried at the next tick
		}
	}
}

// start runs the worker until the test ends.
func (w *fakeWorker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, 100*time.Millisecond)
	}()
	w.t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (w *fakeWorker) pause(p bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = p
}

// setState moves every task of a job attempt the worker holds to state.
func (w *fakeWorker) setState(job string, attempt int, state eddyv1.TaskState, errMsg string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k, r := range w.tasks {
		if k.job == job && k.attempt == attempt {
			r.State = state
			r.Error = errMsg
			n++
		}
	}
	return n
}

// failRestore fails every task of a job attempt as a worker does that
// cannot restore it from checkpoint id.
func (w *fakeWorker) failRestore(job string, attempt int, id uint64, errMsg string) int {
	n := w.setState(job, attempt, eddyv1.TaskState_TASK_STATE_FAILED, errMsg)
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, r := range w.tasks {
		if k.job == job && k.attempt == attempt {
			r.FailedRestoreCheckpoint = id
		}
	}
	return n
}

// held returns the worker's tasks and their states, "job/attempt/task=STATE", sorted.
func (w *fakeWorker) held() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k, r := range w.tasks {
		out = append(out, fmt.Sprintf("%s/%d/%s=%s", k.job, k.attempt, k.task, strings.TrimPrefix(r.GetState().String(), "TASK_STATE_")))
	}
	slices.Sort(out)
	return out
}

func (w *fakeWorker) holds(job string, attempt int, state eddyv1.TaskState) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k, r := range w.tasks {
		if k.job == job && k.attempt == attempt && r.GetState() == state {
			n++
		}
	}
	return n
}

func (w *fakeWorker) stats() (deployments, notFound, redirects, beats int, cancels []taskKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.deployments), w.notFound, w.redirects, w.beats, slices.Clone(w.cancels)
}

func (w *fakeWorker) lastDeployment(job string) *eddyv1.Deployment {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.deployments) - 1; i >= 0; i-- {
		if w.deployments[i].GetJobId() == job {
			return w.deployments[i]
		}
	}
	return nil
}
