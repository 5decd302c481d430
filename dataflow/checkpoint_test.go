package dataflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/storage"
)

// Checkpoints end to end: a keyed window and a keyed Wasm counter over a
// paced generator, checkpointing to a file:// store, with the test playing
// the leader (it triggers, collects acks, writes checkpoint manifests and
// announces completions) and crashing runs (cancelled: no Finish) at
// chosen points. The published output after the last run must equal that
// of an uninterrupted run without checkpoints: nothing lost, nothing
// duplicated.

const chkRecords = 20000

// chkJob is splitJob with the source parallelism fixed at 2 (a restore
// needs it) and the rest at $P, paced at $RATE records/s.
const chkJob = `name: chk
parallelism: $P
batch_size: 64
state_backend: $BACKEND
nodes:
  - name: txns
    parallelism: 2
    source: {generator: {kind: transactions, count: 20000, seed: 7, cards: 300, disorder: 2s, rate: $RATE}}
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

// chkRate paces the source so that a run lasts about a second: long
// enough for the test to act while it runs.
const chkRate = 20000

// chkEnv is one job's checkpoint storage, output directory and leader.
type chkEnv struct {
	t       *testing.T
	engine  *host.Engine
	backend string
	store   storage.Store
	root    string // of store
	prefix  string
	out     string

	mu     sync.Mutex
	acks   []dataflow.Ack
	signal chan struct{}

	nextID int64
	last   *checkpoint.Manifest // the latest completed checkpoint
}

func newChkEnv(t *testing.T, engine *host.Engine) *chkEnv {
	t.Helper()
	root := t.TempDir()
	st, err := storage.Open(context.Background(), "file://"+root, storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &chkEnv{t: t, engine: engine, backend: "memory", store: st, root: root, prefix: "tenants/default/jobs/chk", out: t.TempDir(), signal: make(chan struct{}, 1)}
}

func chkSpecText(dir string, parallelism int, rate float64, backend string) string {
	r := strings.NewReplacer("$P", fmt.Sprint(parallelism), "$RATE", fmt.Sprint(rate), "$DIR", dir, "$BACKEND", backend)
	return r.Replace(chkJob)
}

// newJob plans the job at parallelism p with a fresh state backend, as a
// restarted worker would.
func (e *chkEnv) newJob(p int, rate float64) *dataflow.Job {
	return newChkJob(e.t, e.engine, chkSpecText(e.out, p, rate, e.backend), e.backend)
}

func newChkJob(t *testing.T, engine *host.Engine, text, backend string) *dataflow.Job {
	t.Helper()
	spec := parse(t, text)
	b := openBackend(t, backend)
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

func (e *chkEnv) checkpointing() *dataflow.Checkpointing {
	return &dataflow.Checkpointing{Store: e.store, Prefix: e.prefix, Restore: e.last, Ack: func(a dataflow.Ack) {
		e.mu.Lock()
		e.acks = append(e.acks, a)
		e.mu.Unlock()
		select {
		case e.signal <- struct{}{}:
		default:
		}
	}}
}

// anyDone is closed once one of runs ended.
func anyDone(runs []*dataflow.Running) <-chan struct{} {
	done := make(chan struct{})
	var once sync.Once
	for _, r := range runs {
		go func() {
			<-r.Done()
			once.Do(func() { close(done) })
		}()
	}
	return done
}

// checkpoint plays the leader for one checkpoint: trigger it on every
// run, collect the acks of all tasks, write the checkpoint manifest and,
// if complete, tell the runs. It fails the test if a run ends first.
func (e *chkEnv) checkpoint(job *dataflow.Job, runs []*dataflow.Running, complete bool) {
	e.t.Helper()
	e.checkpointWith(job, runs, dataflow.Trigger{}, complete)
}

// checkpointWith is checkpoint with tr's kind (its ID is the next one),
// returning the acks.
func (e *chkEnv) checkpointWith(job *dataflow.Job, runs []*dataflow.Running, tr dataflow.Trigger, complete bool) []dataflow.Ack {
	e.t.Helper()
	e.nextID++
	id := e.nextID
	start := time.Now()
	tr.ID = id
	for _, r := range runs {
		if err := r.Trigger(tr); err != nil {
			e.t.Fatal(err)
		}
	}
	tasks := job.Tasks()
	got := map[string]string{}
	var acks []dataflow.Ack
	var full, incremental int64
	collect := func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, a := range e.acks {
			if a.CheckpointID == id {
				got[a.Task] = a.Manifest
				acks = append(acks, a)
				full += a.FullSize
				incremental += a.Incremental
			}
		}
		e.acks = e.acks[:0]
	}
	done := anyDone(runs)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for collect(); len(got) < len(tasks); collect() {
		select {
		case <-e.signal:
		case <-done:
			collect()
			if len(got) < len(tasks) {
				e.t.Fatalf("checkpoint %d: a run ended after %d of %d acks (the sources ended before the trigger?)", id, len(got), len(tasks))
			}
		case <-deadline.C:
			e.t.Fatalf("checkpoint %d: %d of %d acks within 30s", id, len(got), len(tasks))
		}
	}
	m := &checkpoint.Manifest{Job: "chk", Checkpoint: id, Tasks: got, MaxParallelism: job.Spec().MaxParallelism}
	key := checkpoint.ManifestKey(e.prefix, id)
	if err := checkpoint.WriteManifest(context.Background(), e.store, key, m); err != nil {
		e.t.Fatal(err)
	}
	// A restart reads it back, as a worker does from restore_from.
	var err error
	if e.last, err = checkpoint.ReadManifest(context.Background(), e.store, key); err != nil {
		e.t.Fatal(err)
	}
	if complete {
		for _, r := range runs {
			r.Complete(id)
		}
	}
	e.t.Logf("checkpoint %d completed in %v: state %d bytes, %d new", id, time.Since(start).Round(time.Millisecond), full, incremental)
	return acks
}

// sourceRecords is what the job's source produced in its current run.
func sourceRecords(job *dataflow.Job) int64 {
	for _, n := range job.Stats() {
		if n.Name == "txns" {
			return n.Out
		}
	}
	return 0
}

// waitRecords waits until the source produced n records in this run,
// failing the test if the run ends first.
func waitRecords(t *testing.T, job *dataflow.Job, runs []*dataflow.Running, n int64) {
	t.Helper()
	done := anyDone(runs)
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the source to produce %d records", n), func() bool {
		select {
		case <-done:
			t.Fatalf("the run ended before its source produced %d records (%d)", n, sourceRecords(job))
		default:
		}
		return sourceRecords(job) >= n
	})
}

// attempt is one run of a scenario: checkpoints once the source produced
// so many records (in this run), then a crash at crashAt, or the run to
// its end when crashAt is 0. uncommitted: the last checkpoint completes
// (its manifest is written) but the crash comes before the sinks hear of
// it.
type attempt struct {
	parallelism int
	checkpoints []int64
	uncommitted bool
	crashAt     int64
}

// runLocal runs an attempt with every task in one deployment.
func (e *chkEnv) runLocal(a attempt) {
	e.t.Helper()
	job := e.newJob(a.parallelism, chkRate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := dataflow.Deployment{JobID: "chk", Tasks: taskIDs(job), Checkpointing: e.checkpointing()}
	run, err := job.StartDeployment(ctx, d, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.play(a, job, []*dataflow.Running{run}, []context.CancelFunc{cancel})
}

func taskIDs(job *dataflow.Job) []string {
	var ids []string
	for _, ts := range job.Tasks() {
		ids = append(ids, ts.ID)
	}
	return ids
}

// play drives a started attempt: its checkpoints, then its crash (the
// first cancel is the worker that dies) or its end.
func (e *chkEnv) play(a attempt, job *dataflow.Job, runs []*dataflow.Running, cancels []context.CancelFunc) {
	e.t.Helper()
	for i, at := range a.checkpoints {
		waitRecords(e.t, job, runs, at)
		e.checkpoint(job, runs, !(a.uncommitted && i == len(a.checkpoints)-1))
	}
	if a.crashAt == 0 {
		for i, r := range runs {
			if _, err := r.Wait(); err != nil {
				e.t.Fatalf("deployment %d: %v", i, err)
			}
		}
		return
	}
	if !a.uncommitted {
		waitRecords(e.t, job, runs, a.crashAt)
	}
	cancels[0]()
	for i, r := range runs {
		select {
		case <-r.Done():
		case <-time.After(30 * time.Second):
			e.t.Fatalf("deployment %d did not stop within 30s of the crash", i)
		}
		_, err := r.Wait()
		if i == 0 && !errors.Is(err, context.Canceled) {
			e.t.Fatalf("crashed deployment: %v", err)
		}
		if i > 0 && !errors.Is(err, dataflow.ErrChannelLost) {
			e.t.Fatalf("deployment %d after its peer crashed: %v, want ErrChannelLost", i, err)
		}
	}
	e.t.Logf("crashed after %d records; restoring from checkpoint %d", sourceRecords(job), e.lastID())
}

func (e *chkEnv) lastID() int64 {
	if e.last == nil {
		return 0
	}
	return e.last.Checkpoint
}

// chkOutput is the sorted lines of the published files of both sinks. It
// fails the test if a hidden (staged or temporary) file is left.
func chkOutput(t *testing.T, dir string) (counts, windows []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "."):
			t.Errorf("left behind: %s", name)
		case strings.HasPrefix(name, "counts.jsonl"):
			counts = append(counts, fileLines(t, filepath.Join(dir, name))...)
		case strings.HasPrefix(name, "windows.jsonl"):
			windows = append(windows, fileLines(t, filepath.Join(dir, name))...)
		}
	}
	slices.Sort(counts)
	slices.Sort(windows)
	return counts, windows
}

func fileLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] != "" {
		t.Fatalf("%s: the last line has no newline", path)
	}
	return lines[:len(lines)-1]
}

// chkReference runs the job at full speed without checkpoints.
func chkReference(t *testing.T, engine *host.Engine) (counts, windows []string) {
	t.Helper()
	dir := t.TempDir()
	job := newChkJob(t, engine, chkSpecText(dir, 2, 0, "memory"), "memory")
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	counts, windows = chkOutput(t, dir)
	if len(counts) != chkRecords || len(windows) < 1000 {
		t.Fatalf("reference run: %d counts and %d windows, want %d and more than 1000", len(counts), len(windows), chkRecords)
	}
	return counts, windows
}

func compareOutput(t *testing.T, dir string, wantCounts, wantWindows []string) {
	t.Helper()
	counts, windows := chkOutput(t, dir)
	diff("counts", counts, wantCounts, t)
	diff("windows", windows, wantWindows, t)
}

// diff reports lines missing from got and lines too many in it.
func diff(what string, got, want []string, t *testing.T) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range got {
		count[l]--
	}
	var missing, extra []string
	for l, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, l)
		}
		for ; n < 0; n++ {
			extra = append(extra, l)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	t.Errorf("%s: %d lines, want %d: %d missing %q, %d duplicated or wrong %q", what, len(got), len(want), len(missing), missing[:min(3, len(missing))], len(extra), extra[:min(3, len(extra))])
}

// TestCheckpointExactlyOnce crashes the job at several points, each
// attempt restarting from the latest completed checkpoint, and checks
// that the published output equals an uninterrupted run's.
func TestCheckpointExactlyOnce(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	wantCounts, wantWindows := chkReference(t, engine)
	for _, tc := range []struct {
		name     string
		attempts []attempt
	}{
		{"crash after checkpoints", []attempt{
			{parallelism: 2, checkpoints: []int64{3000, 6000}, crashAt: 8000},
			{parallelism: 2},
		}},
		{"crash before the first checkpoint", []attempt{
			{parallelism: 2, crashAt: 3000},
			{parallelism: 2, checkpoints: []int64{2000, 5000}, crashAt: 7000},
			{parallelism: 2},
		}},
		{"crash before the completion reaches the sinks", []attempt{
			{parallelism: 2, checkpoints: []int64{2000, 5000}, uncommitted: true, crashAt: 1},
			{parallelism: 2, checkpoints: []int64{3000}, uncommitted: true, crashAt: 1},
			{parallelism: 2},
		}},
		{"several crashes", []attempt{
			{parallelism: 2, checkpoints: []int64{2000}, crashAt: 4000},
			{parallelism: 2, checkpoints: []int64{1000, 3000}, crashAt: 3500},
			{parallelism: 2, checkpoints: []int64{2000}, crashAt: 6000},
			{parallelism: 2, checkpoints: []int64{1000}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newChkEnv(t, engine)
			for _, a := range tc.attempts {
				e.runLocal(a)
			}
			compareOutput(t, e.out, wantCounts, wantWindows)
		})
	}
}

// TestCheckpointRescale restores a checkpoint taken at parallelism 2 at
// parallelism 3 (the source stays at 2): keyed state is split by key
// group, the sinks' staged output taken over by the new subtasks.
func TestCheckpointRescale(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	wantCounts, wantWindows := chkReference(t, engine)
	for _, tc := range []struct {
		name     string
		attempts []attempt
	}{
		{"2 to 3", []attempt{
			{parallelism: 2, checkpoints: []int64{3000, 6000}, crashAt: 8000},
			{parallelism: 3},
		}},
		{"2 to 3 to 2", []attempt{
			{parallelism: 2, checkpoints: []int64{3000}, uncommitted: true, crashAt: 1},
			{parallelism: 3, checkpoints: []int64{3000}, crashAt: 5000},
			{parallelism: 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newChkEnv(t, engine)
			for _, a := range tc.attempts {
				e.runLocal(a)
			}
			compareOutput(t, e.out, wantCounts, wantWindows)
		})
	}
}

// TestCheckpointPebble runs a crash and restore on the Pebble backend.
func TestCheckpointPebble(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	wantCounts, wantWindows := chkReference(t, engine)
	e := newChkEnv(t, engine)
	e.backend = "pebble"
	e.runLocal(attempt{parallelism: 2, checkpoints: []int64{2000, 5000}, crashAt: 7000})
	e.runLocal(attempt{parallelism: 3})
	compareOutput(t, e.out, wantCounts, wantWindows)
}

// TestCheckpointAcrossExchanges splits every attempt over two workers, so
// that every keyed task aligns a local channel with a remote one (barriers
// as Exchange frames); a crash kills one worker, which fails the other.
func TestCheckpointAcrossExchanges(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	wantCounts, wantWindows := chkReference(t, engine)
	e := newChkEnv(t, engine)
	a, b := startWorker(t), startWorker(t)
	for i, at := range []attempt{
		{parallelism: 2, checkpoints: []int64{1500, 3500}, crashAt: 5000},
		{parallelism: 2, checkpoints: []int64{2000}, uncommitted: true, crashAt: 1},
		{parallelism: 2, checkpoints: []int64{1500}},
	} {
		e.playSplit(at, i, e.newJob(at.parallelism, chkRate), e.newJob(at.parallelism, chkRate), a, b)
	}
	compareOutput(t, e.out, wantCounts, wantWindows)
}

// playSplit plays attempt i with the tasks of one job alternately on
// worker a (as jobA) and worker b (as jobB).
func (e *chkEnv) playSplit(at attempt, i int, jobA, jobB *dataflow.Job, a, b *testWorker) {
	t := e.t
	t.Helper()
	da, db := split(t, jobA.Spec(), a, b, int64(i+1), func(i int, _ dataflow.TaskSpec) bool { return i%2 == 0 })
	da.Checkpointing, db.Checkpointing = e.checkpointing(), e.checkpointing()
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	runA, err := jobA.StartDeployment(ctxA, da, a.ex)
	if err != nil {
		t.Fatal(err)
	}
	runB, err := jobB.StartDeployment(ctxB, db, b.ex)
	if err != nil {
		t.Fatal(err)
	}
	// Both jobs count the source records of their own tasks; the
	// thresholds are per worker.
	e.play(at, jobA, []*dataflow.Running{runA, runB}, []context.CancelFunc{cancelA, cancelB})
}

// TestRestoreErrors: a checkpoint that cannot be read fails the deployment
// with a checkpoint.RestoreError naming it and one clear line naming what
// is wrong; one that does not fit the job with checkpoint.ErrIncompatible.
func TestRestoreErrors(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	base := newChkEnv(t, engine)
	base.runLocal(attempt{parallelism: 2, checkpoints: []int64{2000}, crashAt: 3000})
	chk := base.last
	ctx := context.Background()

	// What the leader keeps of the checkpoint: every task manifest, and
	// the state files of the four keyed tasks.
	contents, err := checkpoint.ReadContents(ctx, base.store, chk)
	if err != nil {
		t.Fatal(err)
	}
	files := contents.Keys()
	manifests, states := 0, 0
	for _, k := range files {
		if _, err := base.store.Stat(ctx, k); err != nil {
			t.Errorf("checkpoint file %s: %v", k, err)
		}
		switch {
		case strings.HasPrefix(k, base.prefix+"/chk/1/"):
			manifests++
		case strings.HasPrefix(k, base.prefix+"/shared/"):
			states++
		}
	}
	if manifests != 6 || states == 0 || states > 4 || manifests+states != len(files) {
		t.Errorf("checkpoint files %q", files)
	}

	stateFile := func(t *testing.T, st storage.Store) string {
		infos, err := st.List(ctx, base.prefix+"/shared/")
		if err != nil || len(infos) == 0 {
			t.Fatalf("no state files: %v", err)
		}
		return infos[0].Key
	}
	put := func(t *testing.T, st storage.Store, key string, data []byte) {
		if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	editManifest := func(t *testing.T, st storage.Store, task string, edit func(m map[string]any)) {
		key := chk.Tasks[task]
		rc, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		data, _ = json.Marshal(m)
		put(t, st, key, data)
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, st storage.Store)
		spec   string // "" for the checkpoint's
		start  bool   // the error comes from StartDeployment, else from the run
		is     []error
		msg    string
	}{
		{name: "missing task manifest", start: true, is: []error{checkpoint.ErrRestore, storage.ErrNotFound},
			damage: func(t *testing.T, st storage.Store) {
				if err := st.Delete(ctx, chk.Tasks["per_card[1]"]); err != nil {
					t.Fatal(err)
				}
			}, msg: "job chk: restore checkpoint 1: task manifest tenants/default/jobs/chk/chk/1/per_card[1].json: storage: not found"},
		{name: "corrupt task manifest", start: true, is: []error{checkpoint.ErrRestore},
			damage: func(t *testing.T, st storage.Store) {
				put(t, st, chk.Tasks["txns[0]"], []byte(`{"version":1,"checkpoint":`))
			},
			msg: "job chk: restore checkpoint 1: task manifest tenants/default/jobs/chk/chk/1/txns[0].json: corrupt: unexpected end of JSON input"},
		{name: "task manifest of another task", start: true, is: []error{checkpoint.ErrRestore},
			damage: func(t *testing.T, st storage.Store) {
				editManifest(t, st, "counts[0]", func(m map[string]any) { m["task"] = "counts[1]" })
			}, msg: "task manifest tenants/default/jobs/chk/chk/1/counts[0].json: of task counts[1] of checkpoint 1, not of task counts[0]"},
		{name: "missing state file", is: []error{checkpoint.ErrRestore, storage.ErrNotFound},
			damage: func(t *testing.T, st storage.Store) {
				if err := st.Delete(ctx, stateFile(t, st)); err != nil {
					t.Fatal(err)
				}
			}, msg: "restore checkpoint 1: state of "},
		{name: "corrupt state file", is: []error{checkpoint.ErrRestore, storage.ErrCorrupt},
			damage: func(t *testing.T, st storage.Store) {
				put(t, st, stateFile(t, st), []byte("eddy-full-snapshot-1\nnot what it was"))
			},
			msg: "restore checkpoint 1: state of "},
		{name: "bad source position", is: []error{checkpoint.ErrRestore, connectors.ErrBadPosition},
			damage: func(t *testing.T, st storage.Store) {
				editManifest(t, st, "txns[1]", func(m map[string]any) {
					m["source"].(map[string]any)["position"] = base64.StdEncoding.EncodeToString([]byte("f\x01\x05\x01"))
				})
			}, msg: "job chk failed: task txns[1]: restore checkpoint 1: source txns: seek: generator: connectors: bad source position: not a generator position"},
		{name: "source parallelism changed", start: true, is: []error{checkpoint.ErrIncompatible},
			spec: strings.Replace(chkSpecText(base.out, 2, chkRate, "memory"), "parallelism: 2\n    source", "parallelism: 3\n    source", 1),
			msg:  "job chk: checkpoint 1 was taken with source txns at parallelism 2, not 3"},
		{name: "max parallelism changed", start: true, is: []error{checkpoint.ErrIncompatible},
			spec: strings.Replace(chkSpecText(base.out, 2, chkRate, "memory"), "batch_size: 64", "batch_size: 64\nmax_parallelism: 64", 1),
			msg:  "job chk: checkpoint 1 was taken with max_parallelism 128, not 64: key groups would not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.CopyFS(root, os.DirFS(base.root)); err != nil {
				t.Fatal(err)
			}
			st, err := storage.Open(ctx, "file://"+root, storage.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if tc.damage != nil {
				tc.damage(t, st)
			}
			// The sinks' staged output is part of the checkpoint too.
			out := t.TempDir()
			if err := os.CopyFS(out, os.DirFS(base.out)); err != nil {
				t.Fatal(err)
			}
			text := tc.spec
			if text == "" {
				text = chkSpecText(out, 2, chkRate, "memory")
			}
			job := newChkJob(t, engine, text, "memory")
			runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			d := dataflow.Deployment{JobID: "chk", Tasks: taskIDs(job),
				Checkpointing: &dataflow.Checkpointing{Store: st, Prefix: base.prefix, Restore: chk}}
			run, err := job.StartDeployment(runCtx, d, nil)
			if !tc.start {
				if err != nil {
					t.Fatalf("StartDeployment: %v", err)
				}
				_, err = run.Wait()
			} else if run != nil {
				cancel()
				run.Wait()
				t.Fatal("StartDeployment started a deployment from a bad checkpoint")
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.is {
				if !errors.Is(err, want) {
					t.Errorf("%v\ndoes not match %v", err, want)
				}
			}
			// What the worker reports to the leader, beside the text.
			id, failed := checkpoint.FailedRestore(err)
			if restore := errors.Is(err, checkpoint.ErrRestore); failed != restore || restore && id != chk.Checkpoint {
				t.Errorf("FailedRestore = %d, %v; want checkpoint %d if it matches ErrRestore", id, failed, chk.Checkpoint)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.msg) {
				t.Errorf("error\n\t%s\nwant one line with\n\t%s", msg, tc.msg)
			}
			t.Log(err)
		})
	}
}

// TestTrigger: a deployment without checkpointing refuses triggers; one
// with it ignores repeated ids.
func TestTrigger(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	e := newChkEnv(t, engine)
	job := e.newJob(2, chkRate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := job.StartDeployment(ctx, dataflow.Deployment{JobID: "chk", Tasks: taskIDs(job)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Trigger(dataflow.Trigger{ID: 1}); err == nil || !strings.Contains(err.Error(), "does not checkpoint") {
		t.Fatalf("Trigger without checkpointing: %v", err)
	}
	run.Complete(1) // harmless
	cancel()
	if _, err := run.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	job = e.newJob(2, chkRate)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	run, err = job.StartDeployment(ctx, dataflow.Deployment{JobID: "chk", Tasks: taskIDs(job), Checkpointing: e.checkpointing()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Trigger(dataflow.Trigger{ID: 0}); err == nil {
		t.Fatal("checkpoint 0 was triggered")
	}
	e.nextID = 4
	e.checkpoint(job, []*dataflow.Running{run}, true)
	if err := run.Trigger(dataflow.Trigger{ID: 5}); err != nil {
		t.Fatalf("a repeated trigger: %v", err)
	}
	e.checkpoint(job, []*dataflow.Running{run}, true)
	cancel()
	run.Wait()
}
