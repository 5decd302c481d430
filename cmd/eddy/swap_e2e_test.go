package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// The hot-swap tests (issue 13): a keyed counter over a paced generator,
// checkpointing, with an exactly-once file sink, on one coordinator and two
// worker processes; its counter node is swapped in place while it runs.
// The expected output is computed from the job's input (a second sink
// writes the generator's records), not by Eddy: for every card the counts
// 1..N, N its records, each once. With a swap, each key's counts
// up to some n come from the old version (its output format) and the rest
// from the new one.

const swapJob = `name: swapped
parallelism: 2
checkpoint: {interval: 400ms, timeout: 5s, storage: "STORAGE"}
nodes:
  - name: txns
    parallelism: 2
    source: {generator: {kind: transactions, count: COUNT, cards: 200, seed: 9, rate: RATE}}
  - name: count
    input: txns
    key_by: card
    wasm: {module: MODULE}
  - name: count_out
    input: count
    sink: {file: {path: $OUT/counts.jsonl}}
  - name: raw_out
    input: txns
    sink: {file: {path: $OUT/raw.jsonl}}
`

func swapSpec(t testing.TB, count, rate int, module, storage string) (spec, out string) {
	t.Helper()
	text := strings.NewReplacer("COUNT", strconv.Itoa(count), "RATE", strconv.Itoa(rate), "MODULE", module, "STORAGE", storage).Replace(swapJob)
	if storage == "" {
		text = strings.Replace(text, "checkpoint: {interval: 400ms, timeout: 5s, storage: \"\"}\n", "", 1)
	}
	return inlineSpec(t, text)
}

// countLine is one output record of a counter version.
type countLine struct {
	Key     string `json:"key"`
	Count   int    `json:"count"`
	Version any    `json:"v"` // absent in v1's output
}

// readCounts reads every line of the counts sink's files.
func readCounts(t testing.TB, out string) []countLine {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "counts.jsonl*"))
	if len(files) == 0 {
		t.Fatalf("no output in %s", out)
	}
	var lines []countLine
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var c countLine
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			lines = append(lines, c)
		}
	}
	return lines
}

// checkSwapCounts checks a run's counts against its input:
// per key the same counts, each once, and at most one switch of version,
// from old to new, in count order. It returns how many keys had output of
// the new version, and how many lines in all.
func checkSwapCounts(t testing.TB, out string, count int, isNew func(countLine) bool) (switched, newLines int) {
	t.Helper()
	got := readCounts(t, out)
	totals := inputCounts(t, out)
	n := 0
	for _, c := range totals {
		n += c
	}
	if n != count {
		t.Errorf("the raw sink has %d records, the generator makes %d", n, count)
	}
	byKey := map[string][]countLine{}
	for _, l := range got {
		byKey[l.Key] = append(byKey[l.Key], l)
	}
	if len(byKey) != len(totals) {
		t.Errorf("%d keys in the output, want %d", len(byKey), len(totals))
	}
	if len(got) != count {
		t.Errorf("%d output lines, want %d", len(got), count)
	}
	for key, lines := range byKey {
		slices.SortFunc(lines, func(a, b countLine) int { return a.Count - b.Count })
		for i, l := range lines {
			if l.Count != i+1 {
				t.Fatalf("key %s: counts %v, want 1..%d each once (a reset, a gap or a repeat)", key, counts(lines), totals[key])
			}
		}
		if len(lines) != totals[key] {
			t.Fatalf("key %s: counts up to %d, want %d", key, len(lines), totals[key])
		}
		first := slices.IndexFunc(lines, isNew)
		if first < 0 {
			continue
		}
		switched++
		for _, l := range lines[first:] {
			if !isNew(l) {
				t.Fatalf("key %s: count %d is the old version's, after count %d of the new one", key, l.Count, lines[first].Count)
			}
			newLines++
		}
	}
	return switched, newLines
}

func counts(lines []countLine) []int {
	var out []int
	for _, l := range lines {
		out = append(out, l.Count)
	}
	return out
}

// swapCluster is a coordinator and two workers with the counter modules
// uploaded. The coordinator listens on fixed ports, so that a test may
// start it again where it was.
func swapCluster(t *testing.T, modules map[string]string) *ftCluster {
	t.Helper()
	c := &ftCluster{dir: t.TempDir(), slots: 4, api: freeAddr(t)}
	c.raft = freeAddr(t)
	c.coord = c.startCoordinator(t, "--bootstrap")
	testkit.Eventually(t, 20*time.Second, "the coordinator leads", func() bool {
		return strings.Contains(eddy(t, "cluster", "info", "--coordinator", c.api).stdout, "LEADER")
	})
	for i := range 2 {
		c.workers = append(c.workers, c.startWorker(t, i))
	}
	testkit.Eventually(t, 30*time.Second, "two workers alive", func() bool {
		return strings.Count(eddy(t, "cluster", "info", "--coordinator", c.api).stdout, "ALIVE") == 2
	})
	for name, file := range modules {
		if r := c.client(t, "module", "upload", filepath.Join(repoRoot(t), "udfs/build", file), "--name", name); r.code != 0 {
			t.Fatalf("upload %s: %s", file, r.stderr)
		}
	}
	return c
}

// submitSwapJob submits the counter job with module and waits until it
// runs and took a checkpoint.
func submitSwapJob(t *testing.T, c *ftCluster, count, rate int, module string) (id, out string) {
	t.Helper()
	spec, out := swapSpec(t, count, rate, module, "file://"+filepath.Join(c.dir, "checkpoints"))
	r := c.client(t, "job", "submit", spec)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	id = strings.TrimSpace(r.stdout)
	testkit.Eventually(t, time.Minute, "job "+id+" running with a checkpoint", func() bool {
		state, _, st := c.status(t, id)
		return state == "RUNNING" && completedCheckpoints(st) > 0
	})
	return id, out
}

// inputCounts is what any counter's output must be, computed from the
// job's input (its raw sink), not by Eddy: for every card as many
// consecutive counts as it has records.
func inputCounts(t testing.TB, out string) map[string]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "raw.jsonl*"))
	totals := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rec struct{ Card string }
			if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Card == "" {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			totals[rec.Card]++
		}
	}
	return totals
}

// startCoordinator starts the cluster's coordinator on its fixed ports.
func (c *ftCluster) startCoordinator(t testing.TB, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, c.dir, "c1", c.env, append([]string{"coordinator", "--id", "c1", "--api", c.api, "--raft", c.raft,
		"--data-dir", filepath.Join(c.dir, "c1"),
		"--heartbeat-interval", "200ms", "--heartbeat-timeout", "5s",
		"--restart", "fixed", "--restart-delay", "300ms", "--restarts", "50"}, args...)...)
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (p *proc) wait(t testing.TB) {
	t.Helper()
	_ = p.cmd.Wait()
}

func isV2(l countLine) bool   { return fmt.Sprint(l.Version) == "2" }
func isPlus(l countLine) bool { return l.Version == "plus" }
func neverNew(countLine) bool { return false }
func swapOut(r result) string { return r.stdout + r.stderr }

// TestHotSwap swaps the counter (C, v1, storing a u64) mid-stream to v2,
// which stores JSON text and converts v1's values on read, and emits a
// visibly different line: every key's counts continue; the job stays at
// attempt 1; the status shows the new version and the swap.
func TestHotSwap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const count = 24000
	c := swapCluster(t, map[string]string{"counter": "counter-c.wasm", "counter-v2": "counter-v2-c.wasm"})
	id, out := submitSwapJob(t, c, count, 3000, "counter")
	_, before, _ := c.status(t, id)
	r := c.client(t, "job", "swap", id, "--node", "count", "--module", "counter-v2@1")
	if r.code != 0 {
		t.Fatalf("swap: %s", swapOut(r))
	}
	t.Logf("swap: %s", strings.TrimSpace(r.stdout))
	if !strings.Contains(r.stdout, "swapped") {
		t.Errorf("swap said %q, want it swapped", r.stdout)
	}
	if _, after, st := c.status(t, id); after != before {
		t.Errorf("attempt %d after the swap, %d before: the swap restarted the job\n%s", after, before, st)
	}
	_, st := c.waitState(t, id, "FINISHED", 2*time.Minute)
	for _, s := range []string{"counter-v2@1", "SWAPPED"} {
		if !strings.Contains(st, s) {
			t.Errorf("status does not show %s:\n%s", s, st)
		}
	}
	switched, newLines := checkSwapCounts(t, out, count, isV2)
	t.Logf("%d of %d lines from v2, %d keys switched", newLines, count, switched)
	if newLines == 0 || newLines == count {
		t.Errorf("%d of %d lines from v2: the swap was not mid-stream", newLines, count)
	}
	assertNoHiddenFiles(t, out)
}

// TestSwapRefused: each refusal of the prepare phase leaves the job
// running at attempt 1, its output unaffected.
func TestSwapRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const count = 20000
	c := swapCluster(t, map[string]string{
		"counter": "counter-c.wasm", "counter-kind": "counter-kind-c.wasm", "counter-renamed": "counter-renamed-c.wasm",
		"project": "project-c.wasm", "card-stats": "card-stats-c.wasm",
	})
	// A module missing an export never gets into the registry, so no swap
	// can name it.
	if r := c.client(t, "module", "upload", filepath.Join(repoRoot(t), "host/testdata/missing_export.wasm"), "--name", "noproc"); r.code == 0 ||
		!strings.Contains(r.stderr, "export") {
		t.Errorf("upload of a module missing an export: exit %d, %s", r.code, r.stderr)
	}
	id, out := submitSwapJob(t, c, count, 1500, "counter")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--module", "counter-kind@1"}, "list"},
		{[]string{"--module", "counter-renamed@1"}, "--allow-dropped-state"},
		{[]string{"--config", `{"bogus": 1}`}, "bogus"},
		{[]string{"--module", "project@1"}, "count"}, // declares no state: "count" would be dropped
		{[]string{"--module", "card-stats@1"}, "aggregate"},
	} {
		r := c.client(t, append([]string{"job", "swap", id, "--node", "count"}, tc.args...)...)
		if r.code == 0 || !strings.Contains(swapOut(r), tc.want) {
			t.Errorf("swap %v: exit %d, %q; want a refusal naming %q", tc.args, r.code, swapOut(r), tc.want)
		}
		t.Logf("swap %v: %s", tc.args, strings.TrimSpace(swapOut(r)))
		if state, attempt, st := c.status(t, id); state != "RUNNING" || attempt != 1 {
			t.Fatalf("after the refused swap %v: %s at attempt %d\n%s", tc.args, state, attempt, st)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node", "txns", "--module", "counter@1"}, "not a Wasm node"},
		{[]string{"--node", "nope", "--module", "counter@1"}, "no node"},
		{[]string{"--node", "count", "--module", "missing@3"}, "missing"},
		{[]string{"--node", "count", "--module", "counter@1"}, "nothing to swap"},
		{[]string{"--node", "count", "--config", "{"}, "JSON"},
	} {
		r := c.client(t, append([]string{"job", "swap", id}, tc.args...)...)
		if r.code == 0 || !strings.Contains(swapOut(r), tc.want) {
			t.Errorf("swap %v: exit %d, %q; want an error naming %q", tc.args, r.code, swapOut(r), tc.want)
		}
	}
	attempt, st := c.waitState(t, id, "FINISHED", 2*time.Minute)
	if attempt != 1 {
		t.Errorf("finished at attempt %d\n%s", attempt, st)
	}
	if n := strings.Count(st, "REFUSED"); n < 5 {
		t.Errorf("status lists %d refused swaps, want 5:\n%s", n, st)
	}
	checkSwapCounts(t, out, count, neverNew)
}

// TestSwapRollback: a new version that fails on its first record rolls the
// job back to the old version automatically; the output is exact.
func TestSwapRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const count = 20000
	c := swapCluster(t, map[string]string{"counter": "counter-c.wasm", "counter-trap": "counter-trap-c.wasm"})
	id, out := submitSwapJob(t, c, count, 2000, "counter")
	r := c.client(t, "job", "swap", id, "--node", "count", "--module", "counter-trap@1")
	t.Logf("swap: exit %d: %s", r.code, strings.TrimSpace(swapOut(r)))
	var st string
	testkit.Eventually(t, time.Minute, "the swap rolled back", func() bool {
		_, _, st = c.status(t, id)
		return strings.Contains(st, "ROLLED_BACK")
	})
	if !strings.Contains(st, "counter-trap: refusing record") {
		t.Errorf("the status does not give the cause of the rollback:\n%s", st)
	}
	_, st = c.waitState(t, id, "FINISHED", 2*time.Minute)
	if !strings.Contains(st, "counter@1") {
		t.Errorf("the node does not run counter@1 after the rollback:\n%s", st)
	}
	checkSwapCounts(t, out, count, neverNew)
	assertNoHiddenFiles(t, out)
}

// TestSwapGoAndC swaps the Go build of the counter for the C build and
// back: same state encoding, same output.
func TestSwapGoAndC(t *testing.T) {
	swapThrough(t, "counter-go", "counter-c", "counter-go")
}

// swapThrough runs the counter job on the build named first, swaps it in
// place to each of the others in turn (names of udfs/build fixtures,
// version 1 each), and checks that no swap restarted the job, that every
// swap completed, and that every key's counts went 1, 2, 3… throughout:
// the builds read and write the same state and emit the same output.
func swapThrough(t *testing.T, start string, swaps ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes")
	}
	const count = 24000
	modules := map[string]string{start: start + ".wasm"}
	for _, m := range swaps {
		modules[m] = m + ".wasm"
	}
	c := swapCluster(t, modules)
	id, out := submitSwapJob(t, c, count, 3000, start)
	_, before, _ := c.status(t, id)
	for _, to := range swaps {
		if r := c.client(t, "job", "swap", id, "--node", "count", "--module", to+"@1"); r.code != 0 {
			t.Fatalf("swap to %s: %s", to, swapOut(r))
		}
	}
	if _, after, st := c.status(t, id); after != before {
		t.Errorf("attempt %d after the swaps, %d before: a swap restarted the job\n%s", after, before, st)
	}
	_, st := c.waitState(t, id, "FINISHED", 2*time.Minute)
	if n := strings.Count(st, "SWAPPED"); n < len(swaps) {
		t.Errorf("want %d swaps, %d SWAPPED:\n%s", len(swaps), n, st)
	}
	checkSwapCounts(t, out, count, neverNew)
}

// TestSwapKills kills, with SIGKILL at a random moment around a swap, a
// worker (started again) and, on a group of three coordinators, the
// leader: the job ends with every task of the node on one version, the
// output exact, and the swap's record (kept in the replicated state) says
// which.
func TestSwapKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const count = 30000
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	t.Run("worker", func(t *testing.T) {
		c := swapCluster(t, map[string]string{"counter": "counter-c.wasm", "counter-plus": "counter-plus-c.wasm"})
		id, out := submitSwapJob(t, c, count, 3000, "counter")
		swap := startProc(t, c.dir, "swap", "job", "swap", id, "--node", "count", "--module", "counter-plus@1",
			"--coordinator", c.api, "--timeout", "20s")
		time.Sleep(time.Duration(rng.IntN(250)) * time.Millisecond) // the random moment is the point
		w := rng.IntN(2)
		c.workers[w].kill(t)
		c.workers[w] = c.startWorker(t, w)
		swap.wait(t)
		_, st := c.waitState(t, id, "FINISHED", 3*time.Minute)
		checkKilledSwap(t, st, out, count)
	})
	t.Run("leader", func(t *testing.T) {
		c := startCluster(t, 4)
		for name, file := range map[string]string{"counter": "counter-c.wasm", "counter-plus": "counter-plus-c.wasm"} {
			if r := c.eddyOK(t, "module upload", filepath.Join(repoRoot(t), "udfs/build", file), "--name", name); r.code != 0 {
				t.Fatalf("upload %s: %s", file, r.stderr)
			}
		}
		spec, out := swapSpec(t, count, 3000, "counter", "file://"+filepath.Join(c.dir, "checkpoints"))
		r := c.eddyOK(t, "job submit", spec)
		if r.code != 0 {
			t.Fatal(r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		testkit.Eventually(t, time.Minute, "job "+id+" running with a checkpoint", func() bool {
			state, _, st := c.jobState(t, id)
			return state == "RUNNING" && completedCheckpoints(st) > 0
		})
		l := c.leader(t)
		// Through a follower, which forwards it: its outcome is not checked
		// (the leader that holds it dies), the job's is.
		swap := startProc(t, c.dir, "swap", "job", "swap", id, "--node", "count", "--module", "counter-plus@1",
			"--coordinator", c.apis[(l+1)%3], "--timeout", "20s")
		time.Sleep(time.Duration(rng.IntN(250)) * time.Millisecond) // the random moment is the point
		c.coords[l].kill(t)
		swap.wait(t)
		c.waitFinished(t, id, 3*time.Minute)
		checkKilledSwap(t, c.eddyOK(t, "job status", id).stdout, out, count)
	})
}

// checkKilledSwap checks the output of a job whose swap saw a kill: the
// new version's output only if the swap is SWAPPED.
func checkKilledSwap(t *testing.T, status, out string, count int) {
	t.Helper()
	t.Logf("after the kill:\n%s", status)
	isNew := neverNew
	if strings.Contains(status, "SWAPPED") {
		isNew = isPlus
	}
	switched, newLines := checkSwapCounts(t, out, count, isNew)
	t.Logf("%d lines from the new version, %d keys switched", newLines, switched)
	assertNoHiddenFiles(t, out)
}
