package kafkatest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
)

// TestRestartKeepsData writes plain records, a committed and an aborted
// transaction, one transaction left open and a group's offset, restarts
// the broker, and reads the topic back with read_committed: exactly the
// committed records, in order, must be there. A clean stop keeps the open
// transaction open (its producer commits it after the restart); SIGKILL
// aborts it, as a real broker's recovery does, and the producer's next
// transactions are visible again.
func TestRestartKeepsData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart func(*kafkatest.Broker)
		// openCommitted: the transaction open at the restart is committed
		// by its producer afterwards and so must be read back.
		openCommitted bool
	}{
		{"stop", (*kafkatest.Broker).Stop, true},
		{"kill", (*kafkatest.Broker).Kill, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"t": 1}})

			plain := client(t, br)
			// Offset requests by topic name, as before Kafka 3.x's topic ids.
			offsets := client(t, br, kgo.MaxVersions(kversion.V2_8_0()))
			produce(ctx, t, plain, "p0", "p1", "p2")
			txn := client(t, br, kgo.TransactionalID("tx-"+tc.name))
			transaction(ctx, t, txn, kgo.TryCommit, "c0", "c1", "c2")
			transaction(ctx, t, txn, kgo.TryAbort, "a0", "a1")
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			produce(ctx, t, txn, "o0", "o1")
			commitOffset(ctx, t, offsets, "g", "t", 0, 3)

			tc.restart(br)
			br.Start()

			want := []string{"p0", "p1", "p2", "c0", "c1", "c2"}
			if tc.openCommitted {
				// The producer's client reconnects and carries on.
				if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatalf("commit the transaction open at the stop: %v", err)
				}
				want = append(want, "o0", "o1")
			}
			txn.Close()
			// A producer with the same transactional id (fencing the old
			// one), so the producer state survived too; its commit is the
			// end marker of the read below.
			after := client(t, br, kgo.TransactionalID("tx-"+tc.name))
			transaction(ctx, t, after, kgo.TryCommit, "end")
			want = append(want, "end")

			if got := readCommitted(ctx, t, br, "t", "end"); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("read_committed after %s:\n got %v\nwant %v", tc.name, got, want)
			}
			// Once more: what the first restart wrote (the abort marker
			// after a kill) replays too, and the topic is not created anew.
			tc.restart(br)
			br.Start()
			if got := readCommitted(ctx, t, br, "t", "end"); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("read_committed after a second %s:\n got %v\nwant %v", tc.name, got, want)
			}
			if got := fetchOffset(ctx, t, offsets, "g", "t", 0); got != 3 {
				t.Errorf("group g's offset after %s = %d, want 3", tc.name, got)
			}
		})
	}
}

func client(t *testing.T, br *kafkatest.Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(br.Addrs()...), kgo.DefaultProduceTopic("t")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produce(ctx context.Context, t *testing.T, cl *kgo.Client, values ...string) {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, kgo.StringRecord(v))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %v: %v", values, err)
	}
}

func transaction(ctx context.Context, t *testing.T, cl *kgo.Client, end kgo.TransactionEndTry, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, cl, values...)
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatalf("end transaction %v: %v", values, err)
	}
}

// readCommitted reads topic from the start with read_committed until the
// record whose value is last, with a client with opts too.
func readCommitted(ctx context.Context, t *testing.T, br *kafkatest.Broker, topic, last string, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(br.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %v, no %q yet: %v", got, last, err)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for _, r := range fs.Records() {
			got = append(got, string(r.Value))
			if string(r.Value) == last {
				return got
			}
		}
	}
}

func commitOffset(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition = partition
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("commit offset: %v", err)
	}
}

func fetchOffset(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("fetch offset: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic && rp.Partition == partition {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Fatalf("fetch offset: %v", err)
				}
				return rp.Offset
			}
		}
	}
	t.Fatalf("fetch offset: no %s/%d in the response", topic, partition)
	return 0
}
