package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// foreverJob runs until it is interrupted, slowly.
const foreverJob = `name: forever
nodes:
  - name: seq
    source: {generator: {kind: sequence, rate: 20}}
  - name: out
    input: seq
    sink: {discard: {}}
`

// TestRunRemovesStaleDirs: the data directory of an `eddy run` that was
// killed is removed by the next run, and that of a run still going is
// kept. The runs' temporary directory is the test's.
func TestRunRemovesStaleDirs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts eddy run processes")
	}
	tmp, logs := t.TempDir(), t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	forever, _ := inlineSpec(t, foreverJob)
	// started lists the run directories whose run got as far as starting
	// its coordinator (it locked the directory before).
	started := func() []string {
		raft, _ := filepath.Glob(filepath.Join(tmp, runDirPrefix+"*", "raft"))
		for i := range raft {
			raft[i] = filepath.Dir(raft[i])
		}
		slices.Sort(raft)
		return raft
	}

	startProcEnv(t, logs, "live", env, "run", forever)
	testkit.Eventually(t, 30*time.Second, "the live run's directory", func() bool { return len(started()) == 1 })
	live := started()[0]
	killed := startProcEnv(t, logs, "killed", env, "run", forever)
	testkit.Eventually(t, 30*time.Second, "the second run's directory", func() bool { return len(started()) == 2 })
	stale := started()[slices.IndexFunc(started(), func(d string) bool { return d != live })]
	killed.kill(t) // SIGKILL: no clean-up
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed run's directory: %v", err)
	}

	bounded, _ := inlineSpec(t, strings.Replace(foreverJob, "rate: 20", "count: 10", 1))
	next := startProcEnv(t, logs, "next", env, "run", bounded)
	if err := next.cmd.Wait(); err != nil {
		b, _ := os.ReadFile(next.log)
		t.Fatalf("the next run: %v\n%s", err, b)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the killed run's directory %s is still there (%v)", stale, err)
	}
	if _, err := os.Stat(filepath.Join(live, runDirLock)); err != nil {
		t.Errorf("the live run's directory: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, runDirPrefix+"*"))
	if !slices.Equal(left, []string{live}) {
		t.Errorf("run directories left: %v, want only the live run's %s", left, live)
	}
}
