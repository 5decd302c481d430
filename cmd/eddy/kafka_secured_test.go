package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
)

const securedJob = `name: secured
parallelism: 1
nodes:
  - name: txns
    source: {kafka: {brokers: [BROKERS], topics: [txns], stop_at: latest, SECURITY}}
  - name: counts
    input: txns
    key_by: card
    wasm: {module: MODULE}
  - name: out
    input: counts
    sink: {kafka: {brokers: [BROKERS], topic: counts, SECURITY}}
`

// TestKafkaSecured runs a job against a broker that requires SASL
// (SCRAM-SHA-256) over TLS, with the password in the environment of the
// process that runs the tasks: with a wrong password the job fails at
// once with the broker's answer; with the right one it reads the input
// (to its end when the job starts: stop_at: latest) and finishes, and its
// output, read by kcat over SASL and TLS too, is exact.
func TestKafkaSecured(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	kafkatest.Kcat(t)
	br := kafkatest.Start(t, kafkatest.Options{
		Topics: map[string]int{"txns": 2, "counts": 1},
		SASL:   &kafkatest.SASL{Mechanism: "SCRAM-SHA-256", User: "eddy", Password: "s3cret"},
		TLS:    true,
	})
	lines, perCard := kafkaInput(2000, 50, 0)
	br.Produce(t, "txns", lines, true)
	security := fmt.Sprintf("sasl: {mechanism: SCRAM-SHA-256, username: eddy, password_env: KAFKA_PASSWORD}, tls: {ca_file: %q}", br.CAFile())
	spec, _ := inlineSpec(t, strings.NewReplacer("BROKERS", br.Bootstrap(), "SECURITY", security,
		"MODULE", filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")).Replace(securedJob))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, eddyBin, "run", spec)
	cmd.Env = append(os.Environ(), "KAFKA_PASSWORD=wrong")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("with a wrong password: %v (context: %v)\n%s", err, ctx.Err(), tail(string(out), 2000))
	}
	t.Logf("with a wrong password: %s", lastLine(strings.TrimSpace(string(out))))

	// The job has ended when `eddy run` returns: nothing more is written.
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd = exec.CommandContext(ctx, eddyBin, "run", spec)
	cmd.Env = append(os.Environ(), "KAFKA_PASSWORD=s3cret")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with the right password: %v (context: %v)\n%s", err, ctx.Err(), tail(string(out), 2000))
	}
	want := expectedCounts(perCard)
	got := br.ReadCommitted(t, "counts", "%s")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		missing, extra := diffSorted(want, got)
		t.Fatalf("%d records, want %d: %d missing, %d extra", len(got), len(want), len(missing), len(extra))
	}
}
