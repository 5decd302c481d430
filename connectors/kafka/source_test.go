package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-stream/eddy/connectors/kafka"
	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

var baseTime = time.UnixMilli(1767225600000) // 2026-01-01T00:00:00Z

// produce writes n records to topic: record i has key k<i>, value v<i>,
// header h=<i>, timestamp baseTime+i ms, partition i%partitions.
func produce(t *testing.T, brokers []string, topic string, partitions, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{
			Topic:     topic,
			Partition: int32(i % partitions),
			Key:       fmt.Appendf(nil, "k%d", i),
			Value:     fmt.Appendf(nil, "v%d", i),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}},
			Timestamp: baseTime.Add(time.Duration(i) * time.Millisecond),
		})
	}
	produceRecords(t, brokers, recs)
}

// produceJSON writes records {"i":<i>} for i in [from, from+n) to topic,
// partition i%partitions.
func produceJSON(t *testing.T, brokers []string, topic string, partitions, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	produceRecords(t, brokers, recs)
}

// produceRecords writes recs to the partitions they name, waiting for
// every acknowledgement.
func produceRecords(t *testing.T, brokers []string, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func open(t *testing.T, brokers []string, topics []string, start string, subtask, par int) *kafka.Source {
	t.Helper()
	src, err := kafka.NewSource(kafka.SourceConfig{Brokers: brokers, Topics: topics, Start: start, MetadataTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), stream.TaskInfo{Subtask: subtask, Parallelism: par}); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// read calls Next until n records arrived (max per call), then checks that
// nothing more arrives for a moment.
func read(t *testing.T, src *kafka.Source, n, max int) []stream.Record {
	t.Helper()
	var out []stream.Record
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records, want %d", len(out), n)
		}
		b := stream.NewBatch(max)
		if err := src.Next(context.Background(), b, max); err != nil {
			t.Fatalf("next: %v", err)
		}
		if b.Len() > max {
			t.Fatalf("next returned %d records, max %d", b.Len(), max)
		}
		out = append(out, b.Records...)
	}
	if len(out) != n {
		t.Fatalf("read %d records, want %d", len(out), n)
	}
	return out
}

func expectNothing(t *testing.T, src *kafka.Source) {
	t.Helper()
	for range 3 {
		b := stream.NewBatch(10)
		if err := src.Next(context.Background(), b, 10); err != nil {
			t.Fatal(err)
		}
		if b.Len() > 0 {
			t.Fatalf("unexpected record %q", b.Records[0].Value)
		}
	}
}

func values(recs []stream.Record) []string {
	var vs []string
	for _, r := range recs {
		vs = append(vs, string(r.Value))
	}
	sort.Strings(vs)
	return vs
}

func seq(from, n int, keep func(int) bool) []string {
	var vs []string
	for i := from; i < from+n; i++ {
		if keep == nil || keep(i) {
			vs = append(vs, fmt.Sprintf("v%d", i))
		}
	}
	sort.Strings(vs)
	return vs
}

func TestSourceSplitsPartitionsAndMapsRecords(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Brokers: 3, Topics: map[string]int{"in": 4}})
	produce(t, br.Addrs(), "in", 4, 0, 200)
	for sub := range 2 {
		src := open(t, br.Addrs(), []string{"in"}, "", sub, 2)
		recs := read(t, src, 100, 64)
		expectNothing(t, src)
		// Partitions 0, 2 go to subtask 0; 1, 3 to subtask 1.
		if got, want := values(recs), seq(0, 200, func(i int) bool { return (i%4)%2 == sub }); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("subtask %d read %v\nwant %v", sub, got, want)
		}
		for _, r := range recs {
			var i int
			fmt.Sscanf(string(r.Value), "v%d", &i)
			if string(r.Key) != fmt.Sprintf("k%d", i) {
				t.Errorf("key %q for value %q", r.Key, r.Value)
			}
			if r.Timestamp != baseTime.UnixMilli()+int64(i) {
				t.Errorf("timestamp %d for value %q", r.Timestamp, r.Value)
			}
			if len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != fmt.Sprint(i) {
				t.Errorf("headers %v for value %q", r.Headers, r.Value)
			}
		}
	}
}

func TestSourceSeveralTopicsAndParallelismAbovePartitions(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"a": 1, "b": 2}})
	produce(t, br.Addrs(), "a", 1, 0, 10)
	produce(t, br.Addrs(), "b", 2, 10, 10)
	var all []stream.Record
	// a/0, b/0 → subtask 0; b/1 → subtask 1; subtask 2 owns nothing.
	want := []int{15, 5, 0}
	for sub := range 3 {
		src := open(t, br.Addrs(), []string{"a", "b"}, jobspec.KafkaStartEarliest, sub, 3)
		all = append(all, read(t, src, want[sub], 7)...)
		expectNothing(t, src)
	}
	if got, want := values(all), seq(0, 20, nil); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v\nwant %v", got, want)
	}
}

func TestSourcePositionRoundTrip(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 3}})
	produce(t, br.Addrs(), "in", 3, 0, 90)
	a := open(t, br.Addrs(), []string{"in"}, "", 0, 1)
	first := read(t, a, 40, 10)
	pos, err := a.Position()
	if err != nil {
		t.Fatal(err)
	}
	// Records buffered in the client but not returned must not count.
	a.Close()

	b := open(t, br.Addrs(), []string{"in"}, jobspec.KafkaStartLatest, 0, 1)
	if err := b.Seek(pos); err != nil {
		t.Fatalf("seek %s: %v", pos, err)
	}
	rest := read(t, b, 50, 10)
	expectNothing(t, b)
	if got, want := values(append(first, rest...)), seq(0, 90, nil); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v\nwant %v (position %s)", got, want, pos)
	}
	pos2, err := b.Position()
	if err != nil {
		t.Fatal(err)
	}
	if string(pos2) != `{"in":{"0":30,"1":30,"2":30}}` {
		t.Errorf("final position %s", pos2)
	}

	c := open(t, br.Addrs(), []string{"in"}, "", 0, 1)
	for _, bad := range []string{"not json", `{"in":{"x":1}}`, `{"in":{"7":1}}`, `{"other":{"0":1}}`, `{"in":{"0":-1}}`} {
		if err := c.Seek([]byte(bad)); !errors.Is(err, kafka.ErrBadPosition) {
			t.Errorf("Seek(%s) = %v, want ErrBadPosition", bad, err)
		}
	}
}

func TestSourceStartLatest(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 2}})
	produce(t, br.Addrs(), "in", 2, 0, 10)
	src := open(t, br.Addrs(), []string{"in"}, jobspec.KafkaStartLatest, 0, 1)
	pos, _ := src.Position()
	if string(pos) != `{"in":{"0":5,"1":5}}` {
		t.Errorf("latest position %s", pos)
	}
	expectNothing(t, src)
	produce(t, br.Addrs(), "in", 2, 10, 6)
	if got, want := values(read(t, src, 6, 100)), seq(10, 6, nil); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestSourceUnknownTopic(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 1}})
	src, err := kafka.NewSource(kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in", "nope"}, MetadataTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	err = src.Open(context.Background(), stream.TaskInfo{})
	if !errors.Is(err, kafka.ErrUnknownTopic) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("open = %v, want ErrUnknownTopic naming nope", err)
	}
}

func TestSourceUnreachableBrokerTimesOut(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 1}})
	addrs := br.Addrs()
	br.Stop()
	src, err := kafka.NewSource(kafka.SourceConfig{Brokers: addrs, Topics: []string{"in"}, MetadataTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	start := time.Now()
	if err := src.Open(context.Background(), stream.TaskInfo{}); err == nil {
		t.Fatal("open against a stopped broker succeeded")
	} else if d := time.Since(start); d < 900*time.Millisecond || d > 10*time.Second {
		t.Fatalf("open gave up after %v (want about the 1 s timeout): %v", d, err)
	} else {
		t.Logf("open: %v", err)
	}

	// A broker that comes up while Open retries is found.
	src2, err := kafka.NewSource(kafka.SourceConfig{Brokers: addrs, Topics: []string{"in"}, MetadataTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	opened := make(chan error, 1)
	go func() { opened <- src2.Open(context.Background(), stream.TaskInfo{}) }()
	br.AwaitDials(t, 2) // Open tried and tries again
	br.Start()
	if err := <-opened; err != nil {
		t.Fatalf("open while the broker starts: %v", err)
	}
}

func TestBrokerRestart(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 1}})
	produce(t, br.Addrs(), "in", 1, 0, 3)
	br.Stop()
	br.Start()
	// The broker keeps its data directory: the records are still there.
	produce(t, br.Addrs(), "in", 1, 3, 3)
	src := open(t, br.Addrs(), []string{"in"}, "", 0, 1)
	if got, want := values(read(t, src, 6, 10)), seq(0, 6, nil); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestKcatProducer(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (apt-get install kcat)")
	}
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 2}})
	var in strings.Builder
	for i := range 20 {
		fmt.Fprintf(&in, "k%d:v%d\n", i, i)
	}
	cmd := exec.Command(kcat, "-P", "-b", br.Bootstrap(), "-t", "in", "-K", ":", "-H", "src=kcat")
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	// kcat partitions by key hash: read all from one subtask of 1.
	recs := read(t, open(t, br.Addrs(), []string{"in"}, "", 0, 1), 20, 100)
	if got, want := values(recs), seq(0, 20, nil); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v, want %v", got, want)
	}
	for _, r := range recs {
		if "v"+strings.TrimPrefix(string(r.Key), "k") != string(r.Value) {
			t.Errorf("key %q value %q", r.Key, r.Value)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != "src" || string(r.Headers[0].Value) != "kcat" {
			t.Errorf("headers %v", r.Headers)
		}
		if r.Timestamp <= 0 {
			t.Errorf("timestamp %d", r.Timestamp)
		}
	}
}

func openCfg(t *testing.T, cfg kafka.SourceConfig, subtask, par int) *kafka.Source {
	t.Helper()
	if cfg.MetadataTimeout == 0 {
		cfg.MetadataTimeout = 10 * time.Second
	}
	src, err := kafka.NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), stream.TaskInfo{Subtask: subtask, Parallelism: par}); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func position(t *testing.T, src *kafka.Source) string {
	t.Helper()
	pos, err := src.Position()
	if err != nil {
		t.Fatal(err)
	}
	return string(pos)
}

// groupOffsets reads group's committed offsets of topic's partitions with an
// OffsetFetch, as a monitoring tool would; partitions without one are left
// out.
func groupOffsets(t *testing.T, brokers []string, group, topic string, partitions int) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	out := map[int32]int64{}
	if err := kerr.ErrorForCode(resp.ErrorCode); errors.Is(err, kerr.GroupIDNotFound) {
		return out
	} else if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("offset fetch %s/%d: %v", rt.Topic, p.Partition, err)
			}
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

func TestSourceConfigFromSpec(t *testing.T) {
	br := []string{"h:1"}
	tests := []struct {
		name string
		spec jobspec.KafkaSourceSpec
		want string // "" for valid
	}{
		{name: "topics", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}}},
		{name: "pattern", spec: jobspec.KafkaSourceSpec{Brokers: br, TopicPattern: "a.*"}},
		{name: "no brokers", spec: jobspec.KafkaSourceSpec{Topics: []string{"a"}}, want: "needs brokers"},
		{name: "topics and pattern", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, TopicPattern: "a"}, want: "topics and topic_pattern are exclusive"},
		{name: "neither", spec: jobspec.KafkaSourceSpec{Brokers: br}, want: "needs topics or topic_pattern"},
		{name: "bad pattern", spec: jobspec.KafkaSourceSpec{Brokers: br, TopicPattern: "a("}, want: "topic_pattern: "},
		{name: "timestamp", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, Start: "timestamp", StartTimestamp: "2026-01-01T00:00:00Z"}},
		{name: "timestamp in ms", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, Start: "timestamp", StartTimestamp: "1767225600000"}},
		{name: "timestamp missing", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, Start: "timestamp"}, want: "needs start_timestamp"},
		{name: "timestamp bad", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, Start: "timestamp", StartTimestamp: "yesterday"}, want: "neither RFC 3339 nor milliseconds"},
		{name: "timestamp without start", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, StartTimestamp: "1"}, want: "start_timestamp needs start: timestamp"},
		{name: "group", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, Start: "group", Group: "g"}},
		{name: "group missing", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, Start: "group"}, want: "start: group needs a group"},
		{name: "bad start", spec: jobspec.KafkaSourceSpec{Brokers: br, Topics: []string{"a"}, Start: "now"}, want: `start "now" (want earliest, latest, timestamp or group)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := kafka.ConfigFromSpec(&tc.spec)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("ConfigFromSpec: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("ConfigFromSpec = %v, want an error containing %q", err, tc.want)
			}
			if tc.name == "timestamp" && cfg.StartMillis != baseTime.UnixMilli() {
				t.Errorf("StartMillis %d, want %d", cfg.StartMillis, baseTime.UnixMilli())
			}
		})
	}
}

func TestSourceTopicPattern(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{
		"orders.eu": 1, "orders.us": 2, "orders": 1, "xorders.eu": 1, "__orders.internal": 1,
	}})
	for i, topic := range []string{"orders.eu", "orders.us", "orders", "xorders.eu", "__orders.internal"} {
		produce(t, br.Addrs(), topic, 1, i*10, 2)
	}
	tests := []struct {
		pattern string
		want    []string
		pos     string
	}{
		// Whole names only: not xorders.eu, not orders.
		{`orders\.(eu|us)`, []string{"v0", "v1", "v10", "v11"}, `{"orders.eu":{"0":2},"orders.us":{"0":2,"1":0}}`},
		// Internal topics (__…) are never matched.
		{`.*orders.*`, []string{"v0", "v1", "v10", "v11", "v20", "v21", "v30", "v31"}, `{"orders":{"0":2},"orders.eu":{"0":2},"orders.us":{"0":2,"1":0},"xorders.eu":{"0":2}}`},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			src := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), TopicPattern: tc.pattern}, 0, 1)
			recs := read(t, src, len(tc.want), 100)
			expectNothing(t, src)
			if got := values(recs); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("read %v, want %v", got, tc.want)
			}
			if got := position(t, src); got != tc.pos {
				t.Errorf("position %s, want %s", got, tc.pos)
			}
		})
	}

	src, err := kafka.NewSource(kafka.SourceConfig{Brokers: br.Addrs(), TopicPattern: "order", MetadataTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	err = src.Open(context.Background(), stream.TaskInfo{})
	if !errors.Is(err, kafka.ErrUnknownTopic) || err.Error() != `kafka source: no topic matches pattern "order"` {
		t.Fatalf("open = %v, want ErrUnknownTopic: no topic matches", err)
	}
}

func TestSourceStartTimestamp(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 2}})
	// Record i at baseTime+i ms, in one batch per partition: kfake
	// answers a ListOffsets by timestamp with the start of the batch that
	// holds the record (Kafka: the record's offset), and the source skips
	// the records before it.
	produce(t, br.Addrs(), "in", 2, 0, 20)
	src := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, Start: jobspec.KafkaStartTimestamp, StartMillis: baseTime.UnixMilli() + 13}, 0, 1)
	if got, want := values(read(t, src, 7, 100)), seq(13, 7, nil); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v, want %v", got, want)
	}
	expectNothing(t, src)

	// After every record: each partition starts at its end.
	late := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, Start: jobspec.KafkaStartTimestamp, StartMillis: baseTime.UnixMilli() + 1000}, 0, 1)
	if got := position(t, late); got != `{"in":{"0":10,"1":10}}` {
		t.Fatalf("position %s, want the ends", got)
	}
	produce(t, br.Addrs(), "in", 2, 20, 4)
	if got, want := values(read(t, late, 4, 100)), seq(20, 4, nil); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// TestSourceGroupCommitAndStart: a source with a group commits the
// position of the checkpoint that completed (not its current one, nor a
// later checkpoint's), and a source starting from the group continues
// there; partitions the group has no offset for start at the earliest.
func TestSourceGroupCommitAndStart(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 3}})
	produce(t, br.Addrs(), "in", 3, 0, 30)
	// Subtask 0 of 2 owns partitions 0 and 2.
	cfg := kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, Group: "g"}
	src := openCfg(t, cfg, 0, 2)
	read(t, src, 20, 100)
	pos1, _ := src.Position()
	src.CheckpointTaken(1, pos1)
	produce(t, br.Addrs(), "in", 3, 30, 6)
	read(t, src, 4, 100)
	pos2, _ := src.Position()
	src.CheckpointTaken(2, pos2)
	if string(pos1) != `{"in":{"0":10,"2":10}}` || string(pos2) != `{"in":{"0":12,"2":12}}` {
		t.Fatalf("positions %s, %s", pos1, pos2)
	}

	if got := groupOffsets(t, br.Addrs(), "g", "in", 3); len(got) != 0 {
		t.Fatalf("committed %v before any checkpoint completed", got)
	}
	if err := src.CheckpointCompleted(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(groupOffsets(t, br.Addrs(), "g", "in", 3)); got != "map[0:10 2:10]" {
		t.Fatalf("committed %s after checkpoint 1, want its offsets", got)
	}
	// Checkpoint 1 is forgotten: completing it again commits nothing.
	if err := src.CheckpointCompleted(context.Background(), 1); err != nil {
		t.Fatal(err)
	}

	// start: group, one subtask: partitions 0 and 2 from the group,
	// partition 1 (never committed) from the earliest.
	from := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, Start: jobspec.KafkaStartGroup, Group: "g"}, 0, 1)
	if got := position(t, from); got != `{"in":{"0":10,"1":0,"2":10}}` {
		t.Fatalf("start position %s", got)
	}
	want := seq(0, 36, func(i int) bool { return i%3 == 1 || i >= 30 })
	if got := values(read(t, from, len(want), 100)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v, want %v", got, want)
	}

	// A later checkpoint completing commits its own offsets; a source
	// without a group commits nothing.
	if err := src.CheckpointCompleted(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(groupOffsets(t, br.Addrs(), "g", "in", 3)); got != "map[0:12 2:12]" {
		t.Fatalf("committed %s after checkpoint 2", got)
	}
	plain := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}}, 0, 1)
	p, _ := plain.Position()
	plain.CheckpointTaken(3, p)
	if err := plain.CheckpointCompleted(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(groupOffsets(t, br.Addrs(), "g", "in", 3)); got != "map[0:12 2:12]" {
		t.Fatalf("committed %s after a source without a group completed", got)
	}
}

// addPartitions grows topic to n partitions.
func addPartitions(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, int32(n)
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10_000
	resp := adminRequest(t, brokers, req).(*kmsg.CreatePartitionsResponse)
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create partitions: %v", err)
	}
}

// createTopic creates topic with n partitions.
func createTopic(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(n), 1
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10_000
	resp := adminRequest(t, brokers, req).(*kmsg.CreateTopicsResponse)
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic: %v", err)
	}
}

// adminRequest sends req with a client of its own, within 10 s.
func adminRequest(t *testing.T, brokers []string, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

// TestSourceDiscovery: partitions added to a topic, and topics created
// that topic_pattern matches, are read from their start once discovered,
// by the subtask that owns them (partition mod parallelism); a restored
// position that does not name a partition starts it at its earliest too.
func TestSourceDiscovery(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 2}})
	produce(t, br.Addrs(), "in", 2, 0, 10)
	cfg := kafka.SourceConfig{Brokers: br.Addrs(), TopicPattern: "in.*", Start: jobspec.KafkaStartLatest, DiscoveryInterval: 200 * time.Millisecond}
	sub0 := openCfg(t, cfg, 0, 2) // partitions 0, 2 of each topic
	sub1 := openCfg(t, cfg, 1, 2) // partitions 1, 3
	expectNothing(t, sub0)
	pos0 := position(t, sub0)

	addPartitions(t, br.Addrs(), "in", 4)
	produce(t, br.Addrs(), "in", 4, 100, 8) // partition i%4: 100, 104 go to 0; 102, 106 to 2
	if got, want := values(read(t, sub0, 4, 100)), []string{"v100", "v102", "v104", "v106"}; !sameSet(got, want) {
		t.Fatalf("subtask 0 read %v, want %v", got, want)
	}
	if got, want := values(read(t, sub1, 4, 100)), []string{"v101", "v103", "v105", "v107"}; !sameSet(got, want) {
		t.Fatalf("subtask 1 read %v, want %v", got, want)
	}
	if n, _ := sub0.Splits(); n != 2 {
		t.Fatalf("subtask 0 has %d splits, want 2", n)
	}

	createTopic(t, br.Addrs(), "in-2", 1)
	produce(t, br.Addrs(), "in-2", 1, 200, 3)
	if got, want := values(read(t, sub0, 3, 100)), seq(200, 3, nil); !sameSet(got, want) {
		t.Fatalf("subtask 0 read %v from the new topic, want %v", got, want)
	}
	if got := position(t, sub0); got != `{"in":{"0":7,"2":2},"in-2":{"0":3}}` {
		t.Fatalf("position %s", got)
	}

	// Restoring the position taken before the partitions were added:
	// partition 2 and in-2 start at their earliest, partition 0 where it
	// was, though start is latest.
	again := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), TopicPattern: "in.*", Start: jobspec.KafkaStartLatest}, 0, 2)
	if err := again.Seek([]byte(pos0)); err != nil {
		t.Fatal(err)
	}
	want := []string{"v100", "v102", "v104", "v106", "v200", "v201", "v202"}
	if got := values(read(t, again, len(want), 100)); !sameSet(got, want) {
		t.Fatalf("restored source read %v, want %v", got, want)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestSourceIsolation: by default the source reads committed records
// only (an aborted transaction's are skipped, and a partition is read up
// to a transaction still open, until it commits); read_uncommitted reads
// everything written.
func TestSourceIsolation(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	tx, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.DefaultProduceTopic("in"), kgo.TransactionalID("isolation-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	// end is "commit", "abort" or "" (leave it open).
	inTxn := func(end string, vals ...string) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := tx.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if end != "" {
			if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(end == "commit")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := plain.ProduceSync(ctx, kgo.StringRecord("plain")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inTxn("commit", "committed")
	inTxn("abort", "aborted")
	inTxn("", "open") // left open for now

	committedOnly := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}}, 0, 1)
	if got := values(read(t, committedOnly, 2, 100)); strings.Join(got, ",") != "committed,plain" {
		t.Fatalf("read_committed read %v, want [plain committed]", got)
	}
	expectNothing(t, committedOnly) // held at the open transaction
	all := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, ReadUncommitted: true}, 0, 1)
	if got := values(read(t, all, 4, 100)); strings.Join(got, ",") != "aborted,committed,open,plain" {
		t.Fatalf("read_uncommitted read %v", got)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := values(read(t, committedOnly, 1, 100)); strings.Join(got, ",") != "open" {
		t.Fatalf("after the commit, read_committed read %v, want [open]", got)
	}
	// Latest, read committed, is the last stable offset: a source
	// starting there misses nothing of a transaction open before.
	inTxn("", "late")
	latest := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, Start: jobspec.KafkaStartLatest}, 0, 1)
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := values(read(t, latest, 1, 100)); strings.Join(got, ",") != "late" {
		t.Fatalf("a source starting at latest during a transaction read %v, want [late]", got)
	}
}

// TestSourcePendingRecords: the records between the position and the end
// of the partitions, known from Open on, shrinking as the source reads.
func TestSourcePendingRecords(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 3}})
	produce(t, br.Addrs(), "in", 3, 0, 30)
	src := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}}, 0, 1)
	pending := func() int64 {
		t.Helper()
		n, ok := src.PendingRecords()
		if !ok {
			t.Fatal("pending records unknown")
		}
		return n
	}
	if n := pending(); n != 30 {
		t.Fatalf("pending %d after Open, want 30", n)
	}
	read(t, src, 10, 10)
	if n := pending(); n != 20 {
		t.Fatalf("pending %d after reading 10, want 20", n)
	}
	read(t, src, 20, 100)
	if n := pending(); n != 0 {
		t.Fatalf("pending %d after reading everything, want 0", n)
	}
	latest := openCfg(t, kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, Start: jobspec.KafkaStartLatest}, 0, 1)
	if n, ok := latest.PendingRecords(); !ok || n != 0 {
		t.Fatalf("a source at latest: pending %d (known %v), want 0", n, ok)
	}
}

// readToEnd calls Next until it returns io.EOF, failing after 20 s.
func readToEnd(t *testing.T, src *kafka.Source) []stream.Record {
	t.Helper()
	var out []stream.Record
	deadline := time.Now().Add(20 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no end after %d records", len(out))
		}
		b := stream.NewBatch(100)
		err := src.Next(context.Background(), b, 100)
		out = append(out, b.Records...)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
	}
}

// TestSourceStopAtLatest: a bounded source ends at the end offsets its
// partitions had when it opened (records written later are not read),
// also when the last thing before the end is a transaction marker; a
// restored position keeps the stop offsets of the first run.
func TestSourceStopAtLatest(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"in": 2}})
	produce(t, br.Addrs(), "in", 2, 0, 10)
	// A committed transaction ends partition 0's log with a marker.
	tx, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.TransactionalID("bounded-test"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx := context.Background()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("v-tx")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	cfg := kafka.SourceConfig{Brokers: br.Addrs(), Topics: []string{"in"}, StopAtLatest: true}
	src := openCfg(t, cfg, 0, 1)
	again := openCfg(t, cfg, 0, 1)
	// After the stop, not read; in partition 1 only, so that nothing
	// but the marker follows partition 0's last record.
	late, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	for i := range 4 {
		if err := late.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: 1, Value: fmt.Appendf(nil, "late-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want := append(seq(0, 10, nil), "v-tx")
	slices.Sort(want)
	if got := values(readToEnd(t, src)); !slices.Equal(got, want) {
		t.Fatalf("bounded source read %v, want %v", got, want)
	}
	if n, ok := src.PendingRecords(); !ok || n != 0 {
		t.Fatalf("pending %d (known %v) at the end, want 0", n, ok)
	}

	// Restore from a position taken after 4 records: the stop offsets
	// come from it, not from the partitions' ends now.
	first := read(t, again, 4, 4)
	pos := position(t, again)
	restored := openCfg(t, cfg, 0, 1)
	if err := restored.Seek([]byte(pos)); err != nil {
		t.Fatal(err)
	}
	rest := readToEnd(t, restored)
	if got := values(append(first, rest...)); !slices.Equal(got, want) {
		t.Fatalf("restored bounded source read %v, want %v (position %s)", got, want, pos)
	}
}
