package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// The cluster tests run real eddy processes on 127.0.0.1: three
// coordinators forming a Raft group and two workers, driven through the
// CLI as a user would, and kill them with SIGKILL.

// proc is one eddy server process of a test.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
}

func (p *proc) kill(t testing.TB) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// startProc starts `eddy args…` with its output in a log file, killed when
// the test ends.
func startProc(t testing.TB, dir, name string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, dir, name, nil, args...)
}

// startProcEnv is startProc with more environment variables.
func startProcEnv(t testing.TB, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(eddyBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache")), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p := &proc{name: name, cmd: cmd, log: logPath}
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("---- %s log (last 3000 bytes) ----\n%s", name, tail(string(b), 3000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// The lines in which a server says where it listens, once it serves: the
// tests start every server on port 0 and read the addresses it bound.
var (
	coordinatorLine = regexp.MustCompile(`(?m)^coordinator \S+ serving on (\S+) \(raft \S+\)\n`)
	standaloneLine  = regexp.MustCompile(`(?m)^standalone: coordinator on (\S+), worker with \d+ slots, data exchange on \S+\n`)
)

// addr waits until p has printed a line that re matches and returns the
// line's first submatch: the address p bound.
func (p *proc) addr(t testing.TB, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	testkit.Eventually(t, 30*time.Second, p.name+" to say where it listens", func() bool {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		m = re.FindStringSubmatch(string(b))
		return m != nil
	})
	return m[1]
}

// cluster is three coordinators and two workers.
type cluster struct {
	dir     string
	apis    []string
	coords  []*proc
	workers []*proc
}

func startCluster(t testing.TB, slots int) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir()}
	blobs := filepath.Join(c.dir, "blobs")
	hb := []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "5s", "--restart", "fixed", "--restart-delay", "500ms"}
	for i := range 3 {
		args := append([]string{"coordinator", "--id", fmt.Sprintf("c%d", i+1), "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0",
			"--data-dir", filepath.Join(c.dir, fmt.Sprintf("c%d", i+1)), "--blobs", blobs}, hb...)
		if i == 0 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", c.apis[0])
		}
		p := startProc(t, c.dir, fmt.Sprintf("c%d", i+1), args...)
		c.coords = append(c.coords, p)
		c.apis = append(c.apis, p.addr(t, coordinatorLine))
		if i == 0 {
			testkit.Eventually(t, 20*time.Second, "the first coordinator leads", func() bool {
				return strings.Contains(c.eddyOK(t, "cluster info").stdout, "LEADER")
			})
		}
	}
	testkit.Eventually(t, 30*time.Second, "three coordinators", func() bool {
		return strings.Count(c.eddyOK(t, "cluster info").stdout, "FOLLOWER") == 2
	})
	for i := range 2 {
		c.workers = append(c.workers, startProc(t, c.dir, fmt.Sprintf("w%d", i+1), "worker", "--id", fmt.Sprintf("w%d", i+1),
			"--coordinator", strings.Join(c.apis, ","), "--slots", strconv.Itoa(slots),
			"--data-dir", filepath.Join(c.dir, fmt.Sprintf("w%d", i+1))))
	}
	testkit.Eventually(t, 30*time.Second, "two workers alive", func() bool {
		return strings.Count(c.eddyOK(t, "cluster info").stdout, "ALIVE") == 2
	})
	return c
}

// eddyAt runs a client command against the coordinators, trying each in
// turn until one answers (a killed one does not).
func (c *cluster) eddyAt(t testing.TB, args ...string) result {
	t.Helper()
	var r result
	for i, api := range c.apis {
		if c.coords[i].cmd.ProcessState != nil {
			continue
		}
		r = eddy(t, append(append([]string{args[0]}, args[1:]...), "--coordinator", api, "--timeout", "10s")...)
		if r.code == 0 || !strings.Contains(r.stderr, "nreachable") && !strings.Contains(r.stderr, "connection refused") {
			return r
		}
	}
	return r
}

func (c *cluster) eddyOK(t testing.TB, args ...string) result {
	t.Helper()
	fields := strings.Fields(args[0])
	r := c.eddyAt(t, append(fields, args[1:]...)...)
	return r
}

// leader returns the index of the leading coordinator.
func (c *cluster) leader(t testing.TB) int {
	t.Helper()
	out := c.eddyOK(t, "cluster info").stdout
	m := regexp.MustCompile(`(?m)^c(\d)\s+LEADER`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no leader in\n%s", out)
	}
	i, _ := strconv.Atoi(m[1])
	return i - 1
}

// jobState polls `job status` and returns the job's state and attempt.
func (c *cluster) jobState(t testing.TB, id string) (string, int, string) {
	t.Helper()
	r := c.eddyOK(t, "job status", id)
	m := regexp.MustCompile(`job \S+ \(\S+\): (\w+), attempt (\d+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		return "", 0, r.stdout + r.stderr
	}
	n, _ := strconv.Atoi(m[2])
	return m[1], n, r.stdout
}

func (c *cluster) waitFinished(t testing.TB, id string, within time.Duration) (attempt int) {
	t.Helper()
	var last string
	testkit.Eventually(t, within, "job "+id+" finished", func() bool {
		var state string
		state, attempt, last = c.jobState(t, id)
		if state == "FAILED" || state == "CANCELED" {
			t.Fatalf("job %s %s:\n%s", id, state, last)
		}
		return state == "FINISHED"
	})
	return attempt
}

const clusterJob = `name: cluster-window
parallelism: 4
nodes:
  - name: txns
    source: {generator: {kind: transactions, count: 40000, cards: 300, seed: 3, rate: RATE}}
    event_time: {max_out_of_orderness: 5s}
  - name: per_card
    input: txns
    key_by: card
    window: {tumbling: 1m}
    aggregate: [count, min(amount), max(amount)]  # exact: a float sum depends on arrival order
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

// clusterSpec writes the job with its output under a new directory.
func clusterSpec(t testing.TB, rate int, module string) (spec, out string) {
	t.Helper()
	text := strings.NewReplacer("RATE", strconv.Itoa(rate), "MODULE", module).Replace(clusterJob)
	return inlineSpec(t, text)
}

// sameOutput compares the sorted lines of every output file of two runs.
func sameOutput(t testing.TB, got, want string) {
	t.Helper()
	for _, name := range []string{"windows.jsonl", "counts.jsonl"} {
		gotFiles, _ := filepath.Glob(filepath.Join(got, name+"*"))
		wantFiles, _ := filepath.Glob(filepath.Join(want, name+"*"))
		if len(gotFiles) == 0 || len(wantFiles) == 0 {
			t.Fatalf("%s: %d files, want %d", name, len(gotFiles), len(wantFiles))
		}
		var g, w []string
		for _, f := range gotFiles {
			g = append(g, sortedLines(t, f)...)
		}
		for _, f := range wantFiles {
			w = append(w, sortedLines(t, f)...)
		}
		slices.Sort(g)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			for i := range min(len(g), len(w)) {
				if g[i] != w[i] {
					t.Fatalf("%s: %d lines differ from the standalone run's %d; first difference:\n%s\n%s", name, len(g), len(w), g[i], w[i])
				}
			}
			t.Fatalf("%s: %d lines differ from the standalone run's %d", name, len(g), len(w))
		}
	}
}

// TestCluster runs a parallelism-4 keyed job (a window and a Wasm
// operator with keyed state) on 3 coordinators and 2 workers and checks its
// output against the same job on the embedded standalone (`eddy run`):
// undisturbed, with the leader killed mid-job, and with a worker killed
// mid-job. Module uploads are validated.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	// The reference: the same job, standalone.
	refSpec, refOut := clusterSpec(t, 0, module)
	if r := eddy(t, "run", refSpec); r.code != 0 {
		t.Fatalf("eddy run: %s", r.stderr)
	}

	c := startCluster(t, 16)
	t.Run("upload", func(t *testing.T) {
		r := c.eddyOK(t, "module upload", module, "--name", "counter")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "counter@1 sha256:") {
			t.Fatalf("upload: %d %s%s", r.code, r.stdout, r.stderr)
		}
		bad := filepath.Join(repoRoot(t), "host/testdata/missing_export.wasm")
		r = c.eddyOK(t, "module upload", bad, "--name", "bad")
		if r.code != 1 || !strings.Contains(r.stderr, `missing export "eddy_process"`) {
			t.Fatalf("upload of a module without eddy_process: %d %s", r.code, r.stderr)
		}
		junk := filepath.Join(c.dir, "junk.wasm")
		os.WriteFile(junk, []byte("\x00asm\x01\x00\x00\x00\x01\xff\xff\xff\xff\x0f"), 0o644)
		r = c.eddyOK(t, "module upload", junk, "--name", "junk")
		if r.code != 1 || !strings.HasPrefix(lastLine(r.stderr), "eddy: upload ") {
			t.Fatalf("upload of a corrupt module: %d %s", r.code, r.stderr)
		}
		if r := c.eddyOK(t, "module list"); !strings.Contains(r.stdout, "counter") || strings.Contains(r.stdout, "junk") {
			t.Fatalf("module list:\n%s", r.stdout)
		}
	})

	submit := func(t testing.TB, rate int) (id, out string) {
		spec, out := clusterSpec(t, rate, "counter")
		r := c.eddyOK(t, "job submit", spec)
		if r.code != 0 {
			t.Fatalf("submit: %s", r.stderr)
		}
		return strings.TrimSpace(r.stdout), out
	}
	t.Run("matches standalone", func(t *testing.T) {
		id, out := submit(t, 0)
		c.waitFinished(t, id, time.Minute)
		sameOutput(t, out, refOut)
		st := c.eddyOK(t, "job status", id).stdout
		if !strings.Contains(st, " w1 ") || !strings.Contains(st, " w2 ") {
			t.Errorf("tasks not spread over both workers:\n%s", st)
		}
		// Both workers shipped their tasks' lines to the leader, which any
		// coordinator serves.
		logs := c.eddyOK(t, "job logs", id).stdout
		for _, task := range []string{"txns[0]", "txns[3]", "per_card[0]", "per_card[3]", "counts[0]", "counts[3]", "out[0]"} {
			if !strings.Contains(logs, " "+task+" INFO task started\n") || !strings.Contains(logs, " "+task+" INFO task finished\n") {
				t.Errorf("job logs lack the start or end of task %s:\n%s", task, logs)
			}
		}
	})
	t.Run("leader killed", func(t *testing.T) {
		id, out := submit(t, 8000) // 5 s of input
		testkit.Eventually(t, 20*time.Second, "job running", func() bool { s, _, _ := c.jobState(t, id); return s == "RUNNING" })
		l := c.leader(t)
		c.coords[l].kill(t)
		start := time.Now()
		testkit.Eventually(t, 20*time.Second, "a new leader", func() bool {
			r := c.eddyOK(t, "cluster info")
			return r.code == 0 && strings.Contains(r.stdout, "LEADER")
		})
		t.Logf("new leader answering %s after the kill", time.Since(start).Round(time.Millisecond))
		attempt := c.waitFinished(t, id, time.Minute)
		if attempt != 1 {
			t.Errorf("the job restarted (attempt %d): a leader change must not disturb running tasks", attempt)
		}
		sameOutput(t, out, refOut)
		if r := c.eddyOK(t, "module list"); !strings.Contains(r.stdout, "counter") {
			t.Errorf("modules lost:\n%s", r.stdout)
		}
		if r := c.eddyOK(t, "job list"); strings.Count(r.stdout, "FINISHED") < 2 {
			t.Errorf("jobs lost:\n%s", r.stdout)
		}
	})
	t.Run("worker killed", func(t *testing.T) {
		id, out := submit(t, 8000)
		testkit.Eventually(t, 20*time.Second, "job running", func() bool { s, _, _ := c.jobState(t, id); return s == "RUNNING" })
		time.Sleep(time.Second) // mid-job: the scenario itself, not a wait for a condition
		c.workers[1].kill(t)
		attempt := c.waitFinished(t, id, 2*time.Minute)
		if attempt < 2 {
			t.Errorf("attempt %d: the job should have restarted", attempt)
		}
		sameOutput(t, out, refOut)
		st := c.eddyOK(t, "job status", id).stdout
		if strings.Contains(st, " w2 ") {
			t.Errorf("tasks still on the killed worker:\n%s", st)
		}
	})
}
