package dataflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// Hot swaps in the dataflow: a keyed counter job (counter-c or
// counter-go) over a paced generator, checkpointing to a file:// store
// with the test as the leader (chkEnv), whose counter node is swapped at
// the barrier of a swap savepoint. The sink is exactly-once, and writes
// one file per subtask and checkpoint (counts.jsonl.part-S-N), so the
// files up to the swap's savepoint are exactly the output before its
// barrier, task by task.

const swapRecords = 20000

// swapJob chains a built-in pass-through before the counter (with the
// source) and one after it (with the sink): they count their opens, so
// the test sees that the swap restarted neither.
const swapJob = `name: chk
parallelism: 2
batch_size: 64
state_backend: memory
nodes:
  - name: txns
    parallelism: 2
    source: {generator: {kind: transactions, count: 20000, seed: 7, cards: 100, rate: $RATE}}
  - name: pre
    input: txns
    wasm: {module: $PRE}
  - name: counts
    input: pre
    key_by: card
    wasm: {module: $ROOT/udfs/build/$MODULE.wasm}
  - name: post
    input: counts
    wasm: {module: pass}
  - name: counts_out
    input: post
    sink: {file: {path: $DIR/counts.jsonl}}
`

// passOp hands its input on and counts the opens of every pass node.
type passOp struct{ opens *atomic.Int64 }

func (p passOp) Open(context.Context, stream.TaskInfo) error { p.opens.Add(1); return nil }
func (p passOp) Process(_ context.Context, in, out *stream.Batch) error {
	out.AddRecords(in.Records)
	return nil
}
func (passOp) Finish(context.Context, *stream.Batch) error { return nil }
func (passOp) Close() error                                { return nil }

// newSwapJob plans swapJob with module as the counter, paced at rate.
func (e *chkEnv) newSwapJob(module, pre string, rate float64, opens *atomic.Int64) *dataflow.Job {
	e.t.Helper()
	text := strings.NewReplacer("$RATE", fmt.Sprint(rate), "$DIR", e.out, "$MODULE", module, "$PRE", pre).Replace(swapJob)
	b := openBackend(e.t, "memory")
	job, err := dataflow.NewJob(context.Background(), parse(e.t, text), dataflow.Options{
		Connectors:      connectors.Registry{},
		Engine:          e.engine,
		StateBackends:   func(string) (state.Backend, error) { return b, nil },
		NativeOperators: map[string]func() stream.Operator{"pass": func() stream.Operator { return passOp{opens} }},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return job
}

func loadModule(t *testing.T, e *host.Engine, path string) *host.Module {
	t.Helper()
	root, _ := filepath.Abs("..")
	m, err := e.Load(context.Background(), filepath.Join(root, path))
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return m
}

func udf(t *testing.T, e *host.Engine, name string) *host.Module {
	return loadModule(t, e, "udfs/build/"+name+".wasm")
}

// countLine is one line of the counter's output.
type countLine struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
	V     string `json:"v"`
}

// swapOutput reads the published output by the checkpoint of its file;
// lines of files published at the end of the input (after the last
// checkpoint) count as the last checkpoint's + 1.
func swapOutput(t *testing.T, dir string) map[int64][]countLine {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^counts\.jsonl\.part-(\d+)-(\d+)$`)
	out := map[int64][]countLine{}
	for _, e := range entries {
		m := name.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("unexpected file in the output: %s", e.Name())
			continue
		}
		n, _ := strconv.ParseInt(m[2], 10, 64)
		for _, l := range fileLines(t, filepath.Join(dir, e.Name())) {
			var c countLine
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatalf("%s: %q: %v", e.Name(), l, err)
			}
			out[n] = append(out[n], c)
		}
	}
	return out
}

// checkContinuous checks that each key's counts are 1, 2, … n once each,
// over segments of checkpoints that restart at the given checkpoints
// (a dropped state: the new version counts from 1 again), and that they
// sum to swapRecords.
func checkContinuous(t *testing.T, out map[int64][]countLine, restartAfter ...int64) {
	t.Helper()
	segment := func(n int64) int {
		s := 0
		for _, r := range restartAfter {
			if n > r {
				s++
			}
		}
		return s
	}
	counts := map[string]map[int][]int64{} // key → segment → counts
	total := 0
	for n, lines := range out {
		for _, l := range lines {
			if counts[l.Key] == nil {
				counts[l.Key] = map[int][]int64{}
			}
			counts[l.Key][segment(n)] = append(counts[l.Key][segment(n)], l.Count)
			total++
		}
	}
	if total != swapRecords {
		t.Errorf("%d lines, want %d", total, swapRecords)
	}
	bad := 0
	for key, segs := range counts {
		for s, cs := range segs {
			slices.Sort(cs)
			for i, c := range cs {
				if c != int64(i+1) && bad < 5 {
					bad++
					t.Errorf("key %s, segment %d: counts %v…: %d where %d belongs (a gap or a repeat)", key, s, cs[:min(len(cs), 10)], c, i+1)
					break
				}
			}
		}
	}
}

// checkVersions checks that the lines of checkpoints ≤ at carry v1's
// mark and those after it v2's, and that there are both.
func checkVersions(t *testing.T, out map[int64][]countLine, at int64, v1, v2 string) {
	t.Helper()
	var before, after int
	for n, lines := range out {
		want := v1
		if n > at {
			want = v2
		}
		for _, l := range lines {
			if l.V != want {
				t.Fatalf("checkpoint %d (swap at %d): line of version %q, want %q: %+v", n, at, l.V, want, l)
			}
			if n > at {
				after++
			} else {
				before++
			}
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("%d lines before the swap and %d after it: the swap was not mid-stream", before, after)
	}
	t.Logf("%d lines of v1, %d of v2", before, after)
}

// swapRuns starts the job's deployment on one worker, or split over two
// (each keyed task then aligns a local channel with a remote one: swap
// barriers as Exchange frames).
func (e *chkEnv) swapRuns(module string, workers int, opens *atomic.Int64) ([]*dataflow.Job, []*dataflow.Running) {
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	return e.swapRunsWith(ctx, module, "pass", workers, opens)
}

// swapRunsWith is swapRuns with pre's module ("pass", or a Wasm module)
// and the runs' context; they restore from e.last.
func (e *chkEnv) swapRunsWith(ctx context.Context, module, pre string, workers int, opens *atomic.Int64) ([]*dataflow.Job, []*dataflow.Running) {
	e.t.Helper()
	const rate = 8000 // about 2.5 s, for the swaps to be mid-stream
	if workers == 1 {
		job := e.newSwapJob(module, pre, rate, opens)
		run, err := job.StartDeployment(ctx, dataflow.Deployment{JobID: "chk", Tasks: taskIDs(job), Checkpointing: e.checkpointing()}, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		return []*dataflow.Job{job}, []*dataflow.Running{run}
	}
	a, b := startWorker(e.t), startWorker(e.t)
	jobA, jobB := e.newSwapJob(module, pre, rate, opens), e.newSwapJob(module, pre, rate, opens)
	da, db := split(e.t, jobA.Spec(), a, b, 1, func(i int, _ dataflow.TaskSpec) bool { return i%2 == 0 })
	da.Checkpointing, db.Checkpointing = e.checkpointing(), e.checkpointing()
	runA, err := jobA.StartDeployment(ctx, da, a.ex)
	if err != nil {
		e.t.Fatal(err)
	}
	runB, err := jobB.StartDeployment(ctx, db, b.ex)
	if err != nil {
		e.t.Fatal(err)
	}
	return []*dataflow.Job{jobA, jobB}, []*dataflow.Running{runA, runB}
}

// prepareAll prepares s on every run, as each worker does on SwapPrepare.
func prepareAll(t *testing.T, runs []*dataflow.Running, s dataflow.Swap) {
	t.Helper()
	for _, r := range runs {
		start := time.Now()
		if err := r.PrepareSwap(context.Background(), s); err != nil {
			t.Fatalf("PrepareSwap %d (%s): %v", s.ID, s.Module.Name(), err)
		}
		t.Logf("swap %d to %s prepared in %v", s.ID, s.Module.Name(), time.Since(start).Round(time.Microsecond))
	}
}

// swapAt plays the leader for a swap savepoint and returns its id,
// checking that each task of the node reported its pause.
func (e *chkEnv) swapAt(job *dataflow.Job, runs []*dataflow.Running, swapID int64, node string) int64 {
	e.t.Helper()
	ofNode := map[string]bool{}
	for _, ts := range job.Tasks() {
		ofNode[ts.ID] = slices.Contains(ts.Chain, node)
	}
	acks := e.checkpointWith(job, runs, dataflow.Trigger{SwapID: swapID, SwapNode: node}, true)
	paused := 0
	for _, a := range acks {
		if ofNode[a.Task] {
			paused++
			if a.SwapPause <= 0 || a.SwapPause > a.Duration {
				e.t.Errorf("task %s: swap pause %v (checkpoint took %v)", a.Task, a.SwapPause, a.Duration)
			}
			e.t.Logf("task %s: swap pause %v", a.Task, a.SwapPause)
		} else if a.SwapPause != 0 {
			e.t.Errorf("task %s of another node reported a swap pause of %v", a.Task, a.SwapPause)
		}
	}
	if paused != 2 {
		e.t.Errorf("%d tasks of %s acknowledged the swap, want 2", paused, node)
	}
	return e.nextID
}

func waitAll(t *testing.T, runs []*dataflow.Running) {
	t.Helper()
	for i, r := range runs {
		if _, err := r.Wait(); err != nil {
			t.Fatalf("deployment %d: %v", i, err)
		}
	}
}

// TestSwapInPlace swaps the counter mid-stream, on one worker and across
// two: every key's count goes on from v1's, without a gap or a repeat;
// the output before the swap's barrier is v1's and after it v2's; the
// stages chained before and after the counter never reopened.
func TestSwapInPlace(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			e := newChkEnv(t, engine)
			var opens atomic.Int64
			plus := udf(t, engine, "counter-plus-c")
			jobs, runs := e.swapRuns("counter-c", workers, &opens)
			waitRecords(t, jobs[0], runs, 1500/int64(workers))
			e.checkpoint(jobs[0], runs, true)
			prepareAll(t, runs, dataflow.Swap{ID: 1, Node: "counts", Module: plus})
			waitRecords(t, jobs[0], runs, 4000/int64(workers))
			at := e.swapAt(jobs[0], runs, 1, "counts")
			waitRecords(t, jobs[0], runs, 7000/int64(workers))
			e.checkpoint(jobs[0], runs, true)
			waitAll(t, runs)
			out := swapOutput(t, e.out)
			checkContinuous(t, out)
			checkVersions(t, out, at, "", "plus")
			// Each of pre and post has 2 subtasks, each opened once.
			if n := opens.Load(); n != 4 {
				t.Errorf("the pass-through stages opened %d times, want 4", n)
			}
		})
	}
}

// TestSwapGoC swaps a Go-built counter for the C-built one and back: the
// same state encoding, so the counts go on.
func TestSwapGoC(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	e := newChkEnv(t, engine)
	var opens atomic.Int64
	c, goBuilt := udf(t, engine, "counter-c"), udf(t, engine, "counter-go")
	jobs, runs := e.swapRuns("counter-go", 1, &opens)
	waitRecords(t, jobs[0], runs, 2000)
	prepareAll(t, runs, dataflow.Swap{ID: 1, Node: "counts", Module: c})
	e.swapAt(jobs[0], runs, 1, "counts")
	waitRecords(t, jobs[0], runs, 6000)
	prepareAll(t, runs, dataflow.Swap{ID: 2, Node: "counts", Module: goBuilt, Config: []byte("{}")})
	e.swapAt(jobs[0], runs, 2, "counts")
	waitAll(t, runs)
	checkContinuous(t, swapOutput(t, e.out))
}

// TestSwapRefused: every refusal is one line a user can act on and
// leaves the job as it was (its output is v1's, uninterrupted); a
// dropped state allowed then swapped in starts empty, the old one
// unread.
func TestSwapRefused(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	e := newChkEnv(t, engine)
	var opens atomic.Int64
	modules := map[string]*host.Module{}
	for _, name := range []string{"counter-kind-c", "counter-renamed-c", "counter-plus-c", "card-stats-c", "counter-c"} {
		modules[name] = udf(t, engine, name)
	}
	// A module the validator refuses never reaches PrepareSwap: the
	// worker's Load (or Compile) says why, in one line.
	root, _ := filepath.Abs("..")
	if _, err := engine.Load(context.Background(), filepath.Join(root, "host/testdata/missing_export.wasm")); err == nil ||
		!strings.Contains(err.Error(), "eddy_process") || strings.Contains(err.Error(), "\n") || !errors.Is(err, host.ErrInvalidModule) {
		t.Errorf("Load of a module without eddy_process: %v", err)
	}
	jobs, runs := e.swapRuns("counter-c", 1, &opens)
	run := runs[0]
	waitRecords(t, jobs[0], runs, 1000)
	for i, tc := range []struct {
		name   string
		swap   dataflow.Swap
		module string
		err    string // the whole line; $MODULE is the module's name
	}{
		{name: "state kind changed", module: "counter-kind-c",
			err: `node counts: the new version declares state "count" as list state; the running version declared it as value state`},
		{name: "state dropped", module: "counter-renamed-c",
			err: `node counts: state "count" of the running version is not declared by the new one: use --allow-dropped-state to drop it`},
		{name: "config refused", module: "counter-plus-c", swap: dataflow.Swap{Config: []byte(`{"bogus":1}`)},
			err: `node counts: operator chk/counts[0]: eddy_open failed: counter: config: unknown key "bogus"`},
		{name: "config not JSON", module: "counter-plus-c", swap: dataflow.Swap{Config: []byte(`[1]`)},
			err: `node counts: operator chk/counts[0]: eddy_open failed: counter: config is not a JSON object`},
		{name: "aggregate module", module: "card-stats-c",
			err: `node counts: module $MODULE is an aggregate module, which folds windows: it cannot replace an operator`},
		{name: "built-in node", module: "counter-c", swap: dataflow.Swap{Node: "post"},
			err: `node post runs a built-in operator, not a Wasm module`},
		{name: "source node", module: "counter-plus-c", swap: dataflow.Swap{Node: "txns"}, err: `node txns is not a Wasm node`},
		{name: "sink node", module: "counter-plus-c", swap: dataflow.Swap{Node: "counts_out"}, err: `node counts_out is not a Wasm node`},
		{name: "unknown node", module: "counter-plus-c", swap: dataflow.Swap{Node: "nope"}, err: `job chk has no node nope`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.swap
			s.ID = int64(i + 1)
			if s.Node == "" {
				s.Node = "counts"
			}
			s.Module = modules[tc.module]
			want := strings.ReplaceAll(tc.err, "$MODULE", s.Module.Name())
			err := run.PrepareSwap(context.Background(), s)
			if err == nil || err.Error() != want {
				t.Fatalf("PrepareSwap: %v\nwant %s", err, want)
			}
			run.DropSwap(s.ID) // harmless: nothing is prepared
		})
	}
	// A refused swap left nothing prepared: its barrier fails nothing
	// only if prepared, so prepare one for real, drop it, and check the
	// job still runs v1 through a plain checkpoint.
	renamed := modules["counter-renamed-c"]
	prepareAll(t, runs, dataflow.Swap{ID: 20, Node: "counts", Module: renamed, AllowDroppedState: true})
	run.DropSwap(20)
	waitRecords(t, jobs[0], runs, 3000)
	e.checkpoint(jobs[0], runs, true)
	// Now swap it in: "total" starts empty, so every key counts from 1
	// again; "count" stays in the store, unread.
	prepareAll(t, runs, dataflow.Swap{ID: 21, Node: "counts", Module: renamed, AllowDroppedState: true})
	waitRecords(t, jobs[0], runs, 6000)
	at := e.swapAt(jobs[0], runs, 21, "counts")
	waitAll(t, runs)
	out := swapOutput(t, e.out)
	checkContinuous(t, out, at)
	checkVersions(t, out, at, "", "")
}

// TestSwapNotPrepared: a swap barrier reaching a task of the node with
// nothing prepared for that swap fails the run with one line.
func TestSwapNotPrepared(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	for _, tc := range []struct {
		name    string
		prepare int64 // the swap prepared, 0 for none
	}{
		{"nothing prepared", 0},
		{"another swap prepared", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newChkEnv(t, engine)
			var opens atomic.Int64
			plus := udf(t, engine, "counter-plus-c")
			jobs, runs := e.swapRuns("counter-c", 1, &opens)
			if tc.prepare != 0 {
				prepareAll(t, runs, dataflow.Swap{ID: tc.prepare, Node: "counts", Module: plus})
			}
			waitRecords(t, jobs[0], runs, 1000)
			if err := runs[0].Trigger(dataflow.Trigger{ID: 1, SwapID: 7, SwapNode: "counts"}); err != nil {
				t.Fatal(err)
			}
			_, err := runs[0].Wait()
			if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "node counts: swap 7 was not prepared on this worker") {
				t.Fatalf("run: %v\nwant one line with: node counts: swap 7 was not prepared on this worker", err)
			}
			t.Log(err)
		})
	}
}

// TestSwapTrigger: a swap trigger must name a Wasm node and a swap.
func TestSwapTrigger(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	e := newChkEnv(t, engine)
	var opens atomic.Int64
	_, runs := e.swapRuns("counter-c", 1, &opens)
	for _, tc := range []struct {
		tr  dataflow.Trigger
		err string
	}{
		{dataflow.Trigger{ID: 1, SwapID: 1, SwapNode: "txns"}, "job chk: checkpoint 1: swap 1: node txns is not a Wasm node"},
		{dataflow.Trigger{ID: 1, SwapID: 1, SwapNode: "nope"}, "job chk: checkpoint 1: swap 1: job chk has no node nope"},
		{dataflow.Trigger{ID: 1, SwapNode: "counts"}, "job chk: checkpoint 1: swap id 0, want > 0"},
	} {
		if err := runs[0].Trigger(tc.tr); err == nil || err.Error() != tc.err {
			t.Errorf("Trigger(%+v): %v, want %s", tc.tr, err, tc.err)
		}
	}
}

// TestSwapTrap: a new version failing on its first record fails the run
// after the swap, with its line (the leader then rolls back).
func TestSwapTrap(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	e := newChkEnv(t, engine)
	var opens atomic.Int64
	trap := udf(t, engine, "counter-trap-c")
	jobs, runs := e.swapRuns("counter-c", 1, &opens)
	waitRecords(t, jobs[0], runs, 1000)
	prepareAll(t, runs, dataflow.Swap{ID: 1, Node: "counts", Module: trap})
	// Not e.swapAt: the task may fail before its snapshot is acknowledged.
	if err := runs[0].Trigger(dataflow.Trigger{ID: 1, SwapID: 1, SwapNode: "counts"}); err != nil {
		t.Fatal(err)
	}
	_, err := runs[0].Wait()
	if err == nil || !strings.Contains(err.Error(), "counter-trap: refusing record") {
		t.Fatalf("run: %v, want the trap's line", err)
	}
	t.Log(err)
}

// TestSwapSourceChain swaps a node that is not keyed, chained with the
// source (project-c for project-go, both keeping the whole value): the
// source task installs it at its own barrier, the trigger.
func TestSwapSourceChain(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	e := newChkEnv(t, engine)
	var opens atomic.Int64
	goBuilt := udf(t, engine, "project-go")
	jobs, runs := e.swapRunsWith(context.Background(), "counter-c", "$ROOT/udfs/build/project-c.wasm", 1, &opens)
	waitRecords(t, jobs[0], runs, 2000)
	prepareAll(t, runs, dataflow.Swap{ID: 1, Node: "pre", Module: goBuilt})
	at := e.swapAt(jobs[0], runs, 1, "pre")
	waitAll(t, runs)
	out := swapOutput(t, e.out)
	checkContinuous(t, out)
	checkVersions(t, out, at, "", "")
	if n := opens.Load(); n != 2 {
		t.Errorf("the pass-through stage after the counter opened %d times, want 2", n)
	}
}

// TestSwapThenRestore crashes the job after a completed swap savepoint
// and restores it from there: with the new version (the leader pinned
// it) and with the old one (a rollback). Either way every count goes on
// from the savepoint, exactly once: the crashed attempt's output after
// it is discarded.
func TestSwapThenRestore(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	plus := udf(t, engine, "counter-plus-c")
	for _, tc := range []struct {
		name, restoreWith, after string
	}{
		{"new version", "counter-plus-c", "plus"},
		{"rollback", "counter-c", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newChkEnv(t, engine)
			var opens atomic.Int64
			ctx, crash := context.WithCancel(context.Background())
			defer crash()
			jobs, runs := e.swapRunsWith(ctx, "counter-c", "pass", 1, &opens)
			waitRecords(t, jobs[0], runs, 2000)
			prepareAll(t, runs, dataflow.Swap{ID: 1, Node: "counts", Module: plus})
			at := e.swapAt(jobs[0], runs, 1, "counts")
			waitRecords(t, jobs[0], runs, 5000)
			crash()
			if _, err := runs[0].Wait(); !errors.Is(err, context.Canceled) {
				t.Fatalf("crashed run: %v", err)
			}
			_, runs = e.swapRunsWith(context.Background(), tc.restoreWith, "pass", 1, &opens)
			waitAll(t, runs)
			out := swapOutput(t, e.out)
			checkContinuous(t, out)
			if tc.after == "" {
				checkVersions(t, out, at, "", "")
			} else {
				checkVersions(t, out, at, "", tc.after)
			}
		})
	}
}

// TestSwapPrepareHammer prepares, re-prepares and drops swaps from
// several goroutines while the job runs, then swaps one in: the tasks
// never see the others, and the one installed is the last prepared.
func TestSwapPrepareHammer(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	e := newChkEnv(t, engine)
	var opens atomic.Int64
	plus, c := udf(t, engine, "counter-plus-c"), udf(t, engine, "counter-c")
	jobs, runs := e.swapRuns("counter-c", 1, &opens)
	run := runs[0]
	waitRecords(t, jobs[0], runs, 1000)
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 8 {
				id := int64(100*(g+1) + i)
				if err := run.PrepareSwap(context.Background(), dataflow.Swap{ID: id, Node: "counts", Module: c}); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					run.DropSwap(id)
				}
			}
			// Swap 50 prepared again and again: the last one stays.
			errs <- run.PrepareSwap(context.Background(), dataflow.Swap{ID: 50, Node: "counts", Module: plus})
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	at := e.swapAt(jobs[0], runs, 50, "counts")
	waitAll(t, runs)
	out := swapOutput(t, e.out)
	checkContinuous(t, out)
	checkVersions(t, out, at, "", "plus")
}
