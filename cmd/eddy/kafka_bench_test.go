package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
)

const kafkaBenchJob = `name: kafka-bench
parallelism: 2
checkpoint: {interval: 1s, timeout: 10s, storage: "file://$OUT/checkpoints"}
nodes:
  - name: in
    source: {kafka: {brokers: [BROKERS], topics: [in], start: earliest}}
  - name: map
    input: in
    wasm: {module: project, config: {fields: [card, amount, i]}}
  - name: out
    input: map
    sink: {kafka: {brokers: [BROKERS], topic: TOPIC, delivery: DELIVERY}}
`

// BenchmarkKafkaPipeline is the throughput of Kafka → Wasm map (the C
// project operator) → Kafka on one coordinator and two worker processes
// and a broker process, exactly-once against at-least-once: the time from
// submission until a read_committed consumer has seen every output record.
// Checkpoints every second in both modes; exactly-once records become
// visible when their checkpoint completes, so the last second of a run
// waits for it.
func BenchmarkKafkaPipeline(b *testing.B) {
	const records = 1_000_000
	br := kafkatest.Start(b, kafkatest.Options{Topics: map[string]int{"in": 4, "out-exactly_once": 4, "out-at_least_once": 4}})
	fillKafka(b, br, "in", records)
	c := startFTB(b, nil, 8)
	module := filepath.Join(repoRoot(b), "udfs/build/project-c.wasm")
	if r := c.client(b, "module", "upload", module, "--name", "project"); r.code != 0 {
		b.Fatal(r.stderr)
	}
	elapsed := map[string]time.Duration{}
	modes := []string{"exactly_once", "at_least_once"}
	for b.Loop() {
		for _, mode := range modes {
			topic := "out-" + mode
			text := strings.NewReplacer("BROKERS", br.Bootstrap(), "TOPIC", topic, "DELIVERY", mode).Replace(kafkaBenchJob)
			spec, _ := inlineSpec(b, text)
			counted := countFromEnd(b, br, topic, records)
			start := time.Now()
			r := c.client(b, "job", "submit", spec)
			if r.code != 0 {
				b.Fatal(r.stderr)
			}
			id := strings.TrimSpace(r.stdout)
			if err := <-counted; err != nil {
				b.Fatal(err)
			}
			elapsed[mode] += time.Since(start)
			if r := c.client(b, "job", "cancel", id); r.code != 0 {
				b.Fatal(r.stderr)
			}
			c.waitState(b, id, "CANCELED", time.Minute)
		}
	}
	n := float64(b.N) * records
	for _, mode := range modes {
		b.ReportMetric(n/elapsed[mode].Seconds(), mode+"-rec/s")
	}
	b.ReportMetric(elapsed["at_least_once"].Seconds()/elapsed["exactly_once"].Seconds(), "eos/alos")
}

// fillKafka writes n JSON transactions to topic.
func fillKafka(b testing.TB, br *kafkatest.Broker, topic string, n int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	var first error
	for i := range n {
		card := fmt.Sprintf("card-%d", i%1000)
		v := fmt.Sprintf(`{"card":%q,"amount":%d,"country":"NL","merchant":"m-%d","i":%d}`, card, i%997, i%50, i)
		cl.Produce(ctx, &kgo.Record{Key: []byte(card), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil && first == nil {
				first = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if first != nil {
		b.Fatal(first)
	}
}

// countFromEnd starts a read_committed consumer of topic (4 partitions) at
// its current end and reports on the channel once it has seen n records (or after two
// minutes, with an error).
func countFromEnd(b testing.TB, br *kafkatest.Broker, topic string, n int) <-chan error {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	admin, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(4) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		b.Fatal(err)
	}
	start := map[int32]kgo.Offset{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				b.Fatal(err)
			}
			start[p.Partition] = kgo.NewOffset().At(p.Offset)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer cancel()
		defer cl.Close()
		seen := 0
		for seen < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				done <- fmt.Errorf("%s: %d of %d records within 2 minutes", topic, seen, n)
				return
			}
			seen += fs.NumRecords()
		}
		done <- nil
	}()
	return done
}
