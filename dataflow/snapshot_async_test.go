package dataflow_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/storage"
)

// Asynchronous snapshots: a task captures its state at the barrier,
// forwards the barrier and goes on while its upload runs; it acknowledges
// once the upload is done. The tests hold the uploads of state files back
// (heldStore) and watch records flow meanwhile.

// heldStore is a Store whose Puts of state files (keys under /shared/)
// wait until release is closed, or fail while failing is set.
type heldStore struct {
	storage.Store
	release chan struct{}
	blocked chan string // each held Put's key, as it starts waiting
	failing atomic.Bool
	failed  atomic.Int64
}

func newHeldStore(t *testing.T) *heldStore {
	t.Helper()
	st, err := storage.Open(context.Background(), "file://"+t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &heldStore{Store: st, release: make(chan struct{}), blocked: make(chan string, 64)}
}

func (s *heldStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.Contains(key, "/shared/") {
		if s.failing.Load() {
			s.failed.Add(1)
			return fmt.Errorf("put %s: %w", key, storage.ErrUnavailable)
		}
		select {
		case <-s.release:
		default:
			s.blocked <- key
			select {
			case <-s.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return s.Store.Put(ctx, key, r, size)
}

// seqSource produces {"seq":N,"card":"cK"} for N = 0, 1, … (K = N mod
// 10), a few records per Next, until limit or until stop is closed. Its
// position is the next N.
type seqSource struct {
	next, limit int64
	stop        <-chan struct{}
}

func (s *seqSource) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *seqSource) Next(ctx context.Context, b *stream.Batch, max int) error {
	select {
	case <-s.stop:
		return io.EOF
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Millisecond): // paced: the test acts while it runs
	}
	for i := 0; i < min(max, 8) && s.next < s.limit; i++ {
		b.Add(nil, fmt.Appendf(nil, `{"seq":%d,"card":"c%d"}`, s.next, s.next%10), stream.NoTimestamp)
		s.next++
	}
	if s.next == s.limit {
		return io.EOF
	}
	return nil
}
func (s *seqSource) Position() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(s.next)), nil
}
func (s *seqSource) Seek(pos []byte) error {
	if len(pos) != 8 {
		return fmt.Errorf("position of %d bytes", len(pos))
	}
	s.next = int64(binary.BigEndian.Uint64(pos))
	return nil
}
func (s *seqSource) Close() error { return nil }

// tally counts the records of each card in keyed state and passes them
// on; at the end it emits {"card":"cK","total":N} for the ten cards.
type tally struct{ st stream.KeyedState }

func (o *tally) Open(_ context.Context, info stream.TaskInfo) error {
	o.st = info.State
	return nil
}
func (o *tally) Process(_ context.Context, in, out *stream.Batch) error {
	for i := range in.Records {
		r := &in.Records[i]
		n, err := o.count(r.Key)
		if err != nil {
			return err
		}
		if err := o.st.ValuePut("n", r.Key, nil, binary.BigEndian.AppendUint64(nil, uint64(n+1)), 0); err != nil {
			return err
		}
		out.AddRecord(r)
	}
	return nil
}
func (o *tally) count(key []byte) (int64, error) {
	v, ok, err := o.st.ValueGet("n", key, nil, nil)
	if err != nil || !ok {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}
func (o *tally) Finish(_ context.Context, out *stream.Batch) error {
	for k := range 10 {
		card := fmt.Sprintf("c%d", k)
		n, err := o.count([]byte(card))
		if err != nil {
			return err
		}
		out.Add([]byte(card), fmt.Appendf(nil, `{"card":%q,"total":%d}`, card, n), stream.NoTimestamp)
	}
	return nil
}
func (o *tally) Close() error { return nil }

// seqSink keeps the highest seq it received and the totals.
type seqSink struct{ r *seqRecorder }

type seqRecorder struct {
	maxSeq atomic.Int64
	n      atomic.Int64
	mu     sync.Mutex
	totals map[string]int64
}

func (s seqSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s seqSink) Write(_ context.Context, b *stream.Batch) error {
	for _, r := range b.Records {
		var v struct {
			Seq   *int64
			Card  string
			Total *int64
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return err
		}
		switch {
		case v.Total != nil:
			s.r.mu.Lock()
			s.r.totals[v.Card] = *v.Total
			s.r.mu.Unlock()
		case v.Seq != nil:
			s.r.n.Add(1)
			if *v.Seq > s.r.maxSeq.Load() {
				s.r.maxSeq.Store(*v.Seq)
			}
		}
	}
	return nil
}
func (seqSink) Finish(context.Context) error { return nil }
func (seqSink) Close() error                 { return nil }

const asyncJob = `name: async
parallelism: 1
batch_size: 16
state_backend: $BACKEND
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: tally
    input: src
    key_by: card
    wasm: {module: tally}
  - name: out
    input: tally
    sink: {discard: {}}
`

// asyncRun is one deployment of asyncJob with every task in it.
type asyncRun struct {
	job    *dataflow.Job
	run    *dataflow.Running
	cancel context.CancelFunc
	rec    *seqRecorder
	stop   chan struct{}
	acks   chan dataflow.Ack
	tmp    string // where the backend writes its captures
}

// startAsync starts asyncJob on a fresh backend of the kind named,
// checkpointing into st, restored from restore when not nil, its source
// ending at limit (0: when stop is closed).
func startAsync(t *testing.T, backend string, st storage.Store, restore *checkpoint.Manifest, limit int64) *asyncRun {
	t.Helper()
	r := &asyncRun{rec: &seqRecorder{totals: map[string]int64{}}, stop: make(chan struct{}), acks: make(chan dataflow.Ack, 64)}
	r.rec.maxSeq.Store(-1)
	var b state.Backend
	var err error
	switch backend {
	case jobspec.BackendMemory:
		r.tmp = t.TempDir()
		cfg := state.DefaultMemoryConfig()
		cfg.TempDir = r.tmp
		b, err = state.NewMemory(cfg)
	case jobspec.BackendPebble:
		dir := filepath.Join(t.TempDir(), "state")
		r.tmp = filepath.Join(dir, "eddy-tmp")
		b, err = state.OpenPebble(state.DefaultPebbleConfig(dir))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if limit == 0 {
		limit = 1 << 62
	}
	r.job, err = dataflow.NewJob(context.Background(), parse(t, strings.ReplaceAll(asyncJob, "$BACKEND", backend)), dataflow.Options{
		Connectors: testConnectors{
			src:  func() stream.Source { return &seqSource{limit: limit, stop: r.stop} },
			sink: func() stream.Sink { return seqSink{r.rec} },
		},
		NativeOperators: map[string]func() stream.Operator{"tally": func() stream.Operator { return &tally{} }},
		StateBackends:   func(string) (state.Backend, error) { return b, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	t.Cleanup(cancel)
	cp := &dataflow.Checkpointing{Store: st, Prefix: "tenants/default/jobs/async", Restore: restore, Ack: func(a dataflow.Ack) { r.acks <- a }}
	if r.run, err = r.job.StartDeployment(ctx, dataflow.Deployment{JobID: "async", Tasks: taskIDs(r.job), Checkpointing: cp}, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitAck returns the next acknowledgement, failing the test after 30s or
// if the run ends first.
func (r *asyncRun) waitAck(t *testing.T, what string) dataflow.Ack {
	t.Helper()
	select {
	case a := <-r.acks:
		return a
	case <-r.run.Done():
		_, err := r.run.Wait()
		t.Fatalf("the run ended waiting for %s: %v", what, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30s", what)
	}
	return dataflow.Ack{}
}

// waitSink waits until the sink received a record of seq ≥ n.
func (r *asyncRun) waitSink(t *testing.T, n int64, what string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, what, func() bool { return r.rec.maxSeq.Load() >= n })
}

// sourcePosition reads the source position that task manifest key holds.
func sourcePosition(t *testing.T, st storage.Store, key string) int64 {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var m struct{ Source struct{ Position []byte } }
	if err := json.NewDecoder(rc).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m.Source.Position) != 8 {
		t.Fatalf("%s: source position %x", key, m.Source.Position)
	}
	return int64(binary.BigEndian.Uint64(m.Source.Position))
}

// assertClean fails the test if a capture is left in dir or an upload
// goroutine is still running.
func assertClean(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
	testkit.Eventually(t, 10*time.Second, "no upload goroutine left", func() bool { return uploadGoroutines() == 0 })
}

func uploadGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "dataflow.(*uploads).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestSnapshotUploadAsync holds the upload of the keyed task's state back
// and shows records produced after the barrier reaching the sink through
// that task meanwhile; released, the checkpoint completes. A restore from
// it then counts every record exactly once: the capture is the state at
// the barrier, whatever the task did during the upload.
func TestSnapshotUploadAsync(t *testing.T) {
	for _, backend := range []string{jobspec.BackendMemory, jobspec.BackendPebble} {
		t.Run(backend, func(t *testing.T) {
			st := newHeldStore(t)
			r := startAsync(t, backend, st, nil, 0)
			r.waitSink(t, 100, "records before the checkpoint")
			if err := r.run.Trigger(dataflow.Trigger{ID: 1}); err != nil {
				t.Fatal(err)
			}
			select {
			case key := <-st.blocked:
				t.Logf("held: %s", key)
			case <-time.After(30 * time.Second):
				t.Fatal("no state upload within 30s")
			}
			// The source task has no state: it acknowledges at once.
			a := r.waitAck(t, "the source task's ack")
			if a.Task != "src[0]" || a.CheckpointID != 1 {
				t.Fatalf("ack %+v, want src[0]'s of checkpoint 1", a)
			}
			barrier := sourcePosition(t, st, a.Manifest)
			r.waitSink(t, barrier+300, fmt.Sprintf("records after the barrier (at seq %d) while the upload is held", barrier))
			select {
			case a := <-r.acks:
				t.Fatalf("acknowledged while its upload is held: %+v", a)
			default:
			}
			t.Logf("barrier at seq %d; the sink got seq %d with the upload held", barrier, r.rec.maxSeq.Load())

			close(st.release)
			a = r.waitAck(t, "the keyed task's ack")
			if a.Task != "tally[0]" || a.CheckpointID != 1 || a.FullSize == 0 {
				t.Fatalf("ack %+v, want tally[0]'s of checkpoint 1 with state", a)
			}
			chk := &checkpoint.Manifest{Job: "async", Checkpoint: 1, MaxParallelism: r.job.Spec().MaxParallelism,
				Tasks: map[string]string{"src[0]": checkpoint.TaskManifestKey("tenants/default/jobs/async", 1, "src[0]"), "tally[0]": a.Manifest}}
			key := checkpoint.ManifestKey("tenants/default/jobs/async", 1)
			err := checkpoint.WriteManifest(context.Background(), st, key, chk)
			if err != nil {
				t.Fatal(err)
			}
			if chk, err = checkpoint.ReadManifest(context.Background(), st, key); err != nil {
				t.Fatal(err)
			}
			r.run.Complete(1)
			close(r.stop)
			if _, err := r.run.Wait(); err != nil {
				t.Fatal(err)
			}
			assertClean(t, r.tmp)

			// Restored, the source resumes at the barrier: the totals
			// are those of seq 0 … limit-1 if the state held exactly the
			// records before it.
			limit := barrier + 1000
			r2 := startAsync(t, backend, st, chk, limit)
			if _, err := r2.run.Wait(); err != nil {
				t.Fatal(err)
			}
			for k := range int64(10) {
				card := fmt.Sprintf("c%d", k)
				if got, want := r2.rec.totals[card], (limit-k+9)/10; got != want {
					t.Errorf("restored %s: %d records counted, want %d", card, got, want)
				}
			}
			if got := r2.rec.n.Load(); got != limit-barrier {
				t.Errorf("restored run: %d records, want %d", got, limit-barrier)
			}
			assertClean(t, r2.tmp)
		})
	}
}

// TestSnapshotUploadBound: with the uploads held, three checkpoints in a
// row (the third waits until a slot is free); released, the keyed task
// acknowledges them in order.
func TestSnapshotUploadBound(t *testing.T) {
	st := newHeldStore(t)
	r := startAsync(t, jobspec.BackendMemory, st, nil, 0)
	r.waitSink(t, 100, "records before the checkpoints")
	for id := int64(1); id <= 3; id++ {
		if err := r.run.Trigger(dataflow.Trigger{ID: id}); err != nil {
			t.Fatal(err)
		}
		if a := r.waitAck(t, "the source task's ack"); a.Task != "src[0]" || a.CheckpointID != id {
			t.Fatalf("ack %+v, want src[0]'s of checkpoint %d", a, id)
		}
	}
	<-st.blocked
	close(st.release)
	for id := int64(1); id <= 3; id++ {
		if a := r.waitAck(t, "the keyed task's ack"); a.Task != "tally[0]" || a.CheckpointID != id {
			t.Fatalf("ack %+v, want tally[0]'s of checkpoint %d", a, id)
		}
	}
	close(r.stop)
	if _, err := r.run.Wait(); err != nil {
		t.Fatal(err)
	}
	assertClean(t, r.tmp)
}

// TestSnapshotUploadFails: an upload that fails declines the checkpoint
// (no ack; the task goes on) and leaves no capture behind; the next
// checkpoint succeeds.
func TestSnapshotUploadFails(t *testing.T) {
	st := newHeldStore(t)
	close(st.release)
	st.failing.Store(true)
	r := startAsync(t, jobspec.BackendMemory, st, nil, 0)
	r.waitSink(t, 100, "records before the checkpoint")
	if err := r.run.Trigger(dataflow.Trigger{ID: 1}); err != nil {
		t.Fatal(err)
	}
	if a := r.waitAck(t, "the source task's ack"); a.Task != "src[0]" || a.CheckpointID != 1 {
		t.Fatalf("ack %+v, want src[0]'s of checkpoint 1", a)
	}
	testkit.Eventually(t, 30*time.Second, "a failed upload", func() bool { return st.failed.Load() > 0 })
	st.failing.Store(false)
	if err := r.run.Trigger(dataflow.Trigger{ID: 2}); err != nil {
		t.Fatal(err)
	}
	// A task's uploads run in order: an ack of checkpoint 1 would come
	// before its ack of 2. The two tasks upload independently, in either
	// order.
	acked := map[string]bool{}
	for range 2 {
		a := r.waitAck(t, "an ack of checkpoint 2")
		if a.CheckpointID != 2 || acked[a.Task] || a.Task != "src[0]" && a.Task != "tally[0]" {
			t.Fatalf("ack %+v, want one each of src[0] and tally[0] for checkpoint 2 (so far %v)", a, acked)
		}
		acked[a.Task] = true
	}
	close(r.stop)
	if _, err := r.run.Wait(); err != nil {
		t.Fatal(err)
	}
	assertClean(t, r.tmp)
}

// TestSnapshotUploadCanceled: a run cancelled while an upload is held ends
// at once, without acknowledging it, and leaves neither a capture nor an
// upload goroutine behind.
func TestSnapshotUploadCanceled(t *testing.T) {
	for _, backend := range []string{jobspec.BackendMemory, jobspec.BackendPebble} {
		t.Run(backend, func(t *testing.T) {
			st := newHeldStore(t)
			r := startAsync(t, backend, st, nil, 0)
			r.waitSink(t, 100, "records before the checkpoint")
			for id := int64(1); id <= 2; id++ {
				if err := r.run.Trigger(dataflow.Trigger{ID: id}); err != nil {
					t.Fatal(err)
				}
				r.waitAck(t, "the source task's ack")
			}
			<-st.blocked
			r.cancel()
			if _, err := r.run.Wait(); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled run: %v", err)
			}
			select {
			case a := <-r.acks:
				t.Fatalf("a cancelled upload acknowledged: %+v", a)
			default:
			}
			assertClean(t, r.tmp)
		})
	}
}
