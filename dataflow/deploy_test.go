package dataflow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/state"
)

// The distributed data plane: one job's tasks split over two "workers" in
// this process, each an Exchange on its own gRPC server on 127.0.0.1, with
// real streams between them.

// testWorker is the data side of one worker process.
type testWorker struct {
	ex   *dataflow.Exchange
	addr string
	srv  *grpc.Server
}

func startWorker(t *testing.T) *testWorker {
	t.Helper()
	lis := testkit.Listen(t)
	w := &testWorker{ex: dataflow.NewExchange(slog.Default()), addr: lis.Addr().String(), srv: grpc.NewServer(rpc.ServerOptions()...)}
	eddyv1.RegisterExchangeServer(w.srv, w.ex)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = w.srv.Serve(lis)
	}()
	t.Cleanup(func() {
		w.srv.Stop()
		<-served
	})
	return w
}

// split places the job's tasks on two workers: task i of PlanTasks on a
// when pick(i, task) says so, else on b.
func split(t *testing.T, spec *jobspec.Spec, a, b *testWorker, attempt int64, pick func(int, dataflow.TaskSpec) bool) (dataflow.Deployment, dataflow.Deployment) {
	t.Helper()
	tasks, err := dataflow.PlanTasks(spec)
	if err != nil {
		t.Fatal(err)
	}
	da := dataflow.Deployment{JobID: spec.Name, Attempt: attempt, Addresses: map[string]string{}, Self: a.addr}
	db := dataflow.Deployment{JobID: spec.Name, Attempt: attempt, Addresses: da.Addresses, Self: b.addr}
	for i, ts := range tasks {
		if pick(i, ts) {
			da.Tasks = append(da.Tasks, ts.ID)
			da.Addresses[ts.ID] = a.addr
		} else {
			db.Tasks = append(db.Tasks, ts.ID)
			da.Addresses[ts.ID] = b.addr
		}
	}
	return da, db
}

type runResult struct {
	sum *dataflow.Summary
	err error
}

func runDeployment(ctx context.Context, job *dataflow.Job, d dataflow.Deployment, ex *dataflow.Exchange) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		sum, err := job.RunDeployment(ctx, d, ex)
		done <- runResult{sum, err}
	}()
	return done
}

// await returns the result of a run, failing the test after timeout.
func await(t *testing.T, what string, done <-chan runResult, timeout time.Duration) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(timeout):
		t.Fatalf("%s did not return within %v", what, timeout)
		return runResult{}
	}
}

const splitJob = `name: split
parallelism: 2
batch_size: 64
state_backend: memory
nodes:
  - name: txns
    source: {generator: {kind: transactions, count: 20000, seed: 7, cards: 300, disorder: 2s}}
    event_time: {max_out_of_orderness: 3s}
  - name: counts
    input: txns
    key_by: card
    wasm: {module: $ROOT/udfs/build/counter-c.wasm}
  - name: counts_out
    input: counts
    sink: {file: {path: $DIR/counts.jsonl}}
  - name: per_card
    input: txns
    key_by: card
    window: {tumbling: 1m}
    aggregate: [count, max(amount)]
  - name: results
    input: per_card
    sink: {file: {path: $DIR/windows.jsonl}}
`

// newSplitJob plans the job writing into dir, with its own state backend,
// as a worker would.
func newSplitJob(t *testing.T, engine *host.Engine, dir string) *dataflow.Job {
	t.Helper()
	spec := parse(t, strings.ReplaceAll(splitJob, "$DIR", dir))
	b, err := state.NewMemory(state.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{
		Connectors:     connectors.Registry{},
		Engine:         engine,
		StateBackends:  func(string) (state.Backend, error) { return b, nil },
		WindowOperator: window.New,
	})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func sortedLines(t *testing.T, path string) []string {
	t.Helper()
	lines := testkit.ReadLines(t, path)
	slices.Sort(lines)
	return lines
}

// TestDeploymentMatchesRun runs a keyed job (a parallel source, a keyed
// Wasm counter and a keyed window, file sinks) split over two workers and
// checks that its output equals the output of Job.Run, with both workers
// deployed together and with the second one deployed a second late.
func TestDeploymentMatchesRun(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	localDir := t.TempDir()
	local := newSplitJob(t, engine, localDir)
	if _, err := local.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantCounts := sortedLines(t, filepath.Join(localDir, "counts.jsonl"))
	wantWindows := sortedLines(t, filepath.Join(localDir, "windows.jsonl"))
	if len(wantCounts) != 20000 || len(wantWindows) < 1000 {
		t.Fatalf("local run: %d counts and %d windows, want 20000 and more than 1000", len(wantCounts), len(wantWindows))
	}
	for _, st := range local.TaskStats() {
		if st.State != dataflow.TaskFinished {
			t.Errorf("local task %s is %s", st.ID, st.State)
		}
	}

	for _, tc := range []struct {
		name  string
		delay time.Duration // before the second worker deploys
	}{
		{"together", 0},
		{"second worker late", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := startWorker(t), startWorker(t)
			jobA, jobB := newSplitJob(t, engine, dir), newSplitJob(t, engine, dir)
			// Alternate tasks: every keyed subtask has one local and one
			// remote producer, in both directions.
			da, db := split(t, jobA.Spec(), a, b, 1, func(i int, _ dataflow.TaskSpec) bool { return i%2 == 0 })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			doneA := runDeployment(ctx, jobA, da, a.ex)
			if tc.delay > 0 {
				// The first worker's producers wait for the second's
				// consumers: its tasks stay deploying, nothing finishes.
				select {
				case r := <-doneA:
					t.Fatalf("worker a returned before worker b was deployed: %v", r.err)
				case <-time.After(tc.delay):
				}
				stats := jobA.TaskStats()
				if stats[0].ID != "txns[0]" || stats[0].State != dataflow.TaskDeploying {
					t.Errorf("source task %s is %s while its consumer is not deployed, want %s", stats[0].ID, stats[0].State, dataflow.TaskDeploying)
				}
			}
			doneB := runDeployment(ctx, jobB, db, b.ex)
			ra, rb := await(t, "worker a", doneA, 60*time.Second), await(t, "worker b", doneB, 60*time.Second)
			if ra.err != nil || rb.err != nil {
				t.Fatalf("worker a: %v; worker b: %v", ra.err, rb.err)
			}
			if got := sortedLines(t, filepath.Join(dir, "counts.jsonl")); !slices.Equal(got, wantCounts) {
				t.Errorf("split run wrote %d counts, different from the local run's %d", len(got), len(wantCounts))
			}
			if got := sortedLines(t, filepath.Join(dir, "windows.jsonl")); !slices.Equal(got, wantWindows) {
				t.Errorf("split run wrote %d window results, different from the local run's %d", len(got), len(wantWindows))
			}
			// Each worker reports its own tasks; together they add up.
			var in, out int64
			for _, stats := range [][]dataflow.TaskStat{jobA.TaskStats(), jobB.TaskStats()} {
				if len(stats) != 3 {
					t.Fatalf("TaskStats has %d tasks, want this worker's 3", len(stats))
				}
				for _, st := range stats {
					if st.State != dataflow.TaskFinished || st.Watermark != math.MaxInt64 {
						t.Errorf("task %s: %s at watermark %d", st.ID, st.State, st.Watermark)
					}
					if strings.HasPrefix(st.ID, "txns[") {
						out += st.RecordsOut
					} else {
						in += st.RecordsIn
					}
				}
			}
			if in != 2*20000 || out != 2*20000 {
				t.Errorf("sources sent %d records and keyed tasks read %d, want %d", out, in, 2*20000)
			}
		})
	}
}

// sinkRecorder collects what the sinks of a test job got.
type sinkRecorder struct {
	mu       sync.Mutex
	values   []string
	produced atomic.Int64
	consumed atomic.Int64
	maxAhead atomic.Int64
	delay    time.Duration
	hold     chan struct{} // when set, Write waits until it is closed
}

type recorderSink struct{ r *sinkRecorder }

func (s recorderSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s recorderSink) Write(ctx context.Context, b *stream.Batch) error {
	if s.r.hold != nil {
		select {
		case <-s.r.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.r.delay > 0 {
		select {
		case <-time.After(s.r.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.r.mu.Lock()
	for _, rec := range b.Records {
		s.r.values = append(s.r.values, string(rec.Value))
	}
	s.r.mu.Unlock()
	c := s.r.consumed.Add(int64(b.Len()))
	if ahead := s.r.produced.Load() - c; ahead > s.r.maxAhead.Load() {
		s.r.maxAhead.Store(ahead)
	}
	return nil
}
func (recorderSink) Finish(context.Context) error { return nil }
func (recorderSink) Close() error                 { return nil }

// fanOutJob is a source of one subtask spreading batches round-robin over
// two sink subtasks: src[0] on one worker, out[0] and out[1] on the other.
const fanOutJob = `name: fan-out
batch_size: 100
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: out
    input: src
    parallelism: 2
    sink: {discard: {}}
`

func newFanOutJob(t *testing.T, r *sinkRecorder, n int64, queue int) *dataflow.Job {
	t.Helper()
	job, err := dataflow.NewJob(context.Background(), parse(t, fanOutJob), dataflow.Options{
		Connectors: testConnectors{
			src:  func() stream.Source { return &countingSource{n: n, produced: &r.produced} },
			sink: func() stream.Sink { return recorderSink{r} },
		},
		QueueCapacity: queue,
	})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func sourceOnA(_ int, ts dataflow.TaskSpec) bool { return ts.Chain[0] == "src" }

// TestDeploymentBackpressure: a slow sink on another worker holds the
// source back to what credits and queues allow, and every record arrives.
// The sinks first hold their first batch, so that the source must stall on
// credits: its backpressure shows in TaskStats while it runs.
func TestDeploymentBackpressure(t *testing.T) {
	const n, queue, batch = 10000, 4, 100
	// Per sink subtask: a window of credits, its queue, and the batch in
	// its hands; plus the batch the source holds.
	const bound = (2*(queue+queue+1) + 1) * batch
	r := &sinkRecorder{delay: 2 * time.Millisecond, hold: make(chan struct{})}
	a, b := startWorker(t), startWorker(t)
	jobA, jobB := newFanOutJob(t, r, n, queue), newFanOutJob(t, r, n, queue)
	da, db := split(t, jobA.Spec(), a, b, 1, sourceOnA)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doneB := runDeployment(ctx, jobB, db, b.ex)
	doneA := runDeployment(ctx, jobA, da, a.ex)

	// TaskStats is read while the job runs (the race detector watches).
	testkit.Eventually(t, 20*time.Second, "the source's backpressure ratio reaches 0.5 with the sinks held", func() bool {
		_ = jobB.TaskStats()
		stats := jobA.TaskStats() // nil until the run started
		return len(stats) == 1 && stats[0].State == dataflow.TaskRunning && stats[0].BackpressureRatio >= 0.5
	})
	if got := r.produced.Load(); got > bound || got < 2*queue*batch {
		t.Fatalf("with the sinks held the source produced %d records, want between %d (more than the queues hold) and %d (credits and queues)", got, 2*queue*batch, bound)
	}
	close(r.hold)

	ra, rb := await(t, "worker a", doneA, 30*time.Second), await(t, "worker b", doneB, 30*time.Second)
	if ra.err != nil || rb.err != nil {
		t.Fatalf("worker a: %v; worker b: %v", ra.err, rb.err)
	}
	if got := r.consumed.Load(); got != n {
		t.Fatalf("sinks got %d records, want %d", got, n)
	}
	seen := map[string]bool{}
	for _, v := range r.values {
		seen[v] = true
	}
	if len(seen) != n {
		t.Fatalf("sinks got %d distinct records, want %d", len(seen), n)
	}
	if got := r.maxAhead.Load(); got > bound {
		t.Fatalf("the source ran %d records ahead of the sinks; credits and queues bound it to %d", got, bound)
	}
	st := jobA.TaskStats()[0]
	if st.ID != "src[0]" || st.State != dataflow.TaskFinished || st.RecordsIn != n || st.RecordsOut != n || st.Backpressured <= 0 {
		t.Errorf("source task stats %+v", st)
	}
	for _, st := range jobB.TaskStats() {
		if st.State != dataflow.TaskFinished || st.RecordsIn+st.RecordsOut == 0 || st.RecordsIn != st.RecordsOut {
			t.Errorf("sink task stats %+v", st)
		}
	}
	t.Logf("source ran at most %d records ahead (bound %d); backpressure ratio %.2f", r.maxAhead.Load(), bound, st.BackpressureRatio)
}

// TestDeploymentPeerLost: when one worker goes away mid-run, the other's
// RunDeployment fails promptly with an error naming the lost peer.
func TestDeploymentPeerLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		// kill ends worker a (the source's) or b (the sinks'); the other
		// one must report it.
		kill     func(a, b *testWorker, cancelA, cancelB context.CancelFunc)
		survivor string // "a" or "b"
		want     string // in the survivor's error, before the peer address
	}{
		{"consumer server stopped", func(_, b *testWorker, _, _ context.CancelFunc) { b.srv.Stop() }, "a", "output to worker "},
		{"consumer deployment canceled", func(_, _ *testWorker, _, cancelB context.CancelFunc) { cancelB() }, "a", "output to worker "},
		{"producer deployment canceled", func(_, _ *testWorker, cancelA, _ context.CancelFunc) { cancelA() }, "b", "input from worker "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &sinkRecorder{delay: 2 * time.Millisecond}
			a, b := startWorker(t), startWorker(t)
			jobA, jobB := newFanOutJob(t, r, 1<<40, 4), newFanOutJob(t, r, 1<<40, 4)
			da, db := split(t, jobA.Spec(), a, b, 1, sourceOnA)
			ctxA, cancelA := context.WithCancel(context.Background())
			defer cancelA()
			ctxB, cancelB := context.WithCancel(context.Background())
			defer cancelB()
			doneA, doneB := runDeployment(ctxA, jobA, da, a.ex), runDeployment(ctxB, jobB, db, b.ex)
			testkit.Eventually(t, 30*time.Second, "sinks got 2000 records", func() bool { return r.consumed.Load() >= 2000 })
			tc.kill(a, b, cancelA, cancelB)
			done, peer := doneA, b.addr
			if tc.survivor == "b" {
				done, peer = doneB, a.addr
			}
			res := await(t, "the surviving worker", done, 10*time.Second)
			if !errors.Is(res.err, dataflow.ErrChannelLost) || !errors.Is(res.err, dataflow.ErrJobFailed) || !strings.Contains(res.err.Error(), tc.want+peer+" lost") {
				t.Fatalf("survivor: err = %v, want ErrChannelLost with %q", res.err, tc.want+peer+" lost")
			}
			if strings.Contains(res.err.Error(), "\n") {
				t.Errorf("error is not one line: %q", res.err)
			}
			t.Logf("survivor: %v", res.err)
			// The killed side ends too (a stopped server fails its
			// consumers' inputs; a cancelled run returns ctx's error).
			other := doneB
			if tc.survivor == "b" {
				other = doneA
			}
			if res := await(t, "the killed worker", other, 10*time.Second); res.err == nil {
				t.Fatal("the killed worker's run succeeded")
			}
		})
	}
}

// consumerOnly deploys the sinks of fanOutJob on w, with the source on an
// address nobody serves, and returns the run.
func consumerOnly(t *testing.T, w *testWorker, job *dataflow.Job, jobID string, attempt int64) (<-chan runResult, context.CancelFunc) {
	t.Helper()
	d := dataflow.Deployment{JobID: jobID, Attempt: attempt, Tasks: []string{"out[0]", "out[1]"}, Self: w.addr,
		Addresses: map[string]string{"src[0]": "127.0.0.1:9", "out[0]": w.addr, "out[1]": w.addr}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	done := runDeployment(ctx, job, d, w.ex)
	return done, cancel
}

// rawChannel is a hand-written producer: it speaks the Exchange protocol
// directly, so a test can break it.
type rawChannel struct {
	stream grpc.BidiStreamingClient[eddyv1.TransferRequest, eddyv1.TransferResponse]
}

func dialExchange(t *testing.T, w *testWorker) eddyv1.ExchangeClient {
	t.Helper()
	conn, err := grpc.NewClient(w.addr, rpc.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return eddyv1.NewExchangeClient(conn)
}

func openRaw(t *testing.T, client eddyv1.ExchangeClient, open *eddyv1.ChannelOpen) (*rawChannel, uint32, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	stream, err := client.Transfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Open{Open: open}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, 0, err
	}
	return &rawChannel{stream}, resp.GetCredits(), nil
}

func (c *rawChannel) send(f *eddyv1.Frame) {
	_ = c.stream.Send(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Frame{Frame: f}})
}

// status returns the call's final status, skipping credit grants.
func (c *rawChannel) status() error {
	for {
		if _, err := c.stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func channelOpen(jobID string, attempt uint32, consumer string, channel uint32) *eddyv1.ChannelOpen {
	return &eddyv1.ChannelOpen{JobId: jobID, Attempt: attempt, ProducerTaskId: "src[0]", ConsumerTaskId: consumer, Edge: "src", ChannelIndex: channel}
}

// TestExchangeOpen: how a receiver answers ChannelOpens it cannot serve.
func TestExchangeOpen(t *testing.T) {
	w := startWorker(t)
	r := &sinkRecorder{}
	done, cancel := consumerOnly(t, w, newFanOutJob(t, r, 0, 4), "job-open", 2)
	client := dialExchange(t, w)
	// The deployment registers before it starts tasks; wait for it.
	testkit.Eventually(t, 10*time.Second, "the consumer is registered", func() bool {
		_, _, err := openRaw(t, client, channelOpen("job-open", 2, "out[1]", 7))
		return status.Code(err) == codes.InvalidArgument
	})
	ch, credits, err := openRaw(t, client, channelOpen("job-open", 2, "out[0]", 0))
	if err != nil || credits != 4 {
		t.Fatalf("open: %d credits, err %v; want the queue's 4", credits, err)
	}
	for _, tc := range []struct {
		name string
		open *eddyv1.ChannelOpen
		want codes.Code
	}{
		{"unknown job", channelOpen("job-other", 2, "out[0]", 0), codes.Unavailable},
		{"newer attempt not deployed yet", channelOpen("job-open", 3, "out[0]", 0), codes.Unavailable},
		{"older attempt", channelOpen("job-open", 1, "out[0]", 0), codes.Aborted},
		{"unknown task", channelOpen("job-open", 2, "src[0]", 0), codes.Unavailable},
		{"wrong channel", channelOpen("job-open", 2, "out[0]", 1), codes.InvalidArgument},
		{"wrong producer", &eddyv1.ChannelOpen{JobId: "job-open", Attempt: 2, ProducerTaskId: "out[1]", ConsumerTaskId: "out[0]", Edge: "src"}, codes.InvalidArgument},
		{"wrong edge", &eddyv1.ChannelOpen{JobId: "job-open", Attempt: 2, ProducerTaskId: "src[0]", ConsumerTaskId: "out[0]", Edge: "out"}, codes.InvalidArgument},
		{"no job id", &eddyv1.ChannelOpen{ProducerTaskId: "src[0]", ConsumerTaskId: "out[0]"}, codes.InvalidArgument},
		{"already open", channelOpen("job-open", 2, "out[0]", 0), codes.AlreadyExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := openRaw(t, client, tc.open); status.Code(err) != tc.want {
				t.Fatalf("open: %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("frame first", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stream, err := client.Transfer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Frame{Frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Idle{Idle: &eddyv1.Idle{}}}}})
		if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("frame before ChannelOpen: %v, want InvalidArgument", err)
		}
	})
	// A well-behaved raw producer completes the job.
	ch2, _, err := openRaw(t, client, channelOpen("job-open", 2, "out[1]", 0))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []*rawChannel{ch, ch2} {
		recs := []abi.Record{{Value: fmt.Appendf(nil, "v%d", i), Timestamp: 1}}
		c.send(&eddyv1.Frame{Kind: &eddyv1.Frame_Batch{Batch: abi.AppendBatch(nil, recs)}})
		c.send(&eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: 5}})
		c.send(&eddyv1.Frame{Kind: &eddyv1.Frame_EndOfInput{EndOfInput: &eddyv1.EndOfInput{}}})
		if err := c.status(); err != nil {
			t.Fatalf("channel %d ended with %v, want OK", i, err)
		}
	}
	if res := await(t, "the consumers", done, 10*time.Second); res.err != nil {
		t.Fatal(res.err)
	}
	cancel()
	slices.Sort(r.values)
	if !slices.Equal(r.values, []string{"v0", "v1"}) {
		t.Fatalf("sinks got %q", r.values)
	}
	// The job is gone: its channels are refused, not retried for ever.
	if _, _, err := openRaw(t, client, channelOpen("job-open", 1, "out[0]", 0)); status.Code(err) != codes.Aborted {
		t.Fatalf("open of an old attempt after the run: %v, want Aborted", err)
	}
}

// TestExchangeBadStream: a producer that breaks the protocol fails the
// call with the right status and the consumer task with a clear error.
func TestExchangeBadStream(t *testing.T) {
	batch := func(b []byte) *eddyv1.Frame { return &eddyv1.Frame{Kind: &eddyv1.Frame_Batch{Batch: b}} }
	good := abi.AppendBatch(nil, []abi.Record{{Key: []byte("k"), Value: []byte("v")}})
	truncated := good[:len(good)-1]
	for _, tc := range []struct {
		name   string
		frames []*eddyv1.Frame
		close  bool // CloseSend after the frames
		stall  bool // the sinks never return from Write
		status codes.Code
		err    error  // the consumer's
		msg    string // in the consumer's error
	}{
		{"malformed batch", []*eddyv1.Frame{batch(truncated)}, false, false, codes.InvalidArgument, abi.ErrMalformedBatch, "outside the"},
		{"bad magic", []*eddyv1.Frame{batch([]byte("not a batch at all"))}, false, false, codes.InvalidArgument, dataflow.ErrBadFrame, "bad magic"},
		{"empty batch", []*eddyv1.Frame{batch(abi.AppendBatch(nil, nil))}, false, false, codes.InvalidArgument, dataflow.ErrBadFrame, "empty batch frame"},
		{"empty frame", []*eddyv1.Frame{{}}, false, false, codes.InvalidArgument, dataflow.ErrBadFrame, "frame without content"},
		{"barrier without kind", []*eddyv1.Frame{{Kind: &eddyv1.Frame_Barrier{Barrier: &eddyv1.Barrier{CheckpointId: 3}}}}, false, false, codes.InvalidArgument, dataflow.ErrBadFrame, "checkpoint barrier 3 of kind"},
		// With the consumer stalled: one batch in the sink, 4 in the queue,
		// one on its way there, 4 in the channel's buffer, and one too many.
		{"beyond credits", slices.Repeat([]*eddyv1.Frame{batch(good)}, 1+4+1+4+1), false, true, codes.ResourceExhausted, dataflow.ErrBadFrame, "without credit"},
		{"closed without end", []*eddyv1.Frame{batch(good)}, true, false, codes.Aborted, dataflow.ErrChannelLost, "without end of input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorker(t)
			r := &sinkRecorder{}
			if tc.stall {
				r.delay = time.Hour
			}
			done, _ := consumerOnly(t, w, newFanOutJob(t, r, 0, 4), "job-bad", 1)
			client := dialExchange(t, w)
			var ch *rawChannel
			testkit.Eventually(t, 10*time.Second, "the consumer is registered", func() bool {
				var err error
				ch, _, err = openRaw(t, client, channelOpen("job-bad", 1, "out[1]", 0))
				return err == nil
			})
			for _, f := range tc.frames {
				ch.send(f)
			}
			if tc.close {
				_ = ch.stream.CloseSend()
			}
			if err := ch.status(); status.Code(err) != tc.status {
				t.Fatalf("call ended with %v, want %s", err, tc.status)
			}
			res := await(t, "the consumer", done, 10*time.Second)
			if !errors.Is(res.err, tc.err) || !errors.Is(res.err, dataflow.ErrJobFailed) || !strings.Contains(res.err.Error(), tc.msg) ||
				!strings.Contains(res.err.Error(), "task out[1]: input from worker 127.0.0.1:9") {
				t.Fatalf("consumer: err = %v, want %v with %q", res.err, tc.err, tc.msg)
			}
			t.Logf("consumer: %v", res.err)
		})
	}
}

func TestPlanTasks(t *testing.T) {
	spec := parse(t, strings.ReplaceAll(splitJob, "$DIR", t.TempDir()))
	tasks, err := dataflow.PlanTasks(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ts := range tasks {
		got = append(got, fmt.Sprintf("%s=%s/%d/%d", ts.ID, strings.Join(ts.Chain, "+"), ts.Subtask, ts.Parallelism))
	}
	want := []string{
		"txns[0]=txns/0/2", "txns[1]=txns/1/2",
		"counts[0]=counts+counts_out/0/2", "counts[1]=counts+counts_out/1/2",
		"per_card[0]=per_card+results/0/2", "per_card[1]=per_card+results/1/2",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tasks\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func TestRunDeploymentInvalid(t *testing.T) {
	job := newFanOutJob(t, &sinkRecorder{}, 10, 4)
	for _, tc := range []struct {
		name string
		d    dataflow.Deployment
		ex   *dataflow.Exchange
		msg  string
	}{
		{"no tasks", dataflow.Deployment{JobID: "j"}, nil, "no tasks"},
		{"unknown task", dataflow.Deployment{JobID: "j", Tasks: []string{"src[1]"}}, nil, `unknown task "src[1]"`},
		{"twice", dataflow.Deployment{JobID: "j", Tasks: []string{"src[0]", "src[0]"}}, nil, "listed twice"},
		{"consumer without address", dataflow.Deployment{JobID: "j", Tasks: []string{"src[0]"}}, nil, "has no address"},
		{"placed elsewhere", dataflow.Deployment{JobID: "j", Tasks: []string{"src[0]"}, Self: "x:1", Addresses: map[string]string{"src[0]": "y:1"}}, nil, "runs here"},
		{"no exchange", dataflow.Deployment{JobID: "j", Tasks: []string{"out[0]"}}, nil, "needs an Exchange"},
		{"no job id", dataflow.Deployment{Tasks: []string{"out[0]"}}, dataflow.NewExchange(nil), "job id is required"},
		{"attempt out of range", dataflow.Deployment{JobID: "j", Attempt: -1, Tasks: []string{"out[0]"}}, nil, "out of range"},
		{"checkpointing without a store", dataflow.Deployment{JobID: "j", Tasks: []string{"src[0]"}, Addresses: map[string]string{"out[0]": "x:1", "out[1]": "x:1"},
			Checkpointing: &dataflow.Checkpointing{Prefix: "p"}}, nil, "checkpointing without a Store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := job.RunDeployment(context.Background(), tc.d, tc.ex)
			if !errors.Is(err, dataflow.ErrInvalidDeployment) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want ErrInvalidDeployment with %q", err, tc.msg)
			}
		})
	}
}
