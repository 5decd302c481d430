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

// chattyJob runs host/testdata/chatty.wasm (1000 stdout and 10 stderr
// lines per batch, rate-limited by the host) on a slow generator, so that
// it logs until it is canceled.
const chattyJob = `name: chatty
nodes:
  - name: txns
    source: {generator: {kind: transactions, count: 100000000, rate: 20, cards: 10, seed: 1}}
  - name: op
    input: txns
    wasm: {module: chatty@1}
  - name: out
    input: op
    sink: {file: {path: $OUT/out.jsonl}}
`

// failingJob runs host/testdata/fail.wasm, which fails its first batch.
const failingJob = `name: failing
nodes:
  - name: txns
    source: {file: {path: $ROOT/cmd/eddy/testdata/txns.jsonl}}
  - name: op
    input: txns
    wasm: {module: fail@1}
  - name: out
    input: op
    sink: {file: {path: $OUT/out.jsonl}}
`

// logLine is one line of `eddy job logs`: TIME TASK LEVEL [stream] message.
var logLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \S+ (DEBUG|INFO|WARN|ERROR) (\[(log|stdout|stderr)\] )?\S.*$`)

// TestJobLogsCLI drives `eddy job logs` on a standalone process: a job's
// guest output (its Wasm module's stdout, and the host's rate-limit lines) and its tasks' life
// are shown to its tenant, --follow prints lines while the job runs and
// returns once it is canceled, a failed task's error is shown, and the
// same job asked for as another tenant is not found, as for job status.
func TestJobLogsCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	api, cli := standaloneAPI(t, dir, "--data-dir", filepath.Join(dir, "data"), "--restart", "none")
	root := repoRoot(t)
	for _, m := range []string{"chatty", "fail"} {
		if r := cli("module", "upload", filepath.Join(root, "host/testdata", m+".wasm"), "--name", m); r.code != 0 {
			t.Fatalf("upload %s: %s", m, r.stderr)
		}
	}
	spec, _ := inlineSpec(t, chattyJob)
	r := cli("job", "submit", spec)
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	id := strings.TrimSpace(r.stdout)

	follow := startProc(t, dir, "follow", "job", "logs", id, "--follow", "--coordinator", api)
	followOut := func() string {
		b, err := os.ReadFile(follow.log)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// (Its stderr lines come after 1000 stdout lines a batch: the host's
	// rate limit drops them all.)
	testkit.Eventually(t, 60*time.Second, "guest stdout lines, and the count of those dropped, in job logs --follow", func() bool {
		out := followOut()
		return strings.Contains(out, "[stdout] chatty line 0") && strings.Contains(out, "dropped_lines=")
	})
	// Seen while the job still runs.
	if st := cli("job", "status", id).stdout; !strings.Contains(st, "RUNNING") {
		t.Fatalf("the job no longer runs:\n%s", st)
	}

	logs := cli("job", "logs", id)
	if logs.code != 0 {
		t.Fatalf("job logs: %d %s", logs.code, logs.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(logs.stdout, "\n"), "\n")
	for _, l := range lines {
		if !logLine.MatchString(l) {
			t.Fatalf("malformed line %q in\n%s", l, logs.stdout)
		}
	}
	for _, want := range []string{" txns[0] INFO task started", " txns[0] INFO [stdout] chatty line 0",
		"guest output dropped by the log rate limit dropped_lines="} {
		if !strings.Contains(logs.stdout, want) {
			t.Errorf("job logs lacks %q:\n%s", want, tail(logs.stdout, 3000))
		}
	}
	if since := cli("job", "logs", id, "--since", "2"); since.code != 0 || !strings.HasPrefix(logs.stdout, strings.Join(lines[:2], "\n")+"\n"+firstLine(since.stdout)) {
		t.Errorf("--since 2 does not start at the third line:\n%s\nvs\n%s", firstLine(since.stdout), strings.Join(lines[:3], "\n"))
	}

	// Another tenant does not see the job, nor its logs.
	for _, cmd := range [][]string{{"job", "logs", id}, {"job", "logs", id, "--follow"}, {"job", "status", id}} {
		other := cli(append(cmd, "--tenant", "other")...)
		if other.code == 0 || !strings.Contains(other.stderr, `tenant "other" not found`) || strings.Contains(other.stdout, "chatty") {
			t.Errorf("%v as tenant other: exit %d\n%s%s", cmd, other.code, other.stdout, other.stderr)
		}
	}

	// --follow ends once the job is canceled.
	if r := cli("job", "cancel", id); r.code != 0 {
		t.Fatalf("cancel: %s", r.stderr)
	}
	exited := make(chan error, 1)
	go func() { exited <- follow.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("job logs --follow: %v\n%s", err, tail(followOut(), 2000))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("job logs --follow still runs after the job was canceled:\n%s", tail(followOut(), 2000))
	}

	// A failed task's error is in the logs.
	spec, _ = inlineSpec(t, failingJob)
	r = cli("job", "submit", spec)
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	failing := strings.TrimSpace(r.stdout)
	testkit.Eventually(t, 60*time.Second, "the failing job to fail", func() bool {
		return strings.Contains(cli("job", "status", failing).stdout, "FAILED")
	})
	out := cli("job", "logs", failing, "--follow").stdout // returns at once: the job is terminal
	t.Logf("logs of the failed job:\n%s", out)
	for _, want := range []string{" txns[0] ERROR task failed", "bad record"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs of the failed job lack %q:\n%s", want, out)
		}
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
