package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/storage"
	"github.com/eddy-stream/eddy/storage/s3test"
)

// The fault-tolerance tests: a keyed window and a Wasm operator with keyed
// state over a bounded generator, checkpointing, with exactly-once file
// sinks, on one coordinator and two worker processes that the test kills
// with SIGKILL at random moments. The committed output must equal the
// output of the same job run without failures: nothing lost, nothing
// duplicated.

const ftJob = `name: ft
parallelism: PAR
checkpoint: {interval: 300ms, timeout: 3s, storage: "STORAGE"}
nodes:
  - name: txns
    parallelism: 2
    source: {generator: {kind: transactions, count: 60000, cards: 300, seed: 5, rate: RATE}}
    event_time: {max_out_of_orderness: 5s}
  - name: per_card
    input: txns
    key_by: card
    window: {tumbling: 1m}
    aggregate: [count, min(amount), max(amount)]
  - name: counts
    input: txns
    key_by: card
    wasm: {module: MODULE}
  - name: out
    input: per_card
    parallelism: 1
    sink: {file: {path: $OUT/windows.jsonl}}
  - name: count_out
    input: counts
    sink: {file: {path: $OUT/counts.jsonl}}
`

func ftSpec(t testing.TB, par, rate int, module, storage string) (spec, out string) {
	t.Helper()
	text := strings.NewReplacer("PAR", strconv.Itoa(par), "RATE", strconv.Itoa(rate), "MODULE", module, "STORAGE", storage).Replace(ftJob)
	if storage == "" {
		text = strings.Replace(text, "checkpoint: {interval: 300ms, timeout: 3s, storage: \"\"}\n", "", 1)
	}
	return inlineSpec(t, text)
}

// ftCluster is one coordinator and two workers sharing a checkpoint
// storage; env is added to every process's environment (S3 credentials).
type ftCluster struct {
	dir     string
	api     string
	raft    string // set when the coordinator listens on a fixed port
	env     []string
	coord   *proc
	workers []*proc
	slots   int
}

func startFT(t *testing.T, env []string, slots int) *ftCluster { return startFTB(t, env, slots) }

// startFTB is startFT for benchmarks too.
func startFTB(t testing.TB, env []string, slots int) *ftCluster {
	t.Helper()
	c := &ftCluster{dir: t.TempDir(), env: env, slots: slots}
	c.coord = startProcEnv(t, c.dir, "c1", env, "coordinator", "--id", "c1", "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data-dir", filepath.Join(c.dir, "c1"), "--bootstrap",
		"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s",
		"--restart", "fixed", "--restart-delay", "300ms", "--restarts", "50")
	c.api = c.coord.addr(t, coordinatorLine)
	testkit.Eventually(t, 20*time.Second, "the coordinator leads", func() bool {
		return strings.Contains(eddy(t, "cluster", "info", "--coordinator", c.api).stdout, "LEADER")
	})
	for i := range 2 {
		c.workers = append(c.workers, c.startWorker(t, i))
	}
	testkit.Eventually(t, 30*time.Second, "two workers alive", func() bool {
		return strings.Count(eddy(t, "cluster", "info", "--coordinator", c.api).stdout, "ALIVE") == 2
	})
	return c
}

func (c *ftCluster) startWorker(t testing.TB, i int) *proc {
	t.Helper()
	name := fmt.Sprintf("w%d", i+1)
	return startProcEnv(t, c.dir, name, c.env, "worker", "--id", name, "--coordinator", c.api,
		"--slots", strconv.Itoa(c.slots), "--data-dir", filepath.Join(c.dir, name))
}

func (c *ftCluster) client(t testing.TB, args ...string) result {
	t.Helper()
	return eddy(t, append(args, "--coordinator", c.api, "--timeout", "20s")...)
}

func (c *ftCluster) status(t testing.TB, id string) (state string, attempt int, out string) {
	t.Helper()
	r := c.client(t, "job", "status", id)
	m := regexp.MustCompile(`job \S+ \(\S+\): (\w+), attempt (\d+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		return "", 0, r.stdout + r.stderr
	}
	n, _ := strconv.Atoi(m[2])
	return m[1], n, r.stdout
}

func (c *ftCluster) waitState(t testing.TB, id string, want string, within time.Duration) (attempt int, out string) {
	t.Helper()
	testkit.Eventually(t, within, "job "+id+" "+want, func() bool {
		var state string
		state, attempt, out = c.status(t, id)
		if state == "FAILED" && want != "FAILED" {
			t.Fatalf("job %s failed:\n%s", id, out)
		}
		return state == want
	})
	return attempt, out
}

// completedCheckpoints counts the COMPLETED lines of `job status`.
func completedCheckpoints(status string) int {
	return len(regexp.MustCompile(`(?m)^\d+\s+CHECKPOINT\s+COMPLETED`).FindAllString(status, -1))
}

// TestExactlyOnceUnderKills kills a worker (and starts it again) several
// times while the job runs, with checkpoints on file:// and on s3://.
func TestExactlyOnceUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	refSpec, refOut := ftSpec(t, 2, 0, module, "")
	if r := eddy(t, "run", refSpec); r.code != 0 {
		t.Fatalf("reference run: %s", r.stderr)
	}
	stores := map[string]func(t *testing.T) (url string, env []string){
		"file": func(t *testing.T) (string, []string) { return "file://" + t.TempDir(), nil },
		"s3": func(t *testing.T) (string, []string) {
			s := s3test.Start(t)
			url := s.URL("checkpoints", "eddy")
			cfg := storage.DefaultConfig()
			cfg.AccessKey, cfg.SecretKey, cfg.CreateBucket = s.AccessKey, s.SecretKey, true
			st, err := storage.Open(context.Background(), url, cfg)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			return url, s.Env()
		},
	}
	for _, name := range []string{"file", "s3"} {
		t.Run(name, func(t *testing.T) {
			url, env := stores[name](t)
			c := startFT(t, env, 8)
			if r := c.client(t, "module", "upload", module, "--name", "counter"); r.code != 0 {
				t.Fatal(r.stderr)
			}
			spec, out := ftSpec(t, 2, 5000, "counter", url) // 12 s of input
			r := c.client(t, "job", "submit", spec)
			if r.code != 0 {
				t.Fatal(r.stderr)
			}
			id := strings.TrimSpace(r.stdout)
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
			kills := 0
			for kills < 3 {
				// A random moment once the job runs and has a checkpoint
				// (or not: the first kill may come before any).
				c.waitState(t, id, "RUNNING", time.Minute)
				time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond) // the random moment is the point
				if st, _, _ := c.status(t, id); st == "FINISHED" {
					break
				}
				w := rng.IntN(2)
				c.workers[w].kill(t)
				c.workers[w] = c.startWorker(t, w)
				kills++
			}
			attempt, st := c.waitState(t, id, "FINISHED", 3*time.Minute)
			t.Logf("%d kills, finished at attempt %d, %d checkpoints completed (of the recent ones listed)", kills, attempt, completedCheckpoints(st))
			if kills > 0 && attempt < 2 {
				t.Errorf("attempt %d after %d kills", attempt, kills)
			}
			sameOutput(t, out, refOut)
			assertNoHiddenFiles(t, out)
		})
	}
}

// assertNoHiddenFiles: staged output of failed attempts is gone.
func assertNoHiddenFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestSavepointRescale stops a job with a savepoint and resumes it from
// there at parallelism 3: the output equals one uninterrupted run at
// parallelism 2.
func TestSavepointRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	refSpec, refOut := ftSpec(t, 2, 0, module, "")
	if r := eddy(t, "run", refSpec); r.code != 0 {
		t.Fatalf("reference run: %s", r.stderr)
	}
	c := startFT(t, nil, 12)
	if r := c.client(t, "module", "upload", module, "--name", "counter"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	url := "file://" + t.TempDir()
	spec, out := ftSpec(t, 2, 5000, "counter", url)
	r := c.client(t, "job", "submit", spec)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	c.waitState(t, id, "RUNNING", time.Minute)
	time.Sleep(3 * time.Second) // mid-job: the scenario
	r = c.client(t, "savepoint", "create", id, "--stop")
	if r.code != 0 {
		t.Fatalf("savepoint: %s", r.stderr)
	}
	path := strings.TrimSpace(lastLine(r.stdout))
	c.waitState(t, id, "CANCELED", time.Minute)

	// The same job at parallelism 3 (the sources stay at 2: their
	// positions are per subtask), writing where the first left off.
	text, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	spec3 := filepath.Join(filepath.Dir(spec), "job3.yaml")
	os.WriteFile(spec3, []byte(strings.Replace(string(text), "parallelism: 2\ncheckpoint", "parallelism: 3\ncheckpoint", 1)), 0o644)
	r = c.client(t, "job", "submit", spec3, "--from-savepoint", path)
	if r.code != 0 {
		t.Fatalf("submit from savepoint: %s", r.stderr)
	}
	id3 := strings.TrimSpace(r.stdout)
	c.waitState(t, id3, "FINISHED", 2*time.Minute)
	sameOutput(t, out, refOut)
	assertNoHiddenFiles(t, out)
}

// checkpointIDs lists the ids of the COMPLETED checkpoints in a `job
// status` output, newest first as listed.
func checkpointIDs(status string) []int {
	var ids []int
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\s+CHECKPOINT\s+COMPLETED`).FindAllStringSubmatch(status, -1) {
		n, _ := strconv.Atoi(m[1])
		ids = append(ids, n)
	}
	return ids
}

// TestCorruptCheckpointFallsBack damages the newest completed checkpoint
// (its task manifests) and kills a worker: the restore from it fails with
// a clear error, and the job recovers from the checkpoint before it, with
// the same exactly-once output.
func TestCorruptCheckpointFallsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	refSpec, refOut := ftSpec(t, 2, 0, module, "")
	if r := eddy(t, "run", refSpec); r.code != 0 {
		t.Fatalf("reference run: %s", r.stderr)
	}
	c := startFT(t, nil, 8)
	if r := c.client(t, "module", "upload", module, "--name", "counter"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	store := t.TempDir()
	spec, out := ftSpec(t, 2, 5000, "counter", "file://"+store)
	r := c.client(t, "job", "submit", spec)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	var newest int
	testkit.Eventually(t, time.Minute, "two completed checkpoints", func() bool {
		_, _, st := c.status(t, id)
		ids := checkpointIDs(st)
		if len(ids) >= 2 {
			newest = ids[0]
			for _, x := range ids {
				newest = max(newest, x)
			}
			return true
		}
		return false
	})
	// Damage every task manifest of the newest checkpoint, then kill a
	// worker before another checkpoint completes.
	manifests, _ := filepath.Glob(filepath.Join(store, "tenants", "default", "jobs", id, "chk", strconv.Itoa(newest), "*.json"))
	damaged := 0
	for _, m := range manifests {
		if filepath.Base(m) == "_manifest.json" {
			continue
		}
		if err := os.WriteFile(m, []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
		damaged++
	}
	if damaged == 0 {
		t.Fatalf("no task manifests of checkpoint %d under %s", newest, store)
	}
	c.workers[0].kill(t)
	c.workers[0] = c.startWorker(t, 0)
	attempt, st := c.waitState(t, id, "FINISHED", 3*time.Minute)
	if attempt < 3 {
		t.Errorf("attempt %d: want a failed restore from checkpoint %d and a second restore", attempt, newest)
	}
	if !regexp.MustCompile(`(?m)^`+strconv.Itoa(newest)+`\s+CHECKPOINT\s+FAILED`).MatchString(st) && !strings.Contains(st, fmt.Sprintf("restore checkpoint %d", newest)) {
		t.Logf("status does not show checkpoint %d as failed:\n%s", newest, st)
	}
	sameOutput(t, out, refOut)
	assertNoHiddenFiles(t, out)
}

// TestCheckpointsSurviveS3Outage stops the S3 server for a while: the
// checkpoints taken meanwhile fail, the job keeps running, and once the
// server is back checkpoints complete again; the output is exact.
func TestCheckpointsSurviveS3Outage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	refSpec, refOut := ftSpec(t, 2, 0, module, "")
	if r := eddy(t, "run", refSpec); r.code != 0 {
		t.Fatalf("reference run: %s", r.stderr)
	}
	s := s3test.Start(t)
	url := s.URL("checkpoints", "eddy")
	cfg := storage.DefaultConfig()
	cfg.AccessKey, cfg.SecretKey, cfg.CreateBucket = s.AccessKey, s.SecretKey, true
	st, err := storage.Open(context.Background(), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	c := startFT(t, s.Env(), 8)
	if r := c.client(t, "module", "upload", module, "--name", "counter"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	spec, out := ftSpec(t, 2, 1500, "counter", url) // 20 s of input
	r := c.client(t, "job", "submit", spec)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	testkit.Eventually(t, time.Minute, "a completed checkpoint", func() bool {
		_, _, st := c.status(t, id)
		return len(checkpointIDs(st)) > 0
	})
	s.Stop()
	var before int
	testkit.Eventually(t, time.Minute, "a failed checkpoint while S3 is down", func() bool {
		state, _, st := c.status(t, id)
		if state != "RUNNING" {
			t.Fatalf("job %s while S3 is down:\n%s", state, st)
		}
		for _, x := range checkpointIDs(st) {
			before = max(before, x)
		}
		return regexp.MustCompile(`(?m)^\d+\s+CHECKPOINT\s+FAILED`).MatchString(st)
	})
	s.Start()
	testkit.Eventually(t, time.Minute, "checkpoints complete again", func() bool {
		_, _, st := c.status(t, id)
		for _, x := range checkpointIDs(st) {
			if x > before {
				return true
			}
		}
		return false
	})
	attempt, _ := c.waitState(t, id, "FINISHED", 2*time.Minute)
	if attempt != 1 {
		t.Errorf("attempt %d: an S3 outage must not restart the job", attempt)
	}
	sameOutput(t, out, refOut)
}
