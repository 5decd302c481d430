// Package kafka holds Eddy's Kafka connectors, built on franz-go.
package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// ErrBadPosition marks a position given to Seek that Position did not write.
var ErrBadPosition = errors.New("kafka: bad source position")

// ErrUnknownTopic is returned by Open for a topic the cluster does not have.
var ErrUnknownTopic = errors.New("kafka: unknown topic")

// pollWait bounds how long Next waits for records, so that the task can
// handle checkpoint barriers between batches of an idle topic.
const pollWait = 100 * time.Millisecond

// SourceConfig configures a Source.
type SourceConfig struct {
	Brokers []string
	Topics  []string
	// Start is jobspec.KafkaStartEarliest ("" too) or KafkaStartLatest.
	Start string
	// MetadataTimeout bounds Open's metadata and offset requests; 0 means 30 s.
	MetadataTimeout time.Duration
}

// ConfigFromSpec checks spec and turns it into a SourceConfig.
func ConfigFromSpec(spec *jobspec.KafkaSourceSpec) (SourceConfig, error) {
	if spec == nil {
		return SourceConfig{}, errors.New("kafka: no spec")
	}
	c := SourceConfig{Brokers: spec.Brokers, Topics: spec.Topics, Start: spec.Start}
	return c, c.check()
}

func (c SourceConfig) check() error {
	if len(c.Brokers) == 0 {
		return errors.New("brokers is empty")
	}
	if len(c.Topics) == 0 {
		return errors.New("topics is empty")
	}
	for _, t := range c.Topics {
		if t == "" {
			return errors.New("empty topic name")
		}
	}
	switch c.Start {
	case "", jobspec.KafkaStartEarliest, jobspec.KafkaStartLatest:
	default:
		return fmt.Errorf("unknown start %q (want %q or %q)", c.Start, jobspec.KafkaStartEarliest, jobspec.KafkaStartLatest)
	}
	return nil
}

// Source is one parallel instance of a Kafka source. It implements
// dataflow.Source and dataflow.Checkpointed: its position is the next
// offset of each partition it owns.
type Source struct {
	cfg    SourceConfig
	client *kgo.Client
	// next is the offset of the next record to return, per owned partition.
	next    map[tp]int64
	started bool
}

type tp struct {
	topic     string
	partition int32
}

// NewSource returns a source for cfg; it connects in Open.
func NewSource(cfg SourceConfig) (*Source, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg}, nil
}

var (
	_ dataflow.Source       = (*Source)(nil)
	_ dataflow.Checkpointed = (*Source)(nil)
)

// Open connects, finds the partitions this subtask owns and resolves the
// start offsets.
func (s *Source) Open(ctx context.Context, info dataflow.TaskInfo) error {
	subtask, par := info.Subtask, info.Parallelism
	if par == 0 {
		par = 1
	}
	if par < 0 || subtask < 0 || subtask >= par {
		return fmt.Errorf("kafka source: subtask %d of parallelism %d is out of range", info.Subtask, info.Parallelism)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			d := 100 * time.Millisecond << min(tries, 6)
			return min(d, 5*time.Second)
		}),
	)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	s.client = cl
	timeout := s.cfg.MetadataTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	parts, err := s.partitions(mctx)
	if err != nil {
		return err
	}
	var owned []tp
	for _, p := range parts {
		if int(p.partition)%par == subtask {
			owned = append(owned, p)
		}
	}
	s.next, err = s.listOffsets(mctx, owned)
	return err
}

// partitions asks for the topics' partitions, retrying with backoff while
// no broker answers (until ctx ends); an unknown topic fails at once.
func (s *Source) partitions(ctx context.Context) ([]tp, error) {
	backoff := 100 * time.Millisecond
	for {
		parts, err := s.partitionsOnce(ctx)
		if err == nil || errors.Is(err, ErrUnknownTopic) || ctx.Err() != nil {
			return parts, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (s *Source) partitionsOnce(ctx context.Context) ([]tp, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.cfg.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.client)
	if err != nil {
		return nil, fmt.Errorf("kafka source: metadata from %v: %w", s.cfg.Brokers, err)
	}
	var out []tp
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("kafka source: %w %q", ErrUnknownTopic, name)
			}
			return nil, fmt.Errorf("kafka source: topic %q: %w", name, err)
		}
		for _, p := range t.Partitions {
			out = append(out, tp{name, p.Partition})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out, nil
}

func (s *Source) listOffsets(ctx context.Context, parts []tp) (map[tp]int64, error) {
	next := make(map[tp]int64, len(parts))
	if len(parts) == 0 {
		return next, nil
	}
	ts := int64(-2) // earliest
	if s.cfg.Start == jobspec.KafkaStartLatest {
		ts = -1
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, p := range parts {
		i, ok := byTopic[p.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p.partition
		rp.Timestamp = ts
		rp.CurrentLeaderEpoch = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	// The client splits the request by partition leader.
	shards := s.client.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("kafka source: list offsets: %w", sh.Err)
		}
		resp := sh.Resp.(*kmsg.ListOffsetsResponse)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("kafka source: list offsets %s/%d: %w", t.Topic, p.Partition, err)
				}
				next[tp{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	for _, p := range parts {
		if _, ok := next[p]; !ok {
			return nil, fmt.Errorf("kafka source: no offset for %s/%d", p.topic, p.partition)
		}
	}
	return next, nil
}

// Next appends up to max records. It waits at most pollWait for records
// and may return none.
func (s *Source) Next(ctx context.Context, b *dataflow.Batch, max int) error {
	if s.client == nil {
		return errors.New("kafka source: not open")
	}
	if len(s.next) == 0 {
		// No partition for this subtask: idle, but not finished (the
		// topic may gain partitions; this source does not follow them).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollWait):
			return nil
		}
	}
	if !s.started {
		s.started = true
		m := map[string]map[int32]kgo.Offset{}
		for p, off := range s.next {
			if m[p.topic] == nil {
				m[p.topic] = map[int32]kgo.Offset{}
			}
			m[p.topic][p.partition] = kgo.NewOffset().At(off)
		}
		s.client.AddConsumePartitions(m)
	}
	pctx, cancel := context.WithTimeout(ctx, pollWait)
	defer cancel()
	fs := s.client.PollRecords(pctx, max)
	if fs.IsClientClosed() {
		return errors.New("kafka source: client closed")
	}
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		// Retriable errors are retried inside the client; what reaches
		// here (an authorization failure, a data loss) is fatal.
		return fmt.Errorf("kafka source: fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
	}
	fs.EachRecord(func(r *kgo.Record) {
		rec := dataflow.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli()}
		if len(r.Headers) > 0 {
			rec.Headers = make([]dataflow.Header, len(r.Headers))
			for i, h := range r.Headers {
				rec.Headers[i] = dataflow.Header{Key: h.Key, Value: h.Value}
			}
		}
		b.AddRecord(&rec)
		s.next[tp{r.Topic, r.Partition}] = r.Offset + 1
	})
	return nil
}

// position is the JSON form: topic → partition (decimal) → next offset.
type position map[string]map[string]int64

// Position returns the next offset of every owned partition.
func (s *Source) Position() ([]byte, error) {
	pos := position{}
	for p, off := range s.next {
		if pos[p.topic] == nil {
			pos[p.topic] = map[string]int64{}
		}
		pos[p.topic][strconv.Itoa(int(p.partition))] = off
	}
	return json.Marshal(pos)
}

// Seek restores offsets written by Position. Partitions this subtask owns
// that pos does not name (added since) keep their start offsets.
func (s *Source) Seek(raw []byte) error {
	if s.started {
		return errors.New("kafka source: Seek after Next")
	}
	var pos position
	if err := json.Unmarshal(raw, &pos); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPosition, err)
	}
	for topic, parts := range pos {
		for ps, off := range parts {
			n, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || n < 0 || off < 0 {
				return fmt.Errorf("%w: partition %q offset %d", ErrBadPosition, ps, off)
			}
			k := tp{topic, int32(n)}
			if _, ok := s.next[k]; !ok {
				return fmt.Errorf("%w: %s/%d is not a partition of this subtask", ErrBadPosition, topic, n)
			}
			s.next[k] = off
		}
	}
	return nil
}

// Close closes the client.
func (s *Source) Close() error {
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	return nil
}
