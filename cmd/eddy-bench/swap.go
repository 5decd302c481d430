package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/storage"
)

// The pause figure of hot swaps (issue 13, item 7): a keyed counter job
// over a paced generator, in this process, with the bench playing the
// leader of the checkpoint protocol as dataflow's tests do (trigger,
// collect the tasks' acks, write the checkpoint manifest, announce the
// completion). The counter node is swapped in place, alternately to
// counter-plus-c.wasm (whose output carries "v":"plus") and back to
// counter-c.wasm, and the same upgrade is then done the Flink way: a
// savepoint (manifest and self-contained copy, as the coordinator writes
// them), the deployment cancelled, a new job started from the savepoint
// with the other module. A sink records when each record arrived and
// which version produced it; the pause of one upgrade is, per sink
// subtask, the arrival of the first record of the new version minus that
// of the last record of the old one, and the upgrade's pause is the
// largest over the subtasks.

// swapOptions are the knobs of the swap part (flags of main).
type swapOptions struct {
	Swaps     int // in-place swaps per state size
	Resubmits int // stop-with-savepoint + resubmit rounds with small state
	// LargeResubmits are those with the large state, each of which copies
	// and restores all of it (tens of seconds a gigabyte here).
	LargeResubmits int
	Rate           float64 // records/s of the generator, over its subtasks
	// StateBytes is the size of the large state (the ballast written
	// under the counter's state before the swaps); 0 skips the large
	// runs.
	StateBytes int64
	// Settle is the steady flow before each upgrade.
	Settle time.Duration
}

func defaultSwapOptions() swapOptions {
	return swapOptions{Swaps: 10, Resubmits: 3, LargeResubmits: 1, Rate: 20000, StateBytes: 1 << 30, Settle: 400 * time.Millisecond}
}

func (o swapOptions) validate() error {
	switch {
	case o.Swaps < 1:
		return fmt.Errorf("-swaps %d: want at least 1", o.Swaps)
	case o.Resubmits < 0 || o.LargeResubmits < 0:
		return fmt.Errorf("-resubmits %d, -resubmits-large %d: want 0 or more", o.Resubmits, o.LargeResubmits)
	case o.Rate < 1000:
		return fmt.Errorf("-swap-rate %v: want at least 1000 records/s (the pause is measured between records)", o.Rate)
	case o.StateBytes < 0:
		return fmt.Errorf("-swap-state %d: want 0 or more bytes", o.StateBytes)
	case o.Settle < 50*time.Millisecond:
		return fmt.Errorf("-swap-settle %v: want at least 50ms of flow between upgrades", o.Settle)
	}
	return nil
}

const (
	swapCards       = 10000
	swapParallelism = 2
	swapNode        = "count"
	// ballastValue is the size of one ballast value: large enough that a
	// gigabyte is a million writes, which fills in seconds.
	ballastValue = 1000
)

// swapResult is what one state size measured.
type swapResult struct {
	label      string
	stateBytes int64 // on disk, in the Pebble directory, before the swaps
	swaps      []time.Duration
	taskPauses []time.Duration // the largest SwapPause of the acks, per swap
	captures   []time.Duration // the largest synchronous snapshot part of the tasks, per swap
	uploaded   []int64         // bytes the swap's savepoint uploaded, over the tasks
	tables     int             // table files in the Pebble directory before the swaps
	newTables  []int64         // table files that appeared during each swap's savepoint
	keys       int             // whose counts went 1, 2, 3… across every upgrade
	records    int64           // at the sinks, after the resubmits dropped what they replay
	resubmits  []time.Duration
	gaps       []time.Duration // between batches in steady flow, sorted
	phases     []resubmitPhases
}

// resubmitPhases is where the time of one stop-with-savepoint + resubmit
// went.
type resubmitPhases struct {
	savepoint, copy, cancel, start, firstRecord time.Duration
}

func benchSwap(root string, o swapOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx := context.Background()
	engine, err := benchEngine(ctx)
	if err != nil {
		return err
	}
	defer engine.Close(ctx)
	b := &swapBench{opts: o, engine: engine}
	for i, name := range []string{"counter-c.wasm", "counter-plus-c.wasm"} {
		b.paths[i] = filepath.Join(root, "udfs/build", name)
		if b.modules[i], err = engine.Load(ctx, b.paths[i]); err != nil {
			return fmt.Errorf("swap: %w", err)
		}
	}
	fmt.Printf("swap: generator(transactions, %d cards, %.0f records/s) → key_by card → counter (Wasm, parallelism %d, pebble) → sink; "+
		"%d in-place swaps counter-c ↔ counter-plus-c per state size, then stop-with-savepoint + resubmit (%d with small state, %d with large)\n",
		swapCards, o.Rate, swapParallelism, o.Swaps, o.Resubmits, o.LargeResubmits)
	capture, fsync, err := captureAlone(ctx)
	if err != nil {
		return fmt.Errorf("swap: %w", err)
	}
	fmt.Printf("  floor of the capture here: state.CaptureSnapshot of a small Pebble store with no job running %.1f ms (median of 10); one fsync of a 4 KB write %.1f ms; %s\n",
		ms(capture), ms(fsync), loadAverage())
	sizes := []int64{0}
	if o.StateBytes > 0 {
		sizes = append(sizes, o.StateBytes)
	}
	var results []swapResult
	for _, size := range sizes {
		r, err := b.run(ctx, size)
		if err != nil {
			return err
		}
		results = append(results, r)
		b.printResult(r)
	}
	b.printSummary(results)
	return nil
}

type swapBench struct {
	opts    swapOptions
	engine  *host.Engine
	paths   [2]string // counter-c, counter-plus-c
	modules [2]*host.Module
}

func (b *swapBench) specText(module string) string {
	return fmt.Sprintf(`name: swap-bench
parallelism: %d
state_backend: pebble
nodes:
  - name: txns
    source: {generator: {kind: transactions, cards: %d, rate: %v, seed: 7}}
  - name: %s
    input: txns
    key_by: card
    wasm: {module: %q}
  - name: out
    input: %s
    sink: {discard: {}}
`, swapParallelism, swapCards, b.opts.Rate, swapNode, module, swapNode)
}

// swapRun is the environment of one state size: a worker's Pebble
// backend, the checkpoint storage, the sink's log, and the deployment
// currently running.
type swapRun struct {
	b       *swapBench
	dir     string
	db      string // the Pebble directory
	backend *ballastBackend
	leader  *swapLeader
	log     *arrivalLog
	taskLog *captureLog
	gen     int // jobs started
	job     *dataflow.Job
	jobID   string
	run     *dataflow.Running
	cancel  context.CancelFunc
}

func (b *swapBench) run(ctx context.Context, stateBytes int64) (res swapResult, err error) {
	res.label = "small state"
	if stateBytes > 0 {
		res.label = fmt.Sprintf("%s state", sizeLabel(stateBytes))
	}
	dir, err := os.MkdirTemp("", "eddy-bench-swap")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	pebbleCfg := state.DefaultPebbleConfig(filepath.Join(dir, "state"))
	pebbleCfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pb, err := state.OpenPebble(pebbleCfg)
	if err != nil {
		return res, err
	}
	defer pb.Close()
	st, err := storage.Open(ctx, "file://"+filepath.Join(dir, "checkpoints"), storage.Config{})
	if err != nil {
		return res, err
	}
	defer st.Close()
	r := &swapRun{b: b, dir: dir, db: pebbleCfg.Dir, backend: newBallastBackend(pb, swapNode, stateBytes, swapParallelism),
		leader: newSwapLeader(st), log: newArrivalLog(), taskLog: newCaptureLog()}
	defer r.stop()
	if err := r.start(ctx, 0, nil); err != nil {
		return res, err
	}
	if stateBytes > 0 {
		if err := r.fill(ctx); err != nil {
			return res, err
		}
	}
	if res.stateBytes, err = dirSize(pebbleCfg.Dir); err != nil {
		return res, err
	}
	if err := r.waitFlow(r.log.total()+1, time.Minute); err != nil {
		return res, err
	}

	// In place: prepare (off the pause: compile and eddy_open run now),
	// then the swap's savepoint.
	measureFrom := time.Now().UnixNano()
	for i := 1; i <= b.opts.Swaps; i++ {
		time.Sleep(b.opts.Settle) // steady flow between upgrades, not a wait for an event
		before, err := tableFiles(r.db)
		if err != nil {
			return res, err
		}
		if i == 1 {
			res.tables = len(before)
		}
		s := dataflow.Swap{ID: int64(i), Node: swapNode, Module: b.modules[i%2], Config: []byte("{}")}
		if err := r.run.PrepareSwap(ctx, s); err != nil {
			return res, fmt.Errorf("swap %d: prepare: %w", i, err)
		}
		_, acks, err := r.leader.take(ctx, r, dataflow.Trigger{SwapID: s.ID, SwapNode: swapNode})
		if err != nil {
			return res, fmt.Errorf("swap %d: %w", i, err)
		}
		r.run.Complete(acks[0].CheckpointID)
		var pause time.Duration
		for _, a := range acks {
			pause = max(pause, a.SwapPause)
		}
		res.taskPauses = append(res.taskPauses, pause)
		res.captures = append(res.captures, r.taskLog.capture(acks[0].CheckpointID))
		var up int64
		for _, a := range acks {
			up += a.Incremental
		}
		res.uploaded = append(res.uploaded, up)
		after, err := tableFiles(r.db)
		if err != nil {
			return res, err
		}
		var fresh int64
		for _, name := range after {
			if _, found := slices.BinarySearch(before, name); !found {
				fresh++
			}
		}
		res.newTables = append(res.newTables, fresh)
	}
	// The Flink way: savepoint, cancel, a new job from the savepoint.
	resubmits := b.opts.Resubmits
	if stateBytes > 0 {
		resubmits = b.opts.LargeResubmits
	}
	for i := 1; i <= resubmits; i++ {
		time.Sleep(b.opts.Settle)
		ph, err := r.resubmit(ctx, (b.opts.Swaps+i)%2)
		if err != nil {
			return res, fmt.Errorf("resubmit %d: %w", i, err)
		}
		res.phases = append(res.phases, ph)
	}
	time.Sleep(b.opts.Settle) // the last version's output, to close its segment
	pauses, gaps, err := r.log.pauses(b.opts.Swaps+resubmits, measureFrom)
	if err != nil {
		return res, err
	}
	if res.keys, res.records, err = r.log.checkCounts(); err != nil {
		return res, err
	}
	res.swaps, res.resubmits, res.gaps = pauses[:b.opts.Swaps], pauses[b.opts.Swaps:], gaps
	return res, nil
}

// start plans and starts job number r.gen+1 with module version v, from
// restore when not nil.
func (r *swapRun) start(ctx context.Context, v int, restore *checkpoint.Manifest) error {
	spec, err := jobspec.Parse([]byte(r.b.specText(r.b.paths[v])), "")
	if err != nil {
		return err
	}
	job, err := dataflow.NewJob(ctx, spec, dataflow.Options{
		Connectors:    &swapConnectors{log: r.log},
		Engine:        r.b.engine,
		StateBackends: func(string) (state.Backend, error) { return r.backend, nil },
		Logger:        slog.New(r.taskLog),
	})
	if err != nil {
		return err
	}
	r.gen++
	r.job, r.jobID = job, fmt.Sprintf("swap-bench-%d", r.gen)
	runCtx, cancel := context.WithCancel(ctx)
	d := dataflow.Deployment{JobID: r.jobID, Tasks: taskIDs(job), Checkpointing: r.leader.checkpointing(r.prefix(), restore)}
	run, err := job.StartDeployment(runCtx, d, nil)
	if err != nil {
		cancel()
		return err
	}
	r.run, r.cancel = run, cancel
	return nil
}

func (r *swapRun) prefix() string { return checkpoint.JobRoot("default", r.jobID) }

// stop cancels the running deployment and waits for its end.
func (r *swapRun) stop() {
	if r.run == nil {
		return
	}
	r.cancel()
	<-r.run.Done()
	r.run = nil
}

func taskIDs(job *dataflow.Job) []string {
	var ids []string
	for _, t := range job.Tasks() {
		ids = append(ids, t.ID)
	}
	return ids
}

// fill waits for the ballast, then takes a first checkpoint, which
// uploads all of it: a running job would have had one, and a swap's
// savepoint is then incremental like any later checkpoint.
func (r *swapRun) fill(ctx context.Context) error {
	select {
	case <-r.backend.done:
	case <-r.run.Done():
		_, err := r.run.Wait()
		return fmt.Errorf("the job ended while its state was filled: %w", err)
	case <-time.After(10 * time.Minute):
		return errors.New("the state was not filled within 10 minutes")
	}
	if err := r.backend.err(); err != nil {
		return err
	}
	fmt.Printf("  fill: %s of ballast (%d-byte values under the counter's state \"count\", keys the generator never produces) in %v\n",
		sizeLabel(r.backend.written.Load()), ballastValue, r.backend.took().Round(time.Millisecond))
	start := time.Now()
	_, acks, err := r.leader.take(ctx, r, dataflow.Trigger{})
	if err != nil {
		return fmt.Errorf("first checkpoint: %w", err)
	}
	r.run.Complete(acks[0].CheckpointID)
	var full int64
	for _, a := range acks {
		full += a.FullSize
	}
	fmt.Printf("  first checkpoint (uploads the state): %v, %s of state files over the tasks\n", time.Since(start).Round(time.Millisecond), sizeLabel(full))
	// A job that has held its state for a while has no compaction
	// backlog from loading it; the swaps are measured in that state.
	start = time.Now()
	if err := waitQuiet(r.db, 2*time.Second, 2*time.Minute); err != nil {
		return err
	}
	_, acks, err = r.leader.take(ctx, r, dataflow.Trigger{})
	if err != nil {
		return fmt.Errorf("second checkpoint: %w", err)
	}
	r.run.Complete(acks[0].CheckpointID)
	var inc int64
	for _, a := range acks {
		inc += a.Incremental
	}
	fmt.Printf("  compactions settled and a second checkpoint taken in %v (it uploaded %s)\n", time.Since(start).Round(time.Millisecond), sizeLabel(inc))
	return nil
}

// tableFiles lists the table files in the Pebble directory dir.
func tableFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sst") {
			names = append(names, e.Name())
		}
	}
	return names, err
}

// waitQuiet waits until the table files in the Pebble directory dir have
// not changed for quiet (no flush or compaction), for at most within.
func waitQuiet(dir string, quiet, within time.Duration) error {
	tables := func() (string, error) {
		names, err := tableFiles(dir)
		return strings.Join(names, ","), err
	}
	deadline := time.Now().Add(within)
	last, err := tables()
	since := time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			return fmt.Errorf("pebble still compacting after %v", within)
		}
		time.Sleep(100 * time.Millisecond) // a poll
		cur, err2 := tables()
		if err = cmp.Or(err, err2); err != nil {
			return err
		}
		if cur != last {
			last, since = cur, time.Now()
		}
	}
	return nil
}

// waitFlow waits until the sinks received n records and every sink
// subtask at least one of the current version.
func (r *swapRun) waitFlow(n int64, within time.Duration) error {
	deadline := time.Now().Add(within)
	for r.log.total() < n || !r.log.allStarted() {
		select {
		case <-r.run.Done():
			_, err := r.run.Wait()
			return fmt.Errorf("the job ended: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no records at every sink subtask within %v", within)
		}
		time.Sleep(time.Millisecond) // a poll
	}
	return nil
}

// resubmit upgrades to version v the Flink way and reports where the time
// went: the savepoint (trigger to the last ack), its manifest and
// self-contained copy (what the coordinator writes before it cancels the
// job), the cancellation, the new job's planning and start, and its
// tasks' restore of the state until the first records reach every sink
// subtask.
func (r *swapRun) resubmit(ctx context.Context, v int) (ph resubmitPhases, err error) {
	t0 := time.Now()
	m, acks, err := r.leader.take(ctx, r, dataflow.Trigger{Savepoint: true})
	if err != nil {
		return ph, err
	}
	t1 := time.Now()
	sp, err := copySavepoint(ctx, r.leader.store, m, checkpoint.SavepointDir("default", r.jobID, m.Checkpoint))
	if err != nil {
		return ph, err
	}
	r.run.Complete(acks[0].CheckpointID)
	t2 := time.Now()
	r.stop()
	// An exactly-once sink discards what the old job wrote after the
	// savepoint: the new job writes it again.
	r.log.truncate(m.Checkpoint)
	r.log.restart()
	t3 := time.Now()
	if err := r.start(ctx, v, sp); err != nil {
		return ph, err
	}
	t4 := time.Now()
	if err := r.waitFlow(0, 5*time.Minute); err != nil {
		return ph, err
	}
	t5 := time.Now()
	return resubmitPhases{savepoint: t1.Sub(t0), copy: t2.Sub(t1), cancel: t3.Sub(t2), start: t4.Sub(t3), firstRecord: t5.Sub(t4)}, nil
}

// copySavepoint makes checkpoint m self-contained under dir, as the
// coordinator does for a savepoint (task manifests and state files
// copied, then the manifest), and returns it as read back from there.
func copySavepoint(ctx context.Context, st storage.Store, m *checkpoint.Manifest, dir string) (*checkpoint.Manifest, error) {
	c, err := checkpoint.ReadContents(ctx, st, m)
	if err != nil {
		return nil, err
	}
	cp := func(src, dst string) error {
		info, err := st.Stat(ctx, src)
		if err != nil {
			return err
		}
		rc, err := st.Get(ctx, src)
		if err != nil {
			return err
		}
		defer rc.Close()
		return st.Put(ctx, dst, rc, info.Size)
	}
	out := *m
	out.Savepoint = true
	out.Tasks = map[string]string{}
	for _, t := range c.Tasks {
		out.Tasks[t.ID] = checkpoint.TaskManifestKey(dir, m.Checkpoint, t.ID)
		if err := cp(t.Key, out.Tasks[t.ID]); err != nil {
			return nil, fmt.Errorf("savepoint %d: task %s: %w", m.Checkpoint, t.ID, err)
		}
	}
	for _, f := range c.StateFiles {
		if err := cp(checkpoint.StateFileKey(c.Root, f.Key), checkpoint.StateFileKey(dir, f.Key)); err != nil {
			return nil, fmt.Errorf("savepoint %d: %w", m.Checkpoint, err)
		}
	}
	key := checkpoint.SavepointManifestKey(dir)
	if err := checkpoint.WriteManifest(ctx, st, key, &out); err != nil {
		return nil, err
	}
	return checkpoint.ReadManifest(ctx, st, key)
}

// swapLeader plays the coordinator's part of the checkpoint protocol.
type swapLeader struct {
	store  storage.Store
	nextID int64
	signal chan struct{}
	mu     struct {
		sync.Mutex
		acks []dataflow.Ack
	}
}

func newSwapLeader(st storage.Store) *swapLeader {
	return &swapLeader{store: st, signal: make(chan struct{}, 1)}
}

func (l *swapLeader) checkpointing(prefix string, restore *checkpoint.Manifest) *dataflow.Checkpointing {
	return &dataflow.Checkpointing{Store: l.store, Prefix: prefix, Restore: restore, Ack: func(a dataflow.Ack) {
		l.mu.Lock()
		l.mu.acks = append(l.mu.acks, a)
		l.mu.Unlock()
		select {
		case l.signal <- struct{}{}:
		default:
		}
	}}
}

// take triggers the next checkpoint (tr with its ID set) on the running
// deployment, waits for the ack of every task and writes the checkpoint
// manifest, as the leader does before it announces a completion.
func (l *swapLeader) take(ctx context.Context, r *swapRun, tr dataflow.Trigger) (*checkpoint.Manifest, []dataflow.Ack, error) {
	l.nextID++
	tr.ID = l.nextID
	if err := r.run.Trigger(tr); err != nil {
		return nil, nil, err
	}
	tasks := r.job.Tasks()
	got := map[string]dataflow.Ack{}
	deadline := time.NewTimer(5 * time.Minute)
	defer deadline.Stop()
	for len(got) < len(tasks) {
		select {
		case <-l.signal:
		case <-r.run.Done():
			_, err := r.run.Wait()
			return nil, nil, fmt.Errorf("checkpoint %d: the job ended after %d of %d acks: %w", tr.ID, len(got), len(tasks), err)
		case <-deadline.C:
			return nil, nil, fmt.Errorf("checkpoint %d: %d of %d acks within 5 minutes", tr.ID, len(got), len(tasks))
		}
		l.mu.Lock()
		for _, a := range l.mu.acks {
			if a.CheckpointID == tr.ID {
				got[a.Task] = a
			}
		}
		l.mu.acks = l.mu.acks[:0]
		l.mu.Unlock()
	}
	m := &checkpoint.Manifest{Version: checkpoint.Version, Job: r.jobID, Checkpoint: tr.ID, Savepoint: tr.Savepoint || tr.SwapNode != "",
		Tasks: map[string]string{}, MaxParallelism: r.job.Spec().MaxParallelism}
	var acks []dataflow.Ack
	for id, a := range got {
		m.Tasks[id] = a.Manifest
		acks = append(acks, a)
	}
	if err := checkpoint.WriteManifest(ctx, l.store, checkpoint.ManifestKey(r.prefix(), tr.ID), m); err != nil {
		return nil, nil, err
	}
	return m, acks, nil
}

// ballastBackend is the worker's Pebble backend with, in the stores of
// the first tasks of the counter node, a ballast written when the task
// opens them: values of the counter's own state "count" under keys the
// generator never produces, so that the module never reads them but
// every snapshot, swap and restore carries them like any other state.
// Keys are written key group by key group, in ascending order, so that
// Pebble's flushes are mostly trivially moved down rather than
// compacted: a gigabyte fills in seconds, not minutes.
type ballastBackend struct {
	state.Backend
	operator string
	bytes    int64 // over the node's tasks
	done     chan struct{}
	written  atomic.Int64
	start    time.Time
	// filling makes the tasks fill one after the other: with every key
	// written in ascending order, each flush lands after the last.
	filling sync.Mutex
	mu      struct {
		sync.Mutex
		left  int // tasks still to fill
		ended time.Time
		err   error
	}
}

func newBallastBackend(b state.Backend, operator string, bytes int64, tasks int) *ballastBackend {
	bb := &ballastBackend{Backend: b, operator: operator, bytes: bytes, done: make(chan struct{}), start: time.Now()}
	bb.mu.left = tasks
	if bytes == 0 {
		bb.mu.left = 0
		close(bb.done)
	}
	return bb
}

func (b *ballastBackend) OpenTask(scope state.Scope, maxParallelism int, groups state.Range) (state.Store, error) {
	st, err := b.Backend.OpenTask(scope, maxParallelism, groups)
	if err != nil || scope.Operator != b.operator {
		return st, err
	}
	b.mu.Lock()
	fill := b.mu.left > 0
	b.mu.Unlock()
	if !fill {
		return st, nil
	}
	b.filling.Lock()
	ferr := b.fill(st, maxParallelism, groups)
	b.filling.Unlock()
	b.mu.Lock()
	b.mu.left--
	b.mu.err = cmp.Or(b.mu.err, ferr)
	last := b.mu.left == 0
	if last {
		b.mu.ended = time.Now()
	}
	b.mu.Unlock()
	if last {
		close(b.done)
	}
	if ferr != nil {
		_ = st.Close()
		return nil, ferr
	}
	return st, nil
}

// fill writes this task's share of the ballast.
func (b *ballastBackend) fill(st state.Store, maxParallelism int, groups state.Range) error {
	n := b.bytes * int64(groups.Len()) / int64(maxParallelism) / ballastValue
	byGroup := make([][]string, groups.Len())
	for i, found := int64(0), int64(0); found < n; i++ {
		key := fmt.Sprintf("ballast-%012d", i)
		if g := state.KeyGroup([]byte(key), maxParallelism); groups.Contains(g) {
			byGroup[g-groups.Start] = append(byGroup[g-groups.Start], key)
			found++
		}
	}
	rng := rand.NewChaCha8([32]byte{byte(groups.Start)})
	val := make([]byte, ballastValue)
	for _, keys := range byGroup {
		for _, k := range keys {
			_, _ = rng.Read(val) // incompressible, so that the bytes on disk are the bytes written
			if err := st.ValuePut(swapNode, []byte(k), nil, val, 0); err != nil {
				return fmt.Errorf("ballast: %w", err)
			}
			b.written.Add(int64(len(k) + len(val)))
		}
	}
	return nil
}

func (b *ballastBackend) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.err
}

func (b *ballastBackend) took() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.ended.Sub(b.start)
}

// swapConnectors builds the registry's sources and a sink that logs
// every record's arrival into log.
type swapConnectors struct {
	connectors.Registry
	log *arrivalLog
}

func (c *swapConnectors) NewSink(*jobspec.SinkSpec, string) (stream.Sink, error) {
	return &arrivalSink{log: c.log}, nil
}

// arrival is one record at a sink subtask.
type arrival struct {
	at    int64 // unix ns
	key   uint32
	count uint32
	plus  bool // written by counter-plus-c
}

// arrivalLog is what the sink subtasks received, per subtask, in order.
type arrivalLog struct {
	mu struct {
		sync.Mutex
		subtasks [swapParallelism][]arrival
		// started: the subtask received a record since restart.
		started [swapParallelism]bool
		keys    map[string]uint32
		// boundaries are each subtask's log length at a checkpoint's
		// PreCommit: what an exactly-once sink staged for it.
		boundaries map[int64][swapParallelism]int
		n          int64
	}
}

func newArrivalLog() *arrivalLog {
	l := &arrivalLog{}
	l.mu.keys = map[string]uint32{}
	l.mu.boundaries = map[int64][swapParallelism]int{}
	return l
}

var (
	countField = []byte(`"count":`)
	plusField  = []byte(`"v":"plus"`)
)

func (l *arrivalLog) write(subtask int, b *stream.Batch) error {
	now := time.Now().UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range b.Records {
		rec := &b.Records[i]
		k, ok := l.mu.keys[string(rec.Key)]
		if !ok {
			k = uint32(len(l.mu.keys))
			l.mu.keys[string(rec.Key)] = k
		}
		at := bytes.Index(rec.Value, countField)
		if at < 0 {
			return fmt.Errorf("sink: a record without a count: %s", rec.Value)
		}
		digits := rec.Value[at+len(countField):]
		end := bytes.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' })
		if end < 0 {
			end = len(digits)
		}
		count, err := strconv.ParseUint(string(digits[:end]), 10, 32)
		if err != nil {
			return fmt.Errorf("sink: count of %s: %w", rec.Value, err)
		}
		l.mu.subtasks[subtask] = append(l.mu.subtasks[subtask], arrival{at: now, key: k, count: uint32(count), plus: bytes.Contains(rec.Value, plusField)})
	}
	if len(b.Records) > 0 {
		l.mu.started[subtask] = true
	}
	l.mu.n += int64(len(b.Records))
	return nil
}

func (l *arrivalLog) preCommit(subtask int, id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.mu.boundaries[id]
	b[subtask] = len(l.mu.subtasks[subtask])
	l.mu.boundaries[id] = b
}

// truncate drops what the subtasks received after checkpoint id's
// PreCommit.
func (l *arrivalLog) truncate(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.mu.boundaries[id]
	for s := range l.mu.subtasks {
		l.mu.subtasks[s] = l.mu.subtasks[s][:b[s]]
	}
}

func (l *arrivalLog) restart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.started = [swapParallelism]bool{}
}

func (l *arrivalLog) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.n
}

func (l *arrivalLog) allStarted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !slices.Contains(l.mu.started[:], false)
}

// pauses finds the n changes of version in every subtask's log and
// returns the pause of each (the largest over the subtasks of the first
// arrival of the new version minus the last of the old), and the gaps
// between consecutive batches elsewhere from the time from on, sorted:
// the steady flow's own cadence, which bounds any pause from below.
func (l *arrivalLog) pauses(n int, from int64) (pauses, gaps []time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pauses = make([]time.Duration, n)
	for s, log := range l.mu.subtasks {
		changes := 0
		for i := 1; i < len(log); i++ {
			d := time.Duration(log[i].at - log[i-1].at)
			if log[i].plus == log[i-1].plus {
				if d > 0 && log[i-1].at >= from {
					gaps = append(gaps, d)
				}
				continue
			}
			if changes == n {
				return nil, nil, fmt.Errorf("sink subtask %d: more than %d changes of version: records of two versions interleaved", s, n)
			}
			pauses[changes] = max(pauses[changes], d)
			changes++
		}
		if changes != n {
			return nil, nil, fmt.Errorf("sink subtask %d: %d changes of version, want %d", s, changes, n)
		}
	}
	slices.Sort(gaps)
	return pauses, gaps, nil
}

// checkCounts checks that every key's counts went 1, 2, 3… across all
// the upgrades: no reset, no gap, no repeat.
func (l *arrivalLog) checkCounts() (keys int, records int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := make([]uint32, len(l.mu.keys))
	for s, log := range l.mu.subtasks {
		for i, a := range log {
			if a.count != last[a.key]+1 {
				return 0, 0, fmt.Errorf("sink subtask %d, record %d: a count of %d after %d: state lost or output repeated", s, i, a.count, last[a.key])
			}
			last[a.key] = a.count
		}
		records += int64(len(log))
	}
	return len(l.mu.keys), records, nil
}

// arrivalSink logs what it receives. It takes part in checkpoints as an
// exactly-once sink would (PreCommit marks what it staged), so that a
// resubmit can drop what the old job wrote after its savepoint.
type arrivalSink struct {
	log     *arrivalLog
	subtask int
}

func (s *arrivalSink) Open(_ context.Context, info stream.TaskInfo) error {
	if info.Subtask >= swapParallelism {
		return fmt.Errorf("sink subtask %d of %d", info.Subtask, swapParallelism)
	}
	s.subtask = info.Subtask
	return nil
}

func (s *arrivalSink) Write(_ context.Context, b *stream.Batch) error {
	return s.log.write(s.subtask, b)
}
func (s *arrivalSink) PreCommit(_ context.Context, id int64) ([]string, error) {
	s.log.preCommit(s.subtask, id)
	return nil, nil
}
func (s *arrivalSink) Commit(context.Context, int64) error   { return nil }
func (s *arrivalSink) Abort(context.Context, []string) error { return nil }
func (s *arrivalSink) Finish(context.Context) error          { return nil }
func (s *arrivalSink) Close() error                          { return nil }

func (b *swapBench) printResult(r swapResult) {
	fmt.Printf("  %s (%s in the Pebble directory before the swaps): steady flow between batches at a sink subtask p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		r.label, sizeLabel(r.stateBytes), ms(percentile(r.gaps, 50)), ms(percentile(r.gaps, 99)), ms(r.gaps[len(r.gaps)-1]))
	fmt.Printf("    in-place swap, pause at the sinks:    %s\n", durations(r.swaps))
	fmt.Printf("    in-place swap, the tasks' SwapPause:  %s\n", durations(r.taskPauses))
	fmt.Printf("      of which the capture (synchronous part of the snapshot, largest over the tasks): %s\n", durations(r.captures))
	slices.Sort(r.uploaded)
	slices.Sort(r.newTables)
	fmt.Printf("      each swap's savepoint uploaded (incremental) median %s, max %s; %d table files before the swaps, new during a swap's savepoint median %d, max %d\n",
		sizeLabel(r.uploaded[len(r.uploaded)/2]), sizeLabel(r.uploaded[len(r.uploaded)-1]), r.tables, r.newTables[len(r.newTables)/2], r.newTables[len(r.newTables)-1])
	defer fmt.Printf("    checked: the counts of all %d keys went 1, 2, 3… over %d records, across every upgrade (no reset, gap or repeat)\n", r.keys, r.records)
	if len(r.resubmits) == 0 {
		return
	}
	fmt.Printf("    stop-with-savepoint + resubmit pause: %s\n", durations(r.resubmits))
	for i, p := range r.phases {
		fmt.Printf("      resubmit %d: savepoint %v, manifest + copy %v, cancel %v, new job planned and started %v, its restore and first records %v\n",
			i+1, p.savepoint.Round(time.Millisecond), p.copy.Round(time.Millisecond), p.cancel.Round(time.Millisecond),
			p.start.Round(time.Millisecond), p.firstRecord.Round(time.Millisecond))
	}
}

func (b *swapBench) printSummary(results []swapResult) {
	var parts, resub []string
	for _, r := range results {
		parts = append(parts, fmt.Sprintf("%s median %.1f ms max %.1f ms", r.label, ms(median(r.swaps)), ms(slices.Max(r.swaps))))
		if len(r.resubmits) > 0 {
			resub = append(resub, fmt.Sprintf("%s median %.0f ms max %.0f ms (%.0f× the swap's median)", strings.TrimSuffix(r.label, " state"),
				ms(median(r.resubmits)), ms(slices.Max(r.resubmits)), float64(median(r.resubmits))/float64(max(1, median(r.swaps)))))
		}
	}
	line := fmt.Sprintf("  swap pause (%d swaps, %.0fk rec/s): %s", b.opts.Swaps, b.opts.Rate/1000, strings.Join(parts, " | "))
	if len(resub) > 0 {
		line += " | stop-with-savepoint + resubmit: " + strings.Join(resub, ", ")
	}
	fmt.Println(line)
	if len(results) == 2 {
		fmt.Printf("  state-size ratio of the swap pause (large/small): median %.2f, max %.2f\n",
			float64(median(results[1].swaps))/float64(max(1, median(results[0].swaps))),
			float64(slices.Max(results[1].swaps))/float64(max(1, slices.Max(results[0].swaps))))
	}
}

func durations(ds []time.Duration) string {
	var each []string
	for _, d := range ds {
		each = append(each, fmt.Sprintf("%.1f", ms(d)))
	}
	return fmt.Sprintf("median %.1f ms, max %.1f ms  [%s ms]", ms(median(ds)), ms(slices.Max(ds)), strings.Join(each, " "))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func sizeLabel(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KB", n>>10)
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile (a compaction)
			}
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// captureLog is the jobs' logger: it reads from the tasks' debug lines
// the synchronous part of each snapshot (the capture, which a swap waits
// for) and passes warnings and errors on to stderr.
type captureLog struct {
	next  slog.Handler
	times *captureTimes
}

type captureTimes struct {
	mu  sync.Mutex
	max map[int64]time.Duration // by checkpoint, over the tasks
}

func newCaptureLog() *captureLog {
	return &captureLog{next: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), times: &captureTimes{max: map[int64]time.Duration{}}}
}

func (h *captureLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }

func (h *captureLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "checkpoint acknowledged" {
		var id int64
		var d time.Duration
		r.Attrs(func(a slog.Attr) bool {
			switch v := a.Value.Any().(type) {
			case int64:
				if a.Key == "checkpoint" {
					id = v
				}
			case time.Duration:
				if a.Key == "sync_duration" {
					d = v
				}
			}
			return true
		})
		h.times.mu.Lock()
		h.times.max[id] = max(h.times.max[id], d)
		h.times.mu.Unlock()
	}
	if r.Level >= slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *captureLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureLog{next: h.next.WithAttrs(as), times: h.times}
}

func (h *captureLog) WithGroup(name string) slog.Handler {
	return &captureLog{next: h.next.WithGroup(name), times: h.times}
}

// capture is the largest capture of checkpoint id over the tasks, once
// they all acknowledged it.
func (h *captureLog) capture(id int64) time.Duration {
	h.times.mu.Lock()
	defer h.times.mu.Unlock()
	return h.times.max[id]
}

var _ stream.Transactional = (*arrivalSink)(nil)

// loadAverage says how busy the machine is, where Linux tells: the pause
// is mostly waits for the disk and the CPU, which other work lengthens.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return fmt.Sprintf("load average %s on %d cores", f[0], runtime.NumCPU())
	}
	return fmt.Sprintf("%d cores", runtime.NumCPU())
}

// captureAlone times, with no job running, what the capture of a swap's
// savepoint does for a task of the counter: state.CaptureSnapshot of a
// small Pebble store (a flush and a Pebble checkpoint), and one fsync of
// a small file, of which the capture makes several. Medians of ten.
func captureAlone(ctx context.Context) (capture, fsync time.Duration, err error) {
	dir, err := os.MkdirTemp("", "eddy-bench-capture")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	pb, err := state.OpenPebble(state.DefaultPebbleConfig(filepath.Join(dir, "state")))
	if err != nil {
		return 0, 0, err
	}
	defer pb.Close()
	st, err := pb.OpenTask(state.Scope{Tenant: "default", Job: "capture", Operator: swapNode}, 128, state.Range{Start: 0, End: 128})
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var captures, fsyncs []time.Duration
	val := make([]byte, 8)
	for i := range 10 {
		for k := range 500 { // what 400 ms of the job writes, about
			if err := st.ValuePut(swapNode, fmt.Appendf(nil, "card-%d-%d", i, k), nil, val, 0); err != nil {
				return 0, 0, err
			}
		}
		start := time.Now()
		c, err := state.CaptureSnapshot(ctx, st)
		if err != nil {
			return 0, 0, err
		}
		captures = append(captures, time.Since(start))
		c.Discard()
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			return 0, 0, err
		}
		start = time.Now()
		if err := f.Sync(); err != nil {
			return 0, 0, err
		}
		fsyncs = append(fsyncs, time.Since(start))
	}
	return median(captures), median(fsyncs), nil
}
