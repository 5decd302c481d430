package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// openTimeout bounds how long Open waits for the cluster to
// answer (retrying with backoff meanwhile) before failing the task, which
// the job's restart strategy then retries.
const openTimeout = 30 * time.Second

// kafkaBackoff is the client's retry backoff: 200 ms doubling up to 5 s.
func kafkaBackoff(tries int) time.Duration {
	return min(100*time.Millisecond<<min(tries, 6), 5*time.Second)
}

// dialCluster returns a client for brokers with Eddy's retry backoff.
func dialCluster(brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RetryBackoffFn(kafkaBackoff),
	}, opts...)...)
}

// retryWhileUnreachable calls f until it succeeds, fails with an error that
// retrying cannot fix (permanent reports which), or ctx ends; waits grow
// from 100 ms to 2 s. The last error is returned.
func retryWhileUnreachable[T any](ctx context.Context, permanent func(error) bool, f func(context.Context) (T, error)) (T, error) {
	wait := 100 * time.Millisecond
	for {
		v, err := f(ctx)
		if err == nil || permanent(err) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// topicMeta is what metadata says of a topic.
type topicMeta struct {
	name       string
	id         [16]byte
	internal   bool
	partitions []int32
}

// describeTopics asks for topics (every topic when topics is nil),
// retrying while no broker answers until ctx ends; an unknown topic fails
// at once with ErrUnknownTopic.
func describeTopics(ctx context.Context, cl *kgo.Client, brokers, topics []string) ([]topicMeta, error) {
	isUnknown := func(err error) bool { return errors.Is(err, ErrUnknownTopic) }
	return retryWhileUnreachable(ctx, isUnknown, func(ctx context.Context) ([]topicMeta, error) {
		req := kmsg.NewPtrMetadataRequest()
		if topics != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("metadata from %v: %w", brokers, err)
		}
		var out []topicMeta
		for _, t := range resp.Topics {
			m := topicMeta{id: t.TopicID, internal: t.IsInternal}
			if t.Topic != nil {
				m.name = *t.Topic
			}
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("%w %q", ErrUnknownTopic, m.name)
				}
				return nil, fmt.Errorf("topic %q: %w", m.name, err)
			}
			for _, p := range t.Partitions {
				m.partitions = append(m.partitions, p.Partition)
			}
			out = append(out, m)
		}
		return out, nil
	})
}
