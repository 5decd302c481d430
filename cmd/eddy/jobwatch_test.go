package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestJobStatusWatch follows jobs on a real standalone with `job status
// --watch` until they end: plain repeated blocks on a pipe, exit 0 for a
// job that finished, 1 for one that failed; the wrong caller is refused at
// once rather than watched.
func TestJobStatusWatch(t *testing.T) {
	dir := t.TempDir()
	api, cli := standaloneAPI(t, dir, "--data-dir", filepath.Join(dir, "data"), "--restart", "none", "--restarts", "0")
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	submit := func(spec string) string {
		t.Helper()
		r := cli("job", "submit", spec)
		if r.code != 0 {
			t.Fatalf("submit: %d %s", r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}

	t.Run("finished", func(t *testing.T) {
		// ~1.5 s at 2000 records/s: several rounds of 200 ms.
		id := submit(write("slow.yaml", "name: slow\nnodes:\n"+
			"  - name: seq\n    source: {generator: {kind: sequence, rate: 2000, count: 3000}}\n"+
			"  - name: out\n    input: seq\n    sink: {file: {path: "+filepath.Join(dir, "slow.jsonl")+"}}\n"))
		r := cli("job", "status", id, "--watch", "--interval", "200ms")
		if r.code != 0 {
			t.Fatalf("watch exited %d: %s%s", r.code, r.stdout, r.stderr)
		}
		blocks := strings.Split(strings.TrimSuffix(r.stdout, "\n\n"), "\n\n")
		if len(blocks) < 2 {
			t.Fatalf("%d status blocks, want the status repeated:\n%s", len(blocks), r.stdout)
		}
		for i, b := range blocks {
			if !strings.HasPrefix(b, "-- ") || !strings.Contains(b, "job "+id+" (slow): ") {
				t.Fatalf("block %d is not a status:\n%s", i, b)
			}
		}
		if last := blocks[len(blocks)-1]; !strings.Contains(last, ": FINISHED,") {
			t.Errorf("the last block is not the finished job:\n%s", last)
		}
		if strings.Contains(blocks[0], ": FINISHED,") {
			t.Errorf("the first block already shows the end; the job was too short to watch:\n%s", r.stdout)
		}
		if strings.Contains(r.stdout, "\x1b") {
			t.Errorf("terminal controls on a pipe")
		}
		if n := len(sortedLines(t, filepath.Join(dir, "slow.jsonl"))); n != 3000 {
			t.Errorf("%d records written, want 3000", n)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no pty: %v", err)
		}
		defer ptmx.Close()
		id := submit(filepath.Join(dir, "slow.yaml"))
		cmd := exec.Command(eddyBin, "job", "status", id, "--watch", "--interval", "200ms", "--coordinator", api)
		cmd.Stdout, cmd.Stderr = tty, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		var screen bytes.Buffer
		copied := make(chan struct{})
		go func() { _, _ = io.Copy(&screen, ptmx); close(copied) }()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("watch: %v\n%q", err, screen.String())
		}
		select {
		case <-copied:
		case <-time.After(10 * time.Second):
			t.Fatal("the terminal's output did not end")
		}
		// Each round clears the screen and draws the status from the top.
		rounds := strings.Split(screen.String(), "\x1b[H\x1b[2J")
		if len(rounds) < 3 || rounds[0] != "" {
			t.Fatalf("want the screen redrawn at least twice, got %q", screen.String())
		}
		if last := rounds[len(rounds)-1]; !strings.Contains(last, "job "+id+" (slow): FINISHED,") {
			t.Errorf("the last screen is not the finished job: %q", last)
		}
	})

	t.Run("failed", func(t *testing.T) {
		bad := write("bad.jsonl", "{\"a\":1}\nnot json\n")
		id := submit(write("bad.yaml", "name: bad\nnodes:\n"+
			"  - name: src\n    source: {file: {path: "+bad+"}}\n"+
			"  - name: out\n    input: src\n    sink: {file: {path: "+filepath.Join(dir, "bad.out.jsonl")+"}}\n"))
		r := cli("job", "status", id, "--watch", "--interval", "200ms")
		if r.code != 1 {
			t.Fatalf("watch of a failing job exited %d, want 1: %s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, ": FAILED,") {
			t.Errorf("no failed status block:\n%s", r.stdout)
		}
		if line := strings.TrimSpace(r.stderr); !strings.HasPrefix(line, "eddy: job "+id+" failed") || strings.Contains(line, "\n") {
			t.Errorf("want one error line naming the failure, got %q", r.stderr)
		}
	})

	t.Run("refused", func(t *testing.T) {
		id := submit(filepath.Join(dir, "slow.yaml"))
		if r := cli("tenant", "create", "other"); r.code != 0 {
			t.Fatalf("tenant create: %s", r.stderr)
		}
		other := strings.TrimSpace(cli("token", "create", "--tenant", "other", "--role", "viewer").stdout)
		for name, tok := range map[string]string{
			"no token":             "",
			"wrong token":          "eddy_" + strings.Repeat("x", 16) + "_" + strings.Repeat("0", 64),
			"another tenant's one": other,
		} {
			r := eddyEnv(t, []string{"EDDY_TOKEN=" + tok, "EDDY_CONFIG=" + filepath.Join(t.TempDir(), "c.yaml")},
				"job", "status", id, "--watch", "--interval", "100ms", "--coordinator", api)
			if r.code != 1 || r.stdout != "" || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("%s: exit %d, stdout %q, stderr %q: want refused in one line, nothing shown", name, r.code, r.stdout, r.stderr)
			}
		}
	})

	t.Run("bad interval", func(t *testing.T) {
		r := cli("job", "status", "x", "--watch", "--interval", "0s")
		if r.code != 2 || !strings.Contains(r.stderr, "--interval") {
			t.Errorf("exit %d: %s", r.code, r.stderr)
		}
	})
}
