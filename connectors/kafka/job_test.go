package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// TestJobReadsKafka runs a job whose source is source.kafka (parallelism
// 2) into a stdout sink, through the registry, until every record arrived.
func TestJobReadsKafka(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"tx": 3}})
	// Values are JSON so that the file sink writes them as they are.
	produceJSON(t, br.Addrs(), "tx", 3, 60)
	dir := t.TempDir()
	out := &syncBuffer{}
	yaml := fmt.Sprintf(`name: kafka-read
parallelism: 2
nodes:
  - name: in
    source: {kafka: {brokers: [%q], topics: [tx], start: earliest}}
  - name: out
    input: in
    parallelism: 1
    sink: {stdout: {}}
`, br.Bootstrap())
	spec, err := jobspec.Parse([]byte(yaml), filepath.Join(dir, "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	job, err := dataflow.NewJob(ctx, spec, dataflow.Options{Connectors: connectors.Registry{Stdout: out}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := job.Run(runCtx); done <- err }()
	var lines []string
	for {
		lines = strings.Fields(out.String())
		if len(lines) >= 60 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("job ended early (%d lines): %v", len(lines), err)
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("timed out with %d lines", len(lines))
		}
	}
	stop()
	<-done
	sort.Strings(lines)
	var want []string
	for i := range 60 {
		want = append(want, fmt.Sprintf(`{"i":%d}`, i))
	}
	sort.Strings(want)
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
