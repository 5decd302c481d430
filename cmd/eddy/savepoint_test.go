package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

const checkpointedJob = `name: counted
parallelism: 2
checkpoint:
  interval: 300ms
  retain: 2
nodes:
  - name: txns
    source: {generator: {kind: transactions, count: 60000, rate: 10000, cards: 50, seed: 7}}
  - name: per_card
    input: txns
    key_by: card
    window: {tumbling: 1h}
    aggregate: [count]
  - name: out
    input: per_card
    sink: {file: {path: $OUT/counts.jsonl}}
`

// TestSavepointCLI drives checkpoints and savepoints through the CLI on a
// standalone process: `eddy job status` lists the checkpoints of a
// checkpointed job, `eddy savepoint create --stop` prints the savepoint's
// path (under the default checkpoint storage, DATA-DIR/checkpoints) and
// cancels the job, and `eddy job submit --from-savepoint` starts a job from
// it.
func TestSavepointCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cli := standaloneCLI(t, dir, "--data-dir", data, "--restart", "fixed", "--restart-delay", "200ms")
	spec, _ := inlineSpec(t, checkpointedJob)
	r := cli("job", "submit", spec)
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	completed := regexp.MustCompile(`(?m)^\d+\s+CHECKPOINT\s+COMPLETED\s+\d+ms\s+\d+\s+\d+\s+tenants/default/jobs/` + id + `/chk/\d+/_manifest.json`)
	testkit.Eventually(t, 30*time.Second, "a completed checkpoint in job status", func() bool {
		return completed.MatchString(cli("job", "status", id).stdout)
	})

	r = cli("savepoint", "create", id, "--stop")
	path := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^tenants/default/savepoints/`+id+`-\d+$`).MatchString(path) {
		t.Fatalf("savepoint create: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "checkpoints", filepath.FromSlash(path), "_manifest.json")); err != nil {
		t.Fatalf("savepoint manifest: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the job canceled", func() bool {
		return strings.Contains(cli("job", "status", id).stdout, "CANCELED")
	})
	if st := cli("job", "status", id).stdout; !regexp.MustCompile(`(?m)^\d+\s+SAVEPOINT\s+COMPLETED.*` + regexp.QuoteMeta(path)).MatchString(st) {
		t.Fatalf("job status does not list the savepoint:\n%s", st)
	}

	r = cli("job", "submit", spec, "--from-savepoint", "tenants/default/savepoints/nope")
	if r.code != 1 || !strings.Contains(r.stderr, "savepoint tenants/default/savepoints/nope not found") {
		t.Fatalf("submit from a missing savepoint: %d %s", r.code, r.stderr)
	}
	r = cli("job", "submit", spec, "--from-savepoint", path)
	if r.code != 0 {
		t.Fatalf("submit from the savepoint: %s", r.stderr)
	}
	next := strings.TrimSpace(r.stdout)
	var last string
	testkit.Eventually(t, time.Minute, "the job started from the savepoint to finish", func() bool {
		last = cli("job", "status", next).stdout
		if strings.Contains(last, "FAILED,") || strings.Contains(last, "CANCELED,") {
			t.Fatalf("job from the savepoint:\n%s", last)
		}
		return strings.Contains(last, "FINISHED,")
	})
	if attempt := regexp.MustCompile(`attempt (\d+)`).FindStringSubmatch(last); attempt == nil || attempt[1] != "1" {
		t.Fatalf("the job from the savepoint restarted:\n%s", last)
	}
	r = cli("savepoint", "create", next)
	if r.code != 1 || !strings.Contains(r.stderr, "only a running job takes a savepoint") {
		t.Fatalf("savepoint of a finished job: %d %s", r.code, r.stderr)
	}
}

// standaloneCLI starts `eddy standalone` on a port it binds with the
// extra args, waits until its worker is alive and returns a CLI against it.
func standaloneCLI(t *testing.T, dir string, args ...string) func(args ...string) result {
	t.Helper()
	_, _, cli := standaloneStart(t, dir, args...)
	return cli
}

// standaloneProc is standaloneCLI that also returns the process.
func standaloneProc(t *testing.T, dir string, args ...string) (*proc, func(args ...string) result) {
	t.Helper()
	p, _, cli := standaloneStart(t, dir, args...)
	return p, cli
}

// standaloneAPI is standaloneCLI that also returns the API address.
func standaloneAPI(t *testing.T, dir string, args ...string) (string, func(args ...string) result) {
	t.Helper()
	_, api, cli := standaloneStart(t, dir, args...)
	return api, cli
}

func standaloneStart(t *testing.T, dir string, args ...string) (*proc, string, func(args ...string) result) {
	t.Helper()
	standalone := startProc(t, dir, "standalone", append([]string{"standalone", "--api", "127.0.0.1:0"}, args...)...)
	api := standalone.addr(t, standaloneLine)
	cli := func(args ...string) result {
		t.Helper()
		return eddy(t, append(args, "--coordinator", api)...)
	}
	testkit.Eventually(t, 30*time.Second, "the standalone worker", func() bool {
		return strings.Contains(cli("cluster", "info").stdout, "ALIVE")
	})
	return standalone, api, cli
}
