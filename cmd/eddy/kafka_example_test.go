package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// TestKafkaFraudExample runs the Kafka example of the README as a user
// would, on a broker of its own: examples/kafka-produce.yaml fills the
// topic "transactions", examples/kafka-fraud.yaml (unbounded: it runs
// until interrupted) writes alerts exactly once to "alerts", and the
// alerts read with kcat and read_committed must be the ones `eddy run
// examples/demo.yaml` prints for the same generated transactions.
//
// The two sets can be compared exactly because the country-change
// operator depends on the order of each card's transactions, and both
// jobs see the generator's order: the demo has one source subtask, and
// kafka-produce writes with one generator and one sink subtask, keyed by
// card (key_field), so a card's records sit in one partition in generator
// order, which the Kafka source reads in offset order. The operator also
// depends on when its cleanup timers fire relative to late records (event
// time): the Kafka source's per-partition watermarks are never ahead of
// the demo's at any of a card's records, since a partition holds only
// some of the records before it; on this data they clear the same state.
func TestKafkaFraudExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (apt-get install kcat; CI installs it): the test reads the alerts with it")
	}
	root, dir := repoRoot(t), t.TempDir()

	want := demoAlerts(t, root, filepath.Join(dir, "demo"))
	if len(want) < 10 {
		t.Fatalf("the demo printed %d alerts; expected some sixty", len(want))
	}

	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"transactions": 4, "alerts": 1}})
	produce := exampleCopy(t, root, dir, "kafka-produce.yaml", br.Bootstrap())
	fraud := exampleCopy(t, root, dir, "kafka-fraud.yaml", br.Bootstrap())

	if r := eddy(t, "run", produce); r.code != 0 || !strings.Contains(r.stderr, "30000") {
		t.Fatalf("eddy run kafka-produce.yaml: exit %d\n%s", r.code, r.stderr)
	}

	job, exited := startBackground(t, dir, "kafka-fraud", "run", fraud)
	var got []string
	testkit.Eventually(t, 2*time.Minute, "all alerts committed to the topic alerts", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("eddy run kafka-fraud.yaml ended on its own: %v", err)
		default:
		}
		got = readCommittedAlerts(t, kcat, br.Bootstrap())
		return len(got) >= len(want)
	})

	// Interrupt the job as Ctrl-C would; it cancels itself and exits 0.
	// Then read again: what was committed after the count was reached must
	// not add anything.
	if err := job.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("eddy run kafka-fraud.yaml after SIGINT: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("eddy run kafka-fraud.yaml still running 30 s after SIGINT")
	}
	if b, _ := os.ReadFile(job.log); !strings.Contains(string(b), "interrupted") {
		t.Errorf("no summary of an interrupted job:\n%s", tail(string(b), 3000))
	}
	got = readCommittedAlerts(t, kcat, br.Bootstrap())

	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("alerts in Kafka (%d) differ from the demo's (%d):\nKafka:\n%s\ndemo:\n%s",
			len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// startBackground starts `eddy args…` with its output in dir/name.log and
// returns it with a channel that receives its Wait's result; it is killed
// when the test ends, and its log shown if the test failed.
func startBackground(t *testing.T, dir, name string, args ...string) (*proc, <-chan error) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(eddyBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		waited <- err
		exited <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL) // an error once it has exited
		<-waited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("---- %s log (last 3000 bytes) ----\n%s", name, tail(string(b), 3000))
		}
	})
	return &proc{name: name, cmd: cmd, log: logPath}, exited
}

// demoAlerts runs a copy of examples/demo.yaml in dir (so that its output
// files land there) and returns the JSON of its ALERT lines, sorted.
func demoAlerts(t *testing.T, root, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "examples", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "demo.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte(replaceAll(t, string(raw), "../udfs/build/", filepath.Join(root, "udfs", "build")+"/")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := eddy(t, "run", spec)
	if r.code != 0 {
		t.Fatalf("eddy run demo.yaml: exit %d\n%s", r.code, r.stderr)
	}
	var alerts []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if a, ok := strings.CutPrefix(line, "ALERT "); ok {
			alerts = append(alerts, a)
		}
	}
	slices.Sort(alerts)
	return alerts
}

// exampleCopy writes examples/name into dir with the broker's address, the
// module's absolute path and a checkpoint storage under dir, and returns
// its path. Each replacement must apply, so that a change of the example
// shows here.
func exampleCopy(t *testing.T, root, dir, name, bootstrap string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	text := replaceAll(t, string(raw), "127.0.0.1:9092", bootstrap)
	if strings.Contains(text, "checkpoint:") {
		text = replaceAll(t, text, "file:///tmp/eddy/kafka-fraud/checkpoints", "file://"+filepath.Join(dir, "checkpoints"))
		text = replaceAll(t, text, "../udfs/build/", filepath.Join(root, "udfs", "build")+"/")
	}
	spec := filepath.Join(dir, name)
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

func replaceAll(t *testing.T, s, old, repl string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the example no longer contains %q", old)
	}
	return strings.ReplaceAll(s, old, repl)
}

// readCommittedAlerts reads the topic alerts from its start to its last
// stable offset, as the README tells a user to, and returns the values
// sorted.
func readCommittedAlerts(t *testing.T, kcat, bootstrap string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", bootstrap, "-t", "alerts", "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", `%s\n`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C alerts: %v\n%s", err, stderr.String())
	}
	var alerts []string
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" {
			alerts = append(alerts, line)
		}
	}
	slices.Sort(alerts)
	return alerts
}
