package dataflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/connectors/nexmark"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/host"
)

// The Nexmark source through the real dataflow: three source subtasks
// write every event to a transactional file sink.

const nexmarkEvents = 20000

const nexmarkJob = `name: chk
parallelism: 3
batch_size: 64
nodes:
  - name: txns
    source: {generator: {kind: nexmark, count: 20000, seed: 5, disorder: 2s, rate: $RATE}}
  - name: out
    input: txns
    sink: {file: {path: $DIR/counts.jsonl}}
`

func nexmarkJobText(dir string, rate float64) string {
	return strings.NewReplacer("$RATE", fmt.Sprint(rate), "$DIR", dir).Replace(nexmarkJob)
}

// nexmarkWant is the model's events 0..nexmarkEvents−1 as the job's
// output lines (sorted) and their count per kind. The spacing is the
// one the rate derives: 1s/rate.
func nexmarkWant(t *testing.T, rate float64) (lines []string, kinds [3]int) {
	t.Helper()
	c := nexmark.DefaultConfig()
	c.Seed, c.DisorderMs = 5, 2000
	if rate > 0 {
		c.IntervalNs = uint64(1e9 / rate)
	}
	g, err := nexmark.New(c)
	if err != nil {
		t.Fatal(err)
	}
	for n := range uint64(nexmarkEvents) {
		v, _ := g.AppendJSON(nil, n)
		lines = append(lines, string(v))
		kinds[g.Type(n)]++
	}
	slices.Sort(lines)
	return lines, kinds
}

func countKinds(t *testing.T, lines []string) (kinds [3]int) {
	t.Helper()
	for _, l := range lines {
		var e nexmark.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		kinds[e.Type]++
	}
	return kinds
}

// TestNexmarkJob runs the source at parallelism 3 to its end: the output
// is exactly the model's events, in the proportions 1:3:46.
func TestNexmarkJob(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	dir := t.TempDir()
	job := newChkJob(t, engine, nexmarkJobText(dir, 0), "memory")
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := chkOutput(t, dir)
	want, wantKinds := nexmarkWant(t, 0)
	diff("events", got, want, t)
	if kinds := countKinds(t, got); kinds != wantKinds || kinds != [3]int{400, 1200, 18400} {
		t.Fatalf("kinds %v, want %v (1:3:46 of %d)", kinds, wantKinds, nexmarkEvents)
	}
}

// TestNexmarkCheckpointRestore crashes the job after checkpoints and
// restores it: the published output is still every event exactly once.
func TestNexmarkCheckpointRestore(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	want, wantKinds := nexmarkWant(t, chkRate)
	for _, tc := range []struct {
		name     string
		attempts []attempt
	}{
		{"crash after checkpoints", []attempt{
			{parallelism: 3, checkpoints: []int64{3000, 6000}, crashAt: 8000},
			{parallelism: 3},
		}},
		{"several crashes", []attempt{
			{parallelism: 3, checkpoints: []int64{2000}, crashAt: 4000},
			{parallelism: 3, checkpoints: []int64{1000, 3000}, uncommitted: true, crashAt: 1},
			{parallelism: 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newChkEnv(t, engine)
			for _, a := range tc.attempts {
				job := newChkJob(t, engine, nexmarkJobText(e.out, chkRate), "memory")
				ctx, cancel := context.WithCancel(context.Background())
				d := dataflow.Deployment{JobID: "chk", Tasks: taskIDs(job), Checkpointing: e.checkpointing()}
				run, err := job.StartDeployment(ctx, d, nil)
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				e.play(a, job, []*dataflow.Running{run}, []context.CancelFunc{cancel})
				cancel()
			}
			got, _ := chkOutput(t, e.out)
			diff("events", got, want, t)
			if kinds := countKinds(t, got); kinds != wantKinds {
				t.Fatalf("kinds %v, want %v", kinds, wantKinds)
			}
		})
	}
}
