package kafka_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors/kafka"
	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// committed is the sorted values read_committed sees in topic.
func committed(t *testing.T, br *kafkatest.Broker, topic string) []string {
	t.Helper()
	v := br.ReadCommitted(t, topic, "%s")
	slices.Sort(v)
	return v
}

func batchOf(vals ...string) *stream.Batch {
	b := stream.NewBatch(len(vals))
	for _, v := range vals {
		b.AddRecord(&stream.Record{Key: []byte("k" + v), Value: []byte(v), Timestamp: 1_700_000_000_000})
	}
	return b
}

func openSink(t *testing.T, br *kafkatest.Broker, cfg kafka.SinkConfig, subtask, par int, checkpointing bool) *kafka.Sink {
	t.Helper()
	cfg.Brokers = br.Addrs()
	if cfg.Topic == "" {
		cfg.Topic = "out"
	}
	s, err := kafka.NewSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info := stream.TaskInfo{Job: "j", JobID: "j-1", Node: "out", Subtask: subtask, Parallelism: par, Checkpointing: checkpointing}
	if err := s.Open(context.Background(), info); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, br *kafkatest.Broker, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := committed(t, br, "out"); !slices.Equal(got, want) {
		t.Fatalf("%s: read_committed sees %v, want %v", what, got, want)
	}
}

// TestSinkExactlyOnce walks the two-phase commit: nothing is visible
// before the checkpoint completes; a crash after a pre-commit and before
// the completion reached the sink is repaired by the next attempt, which
// commits the staged transaction and aborts the one the crashed attempt
// had open; records written afterwards are visible (no transaction left
// open holds them back).
func TestSinkExactlyOnce(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"out": 2}})
	ctx := context.Background()
	eos := kafka.SinkConfig{ExactlyOnce: true}

	s := openSink(t, br, eos, 0, 1, true)
	must(t, s.Abort(ctx, nil))
	must(t, s.Write(ctx, batchOf("a1", "a2")))
	staged1, err := s.PreCommit(ctx, 1)
	must(t, err)
	expect(t, br, "after pre-commit 1")
	must(t, s.Commit(ctx, 1))
	expect(t, br, "after commit 1", "a1", "a2")

	// Checkpoint 2 is pre-committed, then the attempt dies before its
	// completion arrives, with c1 written in the next transaction.
	must(t, s.Write(ctx, batchOf("b1")))
	staged2, err := s.PreCommit(ctx, 2)
	must(t, err)
	must(t, s.Write(ctx, batchOf("c1")))
	expect(t, br, "after pre-commit 2", "a1", "a2")
	s.Close() // as a killed process: nothing ends the transactions

	// The next attempt restores checkpoint 2.
	s2 := openSink(t, br, eos, 0, 1, true)
	must(t, s2.Abort(ctx, staged2))
	expect(t, br, "after restore of 2", "a1", "a2", "b1")
	must(t, s2.Write(ctx, batchOf("d1")))
	_, err = s2.PreCommit(ctx, 3)
	must(t, err)
	must(t, s2.Commit(ctx, 3))
	expect(t, br, "after commit 3", "a1", "a2", "b1", "d1")
	s2.Close()

	// Restoring an older checkpoint whose transactions were committed
	// long ago is not an error and commits nothing twice.
	s3 := openSink(t, br, eos, 0, 1, true)
	must(t, s3.Abort(ctx, staged1))
	must(t, s3.Finish(ctx))
	expect(t, br, "after restore of 1", "a1", "a2", "b1", "d1")
}

// TestSinkExactlyOnceRescale: two subtasks each leave a pre-committed and
// an open transaction; one subtask at parallelism 1 restores both: it
// commits both staged transactions and aborts both open ones.
func TestSinkExactlyOnceRescale(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"out": 1}})
	ctx := context.Background()
	eos := kafka.SinkConfig{ExactlyOnce: true}
	var staged []string
	for sub := range 2 {
		s := openSink(t, br, eos, sub, 2, true)
		must(t, s.Abort(ctx, nil))
		must(t, s.Write(ctx, batchOf(fmt.Sprintf("s%d-staged", sub))))
		st, err := s.PreCommit(ctx, 5)
		must(t, err)
		staged = append(staged, st...)
		must(t, s.Write(ctx, batchOf(fmt.Sprintf("s%d-open", sub))))
		s.Close()
	}
	s := openSink(t, br, eos, 0, 1, true)
	must(t, s.Abort(ctx, staged))
	must(t, s.Write(ctx, batchOf("after")))
	must(t, s.Finish(ctx))
	expect(t, br, "after restore at parallelism 1", "s0-staged", "s1-staged", "after")
}

// TestSinkFencesZombie: an attempt that is still running when the next
// one starts (a worker cut off rather than killed) cannot commit: its
// producer was fenced.
func TestSinkFencesZombie(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"out": 1}})
	ctx := context.Background()
	eos := kafka.SinkConfig{ExactlyOnce: true}
	zombie := openSink(t, br, eos, 0, 1, true)
	must(t, zombie.Abort(ctx, nil))
	must(t, zombie.Write(ctx, batchOf("z")))
	next := openSink(t, br, eos, 0, 1, true)
	must(t, next.Abort(ctx, nil))
	if _, err := zombie.PreCommit(ctx, 1); err == nil {
		if err := zombie.Commit(ctx, 1); err == nil {
			t.Fatal("a fenced producer committed")
		}
	}
	must(t, next.Write(ctx, batchOf("n")))
	must(t, next.Finish(ctx))
	expect(t, br, "after the zombie", "n")
}

// TestSinkAtLeastOnce: records are visible once flushed by a checkpoint,
// with key, headers and timestamp; without checkpointing, Finish flushes.
// key_field takes the key from the value.
func TestSinkAtLeastOnce(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"out": 1, "keyed": 1}})
	ctx := context.Background()
	s := openSink(t, br, kafka.SinkConfig{}, 0, 1, true)
	must(t, s.Abort(ctx, nil))
	b := stream.NewBatch(1)
	b.AddRecord(&stream.Record{Key: []byte("k1"), Value: []byte(`{"v":1}`), Timestamp: 1_700_000_000_123,
		Headers: []stream.Header{{Key: "h", Value: []byte("x")}}})
	must(t, s.Write(ctx, b))
	_, err := s.PreCommit(ctx, 1)
	must(t, err)
	got := br.ReadCommitted(t, "out", "%k|%s|%T|%h")
	if want := []string{`k1|{"v":1}|1700000000123|h=x`}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}

	k := openSink(t, br, kafka.SinkConfig{Topic: "keyed", KeyField: "card"}, 0, 1, false)
	b = stream.NewBatch(2)
	b.AddRecord(&stream.Record{Value: []byte(`{"card":"c-7","n":1}`), Timestamp: stream.NoTimestamp})
	b.AddRecord(&stream.Record{Value: []byte(`{"n":2,"card":42}`), Timestamp: stream.NoTimestamp})
	must(t, k.Write(ctx, b))
	must(t, k.Finish(ctx))
	got = br.ReadCommitted(t, "keyed", "%k|%s")
	if want := []string{`c-7|{"card":"c-7","n":1}`, `42|{"n":2,"card":42}`}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	b = stream.NewBatch(1)
	b.AddRecord(&stream.Record{Value: []byte(`{"n":3}`)})
	if err := k.Write(ctx, b); err == nil || !strings.Contains(err.Error(), `key_field: record has no field "card"`) {
		t.Fatalf("record without the key field: err = %v", err)
	}
}

func TestSinkUnknownTopic(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"out": 1}})
	s, err := kafka.NewSink(kafka.SinkConfig{Brokers: br.Addrs(), Topic: "nope"})
	must(t, err)
	defer s.Close()
	err = s.Open(context.Background(), stream.TaskInfo{Job: "j", Node: "out", Parallelism: 1})
	if err == nil || !strings.Contains(err.Error(), `kafka sink: kafka: unknown topic "nope"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestSinkUnreachableBroker: Open retries with backoff while nothing
// listens, fails with the brokers named after OpenTimeout, and succeeds
// once a broker comes up within it.
func TestSinkUnreachableBroker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	s, err := kafka.NewSink(kafka.SinkConfig{Brokers: []string{addr}, Topic: "out", OpenTimeout: 1500 * time.Millisecond})
	must(t, err)
	start := time.Now()
	err = s.Open(context.Background(), stream.TaskInfo{Job: "j", Node: "out", Parallelism: 1})
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "metadata from ["+addr+"]") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("gave up after %v, before the open timeout", d)
	}

	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"out": 1}})
	br.Stop()
	s, err = kafka.NewSink(kafka.SinkConfig{Brokers: br.Addrs(), Topic: "out"})
	must(t, err)
	defer s.Close()
	opened := make(chan error, 1)
	go func() { opened <- s.Open(context.Background(), stream.TaskInfo{Job: "j", Node: "out", Parallelism: 1}) }()
	br.AwaitDials(t, 2) // Open tried and tries again
	br.Start()
	must(t, <-opened)
}
