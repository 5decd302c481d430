package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/storage"
)

// TestJobReadsKafka runs a job whose source is source.kafka (parallelism
// 2) into a stdout sink, through the registry, until every record arrived.
func TestJobReadsKafka(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"tx": 3}})
	// Values are JSON so that the file sink writes them as they are.
	produceJSON(t, br.Addrs(), "tx", 3, 0, 60)
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

func jsonLines(from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf(`{"i":%d}`, i))
	}
	sort.Strings(out)
	return out
}

// startJob parses yaml and runs it (as a deployment of all its tasks
// with cp, when not nil) until the test ends.
func startJob(t *testing.T, yaml string, reg connectors.Registry, cp *dataflow.Checkpointing) (*dataflow.Job, *dataflow.Running) {
	t.Helper()
	spec, err := jobspec.Parse([]byte(yaml), filepath.Join(t.TempDir(), "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	job, err := dataflow.NewJob(ctx, spec, dataflow.Options{Connectors: reg})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ts := range job.Tasks() {
		ids = append(ids, ts.ID)
	}
	run, err := job.StartDeployment(ctx, dataflow.Deployment{JobID: spec.Name, Tasks: ids, Checkpointing: cp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if _, err := run.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("job %s: %v", spec.Name, err)
		}
	})
	return job, run
}

// waitLines waits until out holds n lines and returns them sorted.
func waitLines(t *testing.T, out *syncBuffer, run *dataflow.Running, n int) []string {
	t.Helper()
	var lines []string
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d lines", n), func() bool {
		lines = strings.Fields(out.String())
		select {
		case <-run.Done():
			_, err := run.Wait()
			t.Fatalf("job ended with %d of %d lines: %v", len(lines), n, err)
		default:
		}
		return len(lines) >= n
	})
	sort.Strings(lines)
	return lines
}

// TestJobCommitsCheckpointToGroup: a checkpointing job whose Kafka
// source has a group commits, when a checkpoint completes, the offsets
// that checkpoint recorded — not those it read since — and a job with
// start: group continues from there.
func TestJobCommitsCheckpointToGroup(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"tx": 2}})
	produceJSON(t, br.Addrs(), "tx", 2, 0, 40)
	st, err := storage.Open(context.Background(), "file://"+t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acks := make(chan dataflow.Ack, 16)
	cp := &dataflow.Checkpointing{Store: st, Prefix: "tenants/default/jobs/kafka-group", Ack: func(a dataflow.Ack) { acks <- a }}
	out := &syncBuffer{}
	_, run := startJob(t, fmt.Sprintf(`name: kafka-group
parallelism: 1
nodes:
  - name: in
    source: {kafka: {brokers: [%q], topics: [tx], group: g}}
  - name: out
    input: in
    sink: {stdout: {}}
`, br.Bootstrap()), connectors.Registry{Stdout: out}, cp)
	waitLines(t, out, run, 40)

	// Checkpoint 1, with every record of the topic read: the one task
	// (source and sink chained) acknowledges.
	if err := run.Trigger(dataflow.Trigger{ID: 1}); err != nil {
		t.Fatal(err)
	}
	var ack dataflow.Ack
	select {
	case ack = <-acks:
	case <-time.After(30 * time.Second):
		t.Fatal("no ack of checkpoint 1 within 30s")
	}
	rc, err := st.Get(context.Background(), ack.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Source struct {
			Position []byte `json:"position"`
		} `json:"source"`
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	var pos map[string]map[string]int64
	if err := json.Unmarshal(manifest.Source.Position, &pos); err != nil {
		t.Fatalf("position %s: %v", manifest.Source.Position, err)
	}
	want := fmt.Sprintf("map[0:%d 1:%d]", pos["tx"]["0"], pos["tx"]["1"])
	if want != "map[0:20 1:20]" {
		t.Fatalf("checkpoint 1 recorded %s, want every record read", manifest.Source.Position)
	}

	// The job reads on before the checkpoint completes.
	produceJSON(t, br.Addrs(), "tx", 2, 40, 10)
	waitLines(t, out, run, 50)
	if got := groupOffsets(t, br.Addrs(), "g", "tx", 2); len(got) != 0 {
		t.Fatalf("group has offsets %v before a checkpoint completed", got)
	}
	run.Complete(1)
	testkit.Eventually(t, 20*time.Second, "the group offsets to be checkpoint 1's "+want, func() bool {
		return fmt.Sprint(groupOffsets(t, br.Addrs(), "g", "tx", 2)) == want
	})

	// A second job from the group reads what came after checkpoint 1.
	out2 := &syncBuffer{}
	_, run2 := startJob(t, fmt.Sprintf(`name: kafka-from-group
parallelism: 1
nodes:
  - name: in
    source: {kafka: {brokers: [%q], topics: [tx], start: group, group: g}}
  - name: out
    input: in
    sink: {stdout: {}}
`, br.Bootstrap()), connectors.Registry{Stdout: out2}, nil)
	if got, want := waitLines(t, out2, run2, 10), jsonLines(40, 10); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("second job read %v, want %v", got, want)
	}
}

// TestJobPartitionWatermarks: one source subtask reads two partitions of
// which only partition 0 has records. The silent partition holds the
// watermark back until it is idle (idle_timeout), then partition 0
// alone drives it.
func TestJobPartitionWatermarks(t *testing.T) {
	const idle = 600 * time.Millisecond
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"ev": 2}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	newest := int64(math.MinInt64)
	produceOne := func(i int) {
		ts := baseTime.Add(time.Duration(i) * time.Second)
		r := &kgo.Record{Topic: "ev", Partition: 0, Value: fmt.Appendf(nil, `{"i":%d}`, i), Timestamp: ts}
		// newest bounds what the source can have read: set it before
		// the record can be fetched.
		mu.Lock()
		newest = ts.UnixMilli()
		mu.Unlock()
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Errorf("produce: %v", err)
		}
	}
	produceOne(0)
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			produceOne(i)
		}
	}()
	defer func() { close(stop); <-produced }()

	start := time.Now()
	job, run := startJob(t, fmt.Sprintf(`name: kafka-wm
parallelism: 1
nodes:
  - name: in
    source: {kafka: {brokers: [%q], topics: [ev]}}
    event_time: {max_out_of_orderness: 0ms, idle_timeout: %dms}
  - name: out
    input: in
    sink: {discard: {}}
`, br.Bootstrap(), idle.Milliseconds()), connectors.Registry{}, nil)
	watermark := func() int64 {
		stats := job.TaskStats()
		if len(stats) != 1 {
			t.Fatalf("%d tasks, want the source and sink chained in one", len(stats))
		}
		return stats[0].Watermark
	}
	records := func() int64 {
		if stats := job.TaskStats(); len(stats) == 1 {
			return stats[0].RecordsIn
		}
		return 0
	}
	defer func() { // also when Eventually fails the test
		if t.Failed() {
			t.Logf("%d records read", records())
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	testkit.Eventually(t, time.Until(deadline), "a watermark", func() bool {
		select {
		case <-run.Done():
			t.Fatal("the job ended")
		default:
		}
		return watermark() != math.MinInt64
	})
	if d := time.Since(start); d < idle {
		t.Fatalf("the watermark advanced %v after the start, before partition 1 was idle (%v)", d, idle)
	}
	first := watermark()
	mu.Lock()
	top := newest
	mu.Unlock()
	if first < baseTime.UnixMilli()-1 || first > top-1 {
		t.Fatalf("watermark %d outside [%d, %d]", first, baseTime.UnixMilli()-1, top-1)
	}
	// Partition 0 drives it on.
	testkit.Eventually(t, time.Until(deadline), fmt.Sprintf("the watermark past %d", first+3000), func() bool {
		return watermark() >= first+3000
	})
}
