package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offsets are one partition's offsets, as Broker.Offsets reads them.
type Offsets struct {
	// HighWatermark is the offset after the partition's last record.
	HighWatermark int64
	// LastStable is where read_committed readers end: the first record
	// of the oldest transaction still open, HighWatermark when none is.
	LastStable int64
	// Committed is the group's committed offset, -1 without one.
	Committed int64
}

// Offsets returns the offsets of every partition of topic and, unless
// group is "", the group's committed offsets, by partition: what a test
// waits on where a job's progress shows only in Kafka (every record read
// and committed by a source's group, no transaction left open by a sink).
// It talks to a broker without SASL or TLS only.
func (b *Broker) Offsets(t testing.TB, topic, group string) map[int32]Offsets {
	t.Helper()
	if b.opts.SASL != nil || b.opts.TLS {
		t.Fatal("kafkatest: Offsets: the broker has SASL or TLS")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fail := func(what string, err error) { t.Fatalf("kafkatest: %s of %s: %v", what, topic, err) }

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err == nil && len(mresp.Topics) != 1 {
		err = errors.New("no such topic in the answer")
	}
	if err == nil {
		err = kerr.ErrorForCode(mresp.Topics[0].ErrorCode)
	}
	if err != nil {
		fail("metadata", err)
	}
	out := map[int32]Offsets{}
	for _, p := range mresp.Topics[0].Partitions {
		out[p.Partition] = Offsets{Committed: -1}
	}

	// The end offset for read_uncommitted is the high watermark, for
	// read_committed the last stable offset.
	for _, level := range []int8{0, 1} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = level
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := range out {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rp.Timestamp = -1 // the end
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			fail("end offsets", err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					fail("end offsets", err)
				}
				o := out[rp.Partition]
				if level == 0 {
					o.HighWatermark = rp.Offset
				} else {
					o.LastStable = rp.Offset
				}
				out[rp.Partition] = o
			}
		}
	}

	if group == "" {
		return out
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range out {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out // a group that never committed
	}
	if err != nil {
		fail("offsets of group "+group, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				fail("offsets of group "+group, err)
			}
			if o, ok := out[rp.Partition]; ok && rp.Offset >= 0 {
				o.Committed = rp.Offset
				out[rp.Partition] = o
			}
		}
	}
	return out
}
