package dataflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/host"
)

// joinChkJob is an interval join of two paced generators keyed by card,
// for a crash and restore: its output depends only on the data (no record
// is late: disorder stays within max_out_of_orderness), so every attempt
// sequence must publish exactly the reference's pairs.
const joinChkJob = `name: chk
parallelism: 2
state_backend: $BACKEND
batch_size: 64
nodes:
  - {name: txns, parallelism: 2, event_time: {max_out_of_orderness: 3s},
     source: {generator: {kind: transactions, count: 20000, seed: 7, cards: 300, disorder: 2s, rate: $RATE}}}
  - {name: payments, parallelism: 2, event_time: {max_out_of_orderness: 3s},
     source: {generator: {kind: transactions, count: 10000, seed: 8, cards: 300, interval: 200ms, disorder: 2s, rate: $HALF}}}
  - name: joined
    input: [txns, payments]
    join: {left_key: card, right_key: card, interval: {lower: -10s, upper: 10s, upper_inclusive: false}}
  - name: out
    input: joined
    sink: {file: {path: $DIR/joined.jsonl}}
`

func joinChkText(dir string, rate float64, backend string) string {
	r := strings.NewReplacer("$RATE", fmt.Sprint(rate), "$HALF", fmt.Sprint(rate/2), "$DIR", dir, "$BACKEND", backend)
	return r.Replace(joinChkJob)
}

// joinedLines is the sorted published lines of the join's sink.
func joinedLines(t *testing.T, dir string) []string {
	t.Helper()
	return sinkLines(t, dir, "joined.jsonl")
}

// sinkLines is the sorted published lines of the file sink writing to
// dir/name (its subtasks' files).
func sinkLines(t *testing.T, dir, name string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		switch file := e.Name(); {
		case strings.HasPrefix(file, "."):
			t.Errorf("left behind: %s", file)
		case strings.HasPrefix(file, name):
			lines = append(lines, fileLines(t, filepath.Join(dir, file))...)
		}
	}
	sort.Strings(lines)
	return lines
}

// TestCheckpointJoin crashes a job with an interval join after
// checkpoints, restores it (on memory and on Pebble state) and checks that
// the published pairs equal those of an uninterrupted run.
func TestCheckpointJoin(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	ref := t.TempDir()
	job := newChkJob(t, engine, joinChkText(ref, 0, "memory"), "memory")
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := joinedLines(t, ref)
	if len(want) < 5000 {
		t.Fatalf("reference run joined %d records: the data does not exercise the join", len(want))
	}
	for _, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			e := playAttempts(t, engine, backend, "chk", func(out string) string { return joinChkText(out, chkRate, backend) },
				attempt{parallelism: 2, checkpoints: []int64{3000, 6000}, crashAt: 9000},
				attempt{parallelism: 2, checkpoints: []int64{2000}, crashAt: 4000},
				attempt{parallelism: 2})
			diff("joined", joinedLines(t, e.out), want, t)
		})
	}
}

// playAttempts runs the job that text makes (given the output directory)
// once per attempt, each deployment restoring the checkpoint the one
// before completed last, on a fresh checkpoint environment it returns; it
// fails the test if no checkpoint completed.
func playAttempts(t *testing.T, engine *host.Engine, backend, jobID string, text func(out string) string, attempts ...attempt) *chkEnv {
	t.Helper()
	e := newChkEnv(t, engine)
	e.backend = backend
	for _, a := range attempts {
		job := newChkJob(t, engine, text(e.out), backend)
		ctx, cancel := context.WithCancel(context.Background())
		run, err := job.StartDeployment(ctx, dataflow.Deployment{JobID: jobID, Tasks: taskIDs(job), Checkpointing: e.checkpointing()}, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		e.play(a, job, []*dataflow.Running{run}, []context.CancelFunc{cancel})
		cancel()
	}
	if e.lastID() == 0 {
		t.Fatal("no checkpoint completed: nothing was restored")
	}
	return e
}

// TestJoinAcrossExchanges runs the join of TestCheckpointJoin over two
// workers, every join subtask reading both inputs from a local and a
// remote channel, with a crash and a restore: the input index must come
// from the channel, however the channels are spread.
func TestJoinAcrossExchanges(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	ref := t.TempDir()
	if _, err := newChkJob(t, engine, joinChkText(ref, 0, "memory"), "memory").Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := joinedLines(t, ref)
	e := newChkEnv(t, engine)
	a, b := startWorker(t), startWorker(t)
	for i, at := range []attempt{
		{parallelism: 2, checkpoints: []int64{1500, 3000}, crashAt: 4500},
		{parallelism: 2},
	} {
		text := joinChkText(e.out, chkRate, "memory")
		e.playSplit(at, i, newChkJob(t, engine, text, "memory"), newChkJob(t, engine, text, "memory"), a, b)
	}
	if e.lastID() == 0 {
		t.Fatal("no checkpoint completed: nothing was restored")
	}
	diff("joined", joinedLines(t, e.out), want, t)
}

// TestJoinLateRecordsCounted: the records a join drops as late are the
// task's LateDropped (eddy_task_late_records_dropped_total), as a
// window's are. The join's watermark is the lower of its inputs': b, one
// record far in the future, ends at once (its watermark +∞), so that the
// join's is a's and a's late records are late there. Until b's end
// reaches the join nothing is late, so a is paced (0.4 s in all) rather
// than racing b's start; only one of its ~400 late records need come
// after that.
func TestJoinLateRecordsCounted(t *testing.T) {
	job := newChkJob(t, newEngine(t, host.DefaultConfig()), `name: late-join
nodes:
  - name: a
    source: {generator: {kind: transactions, count: 2000, rate: 5000, cards: 20, seed: 1, disorder: 2s, late_fraction: 0.2, interval: 10ms}}
    event_time: {max_out_of_orderness: 1s}
  - name: b
    source: {generator: {kind: transactions, count: 1, cards: 20, seed: 2, start: "2100-01-01T00:00:00Z"}}
    event_time: {max_out_of_orderness: 1s}
  - name: j
    input: [a, b]
    join: {left_key: card, right_key: card, window: {tumbling: 1s}}
  - name: out
    input: j
    sink: {discard: {}}
`, "memory")
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range job.TaskStats() {
		if s.Node != "j" {
			continue
		}
		if s.RecordsIn != 2001 || s.LateDropped == 0 || s.LateDropped >= 2000 {
			t.Fatalf("join: %d records in, %d dropped as late; want 2001 in and some of a's 2000 late", s.RecordsIn, s.LateDropped)
		}
		return
	}
	t.Fatal("no task stats for the join")
}
