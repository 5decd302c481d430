// Package kafka holds Eddy's Kafka connectors, built on franz-go.
package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// ErrBadPosition marks a position given to Seek that Position did not write.
var ErrBadPosition = errors.New("kafka: bad source position")

// ErrUnknownTopic is returned by Open for a topic the cluster does not have.
var ErrUnknownTopic = errors.New("kafka: unknown topic")

// pollWait bounds how long Next waits for records, so that the task can
// handle checkpoint barriers between batches of an idle topic.
const pollWait = 100 * time.Millisecond

// commitTimeout bounds the commit of a completed checkpoint's offsets,
// which the task waits for between two batches.
const commitTimeout = 10 * time.Second

// maxTaken bounds the positions kept for checkpoints that have not
// completed yet (some never do).
const maxTaken = 32

// SourceConfig configures a Source. ConfigFromSpec fills it from a job
// spec; its rules are the spec's (jobspec.KafkaSourceSpec).
type SourceConfig struct {
	Brokers []string
	// Topics names the topics; TopicPattern instead is an RE2 expression
	// that whole topic names match, resolved once, at Open. Exactly one
	// of the two is set.
	Topics       []string
	TopicPattern string
	// Start is jobspec.KafkaStartEarliest ("" too), KafkaStartLatest,
	// KafkaStartTimestamp (the first record at or after StartMillis;
	// partitions with none start at their end) or KafkaStartGroup
	// (Group's committed offsets; partitions without one start at the
	// earliest). It applies when the task does not restore a checkpoint.
	Start string
	// StartMillis is the time, in ms since the epoch, of start: timestamp.
	StartMillis int64
	// Group, when set, is the consumer group the offsets of every
	// completed checkpoint are committed to (as a simple commit: the
	// source never joins the group).
	Group string
	// MetadataTimeout bounds Open's metadata and offset requests; 0 means 30 s.
	MetadataTimeout time.Duration
	// DiscoveryInterval is how often Next looks for new partitions (and
	// new topics matching TopicPattern); 0 never does.
	DiscoveryInterval time.Duration
	// ReadUncommitted reads the records of aborted and open transactions
	// too; by default the source reads committed records only.
	ReadUncommitted bool
	Security        Security
	// StopAtLatest makes the source bounded: it ends at the end offsets
	// its partitions have at the first Open (a restore keeps them).
	StopAtLatest bool
}

// defaultDiscoveryInterval is the spec's default discovery_interval.
const defaultDiscoveryInterval = 30 * time.Second

// ConfigFromSpec checks spec and turns it into a SourceConfig.
func ConfigFromSpec(spec *jobspec.KafkaSourceSpec) (SourceConfig, error) {
	if spec == nil {
		return SourceConfig{}, errors.New("kafka: no spec")
	}
	c := SourceConfig{Brokers: spec.Brokers, Topics: spec.Topics, TopicPattern: spec.TopicPattern, Start: spec.Start, Group: spec.Group,
		DiscoveryInterval: defaultDiscoveryInterval, ReadUncommitted: spec.Isolation == jobspec.KafkaReadUncommitted,
		Security: Security{SASL: spec.SASL, TLS: spec.TLS}, StopAtLatest: spec.StopAt == jobspec.KafkaStopAtLatest}
	if c.StopAtLatest {
		c.DiscoveryInterval = 0 // a bounded source reads the partitions it starts with
	}
	if d := spec.DiscoveryInterval; d != nil {
		c.DiscoveryInterval = d.D()
	}
	if err := spec.Check(); err != nil {
		return c, err
	}
	if spec.Start == jobspec.KafkaStartTimestamp {
		ms, err := spec.StartMillis()
		if err != nil {
			return c, err
		}
		c.StartMillis = ms
	}
	return c, nil
}

// check applies the spec's rules (jobspec.KafkaSourceSpec.Check) to a
// config built in code.
func (c SourceConfig) check() error {
	spec := jobspec.KafkaSourceSpec{Brokers: c.Brokers, Topics: c.Topics, TopicPattern: c.TopicPattern, Start: c.Start, Group: c.Group}
	if c.Start == jobspec.KafkaStartTimestamp {
		spec.StartTimestamp = strconv.FormatInt(c.StartMillis, 10)
	}
	return spec.Check()
}

// compilePattern compiles a topic_pattern so that it matches whole names.
func compilePattern(pat string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + pat + ")$")
}

// noMatchError is Open's error when a topic_pattern matches no topic.
type noMatchError struct{ pattern string }

func (e *noMatchError) Error() string {
	return fmt.Sprintf("kafka source: no topic matches pattern %q", e.pattern)
}

func (e *noMatchError) Unwrap() error { return ErrUnknownTopic }

// Source is one parallel instance of a Kafka source. It implements
// stream.Source and stream.Checkpointed: its position is the next
// offset of each partition it owns.
//
// It is also a stream.SplitSource, each owned partition a split (so
// event time is kept per partition), and a stream.CheckpointListener
// that commits the offsets of completed checkpoints to cfg.Group.
type Source struct {
	cfg    SourceConfig
	client *kgo.Client
	// next is the offset of the next record to return, per owned partition.
	next    map[tp]int64
	started bool
	// split numbers the owned partitions in order; last is the split of
	// each record the last Next appended.
	split map[tp]int32
	last  []int32
	// topicIDs are the ids of the topics read, from metadata (OffsetCommit
	// v10 names topics by id).
	topicIDs map[string][16]byte
	// taken are the positions of the checkpoints taken and not completed
	// yet, oldest first (only with a group).
	taken []takenPosition
	// subtask of par: the partitions n with n mod par = subtask are its.
	subtask, par int
	// discovered is when the partitions were last listed.
	discovered time.Time
	// fromEarliest are partitions a restored position does not name; the
	// first Next starts them at their earliest offset.
	fromEarliest []tp
	// end is each partition's end offset (the last stable offset when
	// reading committed records) as last seen: at Open, then in fetches.
	end map[tp]int64
	// stop is where a bounded source ends each partition (nil: unbounded).
	stop map[tp]int64
	// skipBefore: start: timestamp drops a partition's records older than
	// StartMillis until its first record at or after it. Kafka's
	// ListOffsets answers that record's offset already; kfake answers the
	// start of the batch that holds it.
	skipBefore map[tp]bool
}

type takenPosition struct {
	checkpoint int64
	pos        []byte
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
	_ stream.Source             = (*Source)(nil)
	_ stream.Checkpointed       = (*Source)(nil)
	_ stream.SplitSource        = (*Source)(nil)
	_ stream.CheckpointListener = (*Source)(nil)
	_ stream.PendingReporter    = (*Source)(nil)
)

// Open connects, finds the partitions this subtask owns and resolves the
// start offsets. Partitions added later, and topics created later that
// topic_pattern matches, are found by Next every DiscoveryInterval.
func (s *Source) Open(ctx context.Context, info stream.TaskInfo) error {
	subtask, par := info.Subtask, info.Parallelism
	if par == 0 {
		par = 1
	}
	if par < 0 || subtask < 0 || subtask >= par {
		return fmt.Errorf("kafka source: subtask %d of parallelism %d is out of range", info.Subtask, info.Parallelism)
	}
	// Partitions found by discovery join the fetches once the fetch in
	// flight returns: bound its wait for records (default 5 s).
	isolation := kgo.ReadCommitted()
	if s.cfg.ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	// Control records (transaction markers) are kept so that the
	// position moves past them: a bounded source's stop offset may be
	// just after one.
	cl, err := dialCluster(s.cfg.Brokers, s.cfg.Security, kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchIsolationLevel(isolation),
		kgo.KeepControlRecords())
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	s.client = cl
	timeout := s.cfg.MetadataTimeout
	if timeout <= 0 {
		timeout = openTimeout
	}
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	parts, err := s.partitions(mctx)
	if err != nil {
		return err
	}
	s.subtask, s.par, s.discovered = subtask, par, time.Now()
	owned := s.own(parts)
	s.split = map[tp]int32{}
	for i, p := range owned {
		s.split[p] = int32(i)
	}
	if s.next, err = s.startOffsets(mctx, owned); err != nil {
		return err
	}
	s.end = map[tp]int64{}
	s.learnEnds(mctx, owned)
	if s.cfg.StopAtLatest {
		// Seek replaces these with the checkpoint's when restoring.
		if s.stop, err = s.listOffsets(mctx, owned, -1); err != nil {
			return err
		}
	}
	return nil
}

// finished reports a bounded source that reached every stop offset, and
// pauses the partitions it is done with.
func (s *Source) finished() bool {
	if s.stop == nil {
		return false
	}
	done := true
	pause := map[string][]int32{}
	for p, stop := range s.stop {
		if s.next[p] < stop {
			done = false
		} else if s.started {
			pause[p.topic] = append(pause[p.topic], p.partition)
		}
	}
	if len(pause) > 0 {
		s.client.PauseFetchPartitions(pause)
	}
	return done
}

// learnEnds asks for the end offsets of parts, for PendingRecords; a
// failure leaves them unknown until a fetch tells.
func (s *Source) learnEnds(ctx context.Context, parts []tp) {
	if ends, err := s.listOffsets(ctx, parts, -1); err == nil {
		maps.Copy(s.end, ends)
	}
}

// PendingRecords implements stream.PendingReporter: the records between
// the position and the end of each partition, summed, once every
// partition's end is known.
func (s *Source) PendingRecords() (int64, bool) {
	var n int64
	for p, next := range s.next {
		end, ok := s.end[p]
		if stop, bounded := s.stop[p]; bounded {
			end, ok = stop, true
		}
		if !ok {
			return 0, false
		}
		n += max(0, end-next)
	}
	return n, true
}

// own returns the partitions of parts this subtask reads that it does not
// read yet.
func (s *Source) own(parts []tp) []tp {
	var out []tp
	for _, p := range parts {
		if _, known := s.split[p]; !known && int(p.partition)%s.par == s.subtask {
			out = append(out, p)
		}
	}
	return out
}

// discover lists the partitions again and starts reading the new ones of
// this subtask at their earliest offset, as new splits. A failure (the
// cluster unreachable, a topic deleted) waits for the next interval:
// reading the known partitions goes on meanwhile.
func (s *Source) discover(ctx context.Context) {
	s.discovered = time.Now()
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	parts, err := s.partitions(dctx)
	if err != nil {
		return
	}
	added := s.own(parts)
	if len(added) == 0 {
		return
	}
	offs, err := s.listOffsets(dctx, added, -2)
	if err != nil {
		return
	}
	m := map[string]map[int32]kgo.Offset{}
	s.learnEnds(dctx, added)
	for _, p := range added {
		s.split[p] = int32(len(s.split))
		s.next[p] = offs[p]
		if m[p.topic] == nil {
			m[p.topic] = map[int32]kgo.Offset{}
		}
		m[p.topic][p.partition] = kgo.NewOffset().At(offs[p])
	}
	if s.started {
		s.client.AddConsumePartitions(m)
	}
}

// startOffsets resolves where each owned partition starts, by cfg.Start.
func (s *Source) startOffsets(ctx context.Context, parts []tp) (map[tp]int64, error) {
	switch s.cfg.Start {
	case jobspec.KafkaStartLatest:
		return s.listOffsets(ctx, parts, -1)
	case jobspec.KafkaStartTimestamp:
		next, err := s.listOffsets(ctx, parts, s.cfg.StartMillis)
		if err != nil {
			return nil, err
		}
		s.skipBefore = map[tp]bool{}
		for p, off := range next {
			s.skipBefore[p] = off >= 0
		}
		return s.fillMissing(ctx, next, parts, -1) // no record at or after it
	case jobspec.KafkaStartGroup:
		next, err := s.fetchCommitted(ctx, parts)
		if err != nil {
			return nil, err
		}
		return s.fillMissing(ctx, next, parts, -2) // nothing committed
	default:
		return s.listOffsets(ctx, parts, -2)
	}
}

// fillMissing sets the partitions whose offset in next is negative to
// the offset at special timestamp ts (-1 latest, -2 earliest).
func (s *Source) fillMissing(ctx context.Context, next map[tp]int64, parts []tp, ts int64) (map[tp]int64, error) {
	var missing []tp
	for _, p := range parts {
		if next[p] < 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return next, nil
	}
	more, err := s.listOffsets(ctx, missing, ts)
	if err != nil {
		return nil, err
	}
	for p, off := range more {
		next[p] = off
	}
	return next, nil
}

// fetchCommitted returns the group's committed offset of each partition,
// -1 where it has none. The client sends the request to the group's
// coordinator.
func (s *Source) fetchCommitted(ctx context.Context, parts []tp) (map[tp]int64, error) {
	next := make(map[tp]int64, len(parts))
	for _, p := range parts {
		next[p] = -1
	}
	if len(parts) == 0 {
		return next, nil
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = s.cfg.Group
	for _, g := range groupByTopic(parts) {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = g.topic, g.partitions
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.client)
	if err != nil {
		return nil, fmt.Errorf("kafka source: offsets of group %q: %w", s.cfg.Group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return next, nil // a group that never committed
		}
		return nil, fmt.Errorf("kafka source: offsets of group %q: %w", s.cfg.Group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("kafka source: offset of group %q for %s/%d: %w", s.cfg.Group, t.Topic, p.Partition, err)
			}
			k := tp{t.Topic, p.Partition}
			if _, ok := next[k]; ok {
				next[k] = p.Offset
			}
		}
	}
	return next, nil
}

// topicParts is the partitions of one topic in a request.
type topicParts struct {
	topic      string
	partitions []int32
}

// groupByTopic groups parts by topic, topics and partitions sorted.
func groupByTopic(parts []tp) []topicParts {
	sorted := slices.Clone(parts)
	sortParts(sorted)
	var out []topicParts
	for _, p := range sorted {
		if len(out) == 0 || out[len(out)-1].topic != p.topic {
			out = append(out, topicParts{topic: p.topic})
		}
		g := &out[len(out)-1]
		g.partitions = append(g.partitions, p.partition)
	}
	return out
}

func sortParts(parts []tp) {
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].topic != parts[j].topic {
			return parts[i].topic < parts[j].topic
		}
		return parts[i].partition < parts[j].partition
	})
}

// partitions asks for the partitions of the configured topics, or of
// every topic the pattern matches, retrying with backoff while no broker
// answers (until ctx ends); an unknown topic fails at once.
func (s *Source) partitions(ctx context.Context) ([]tp, error) {
	var pattern *regexp.Regexp
	if s.cfg.TopicPattern != "" {
		var err error
		if pattern, err = compilePattern(s.cfg.TopicPattern); err != nil {
			return nil, fmt.Errorf("kafka source: topic_pattern: %w", err) // checked in NewSource
		}
	}
	topics, err := describeTopics(ctx, s.client, s.cfg.Brokers, s.cfg.Topics)
	if err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	var out []tp
	s.topicIDs = map[string][16]byte{}
	for _, t := range topics {
		if pattern != nil && (t.internal || strings.HasPrefix(t.name, "__") || !pattern.MatchString(t.name)) {
			continue
		}
		s.topicIDs[t.name] = t.id
		for _, p := range t.partitions {
			out = append(out, tp{t.name, p})
		}
	}
	if pattern != nil && len(s.topicIDs) == 0 {
		return nil, &noMatchError{s.cfg.TopicPattern}
	}
	sortParts(out)
	return out, nil
}

// listOffsets asks for the offset of each partition at ts: ms since the
// epoch (the first record at or after it; -1 when there is none), or -1
// for the end, -2 for the start.
func (s *Source) listOffsets(ctx context.Context, parts []tp, ts int64) (map[tp]int64, error) {
	next := make(map[tp]int64, len(parts))
	if len(parts) == 0 {
		return next, nil
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if !s.cfg.ReadUncommitted {
		req.IsolationLevel = 1 // "latest" is the last stable offset
	}
	for _, g := range groupByTopic(parts) {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = g.topic
		for _, p := range g.partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
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
func (s *Source) Next(ctx context.Context, b *stream.Batch, maxRecords int) error {
	if s.client == nil {
		return errors.New("kafka source: not open")
	}
	s.last = s.last[:0]
	if s.cfg.DiscoveryInterval > 0 && time.Since(s.discovered) >= s.cfg.DiscoveryInterval {
		s.discover(ctx)
	}
	if s.finished() {
		return io.EOF
	}
	if len(s.next) == 0 {
		// No partition for this subtask: idle, but not finished (the
		// topic may gain partitions).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollWait):
			return nil
		}
	}
	if !s.started {
		if len(s.fromEarliest) > 0 {
			offs, err := s.listOffsets(ctx, s.fromEarliest, -2)
			if err != nil {
				return err
			}
			for p, off := range offs {
				s.next[p] = off
				delete(s.skipBefore, p)
			}
			s.fromEarliest = nil
		}
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
	fs := s.client.PollRecords(pctx, maxRecords)
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
	// Per partition, then per record: the partition's state is looked up
	// once per fetch, not per record.
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		p := tp{fp.Topic, fp.Partition}
		next, owned := s.next[p]
		if !owned {
			return // an error entry (an expired poll) names no partition
		}
		end := fp.HighWatermark
		if !s.cfg.ReadUncommitted {
			end = fp.LastStableOffset
		}
		if end >= 0 {
			s.end[p] = end
		}
		split, skip := s.split[p], s.skipBefore[p]
		stop, bounded := s.stop[p]
		for _, r := range fp.Records {
			if bounded && r.Offset >= stop {
				next = max(next, stop) // everything before it was read
				break
			}
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				continue // a transaction marker: kept only to move the position past it
			}
			rec := stream.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli()}
			if skip {
				if rec.Timestamp < s.cfg.StartMillis {
					continue
				}
				skip = false
				delete(s.skipBefore, p)
			}
			if len(r.Headers) > 0 {
				rec.Headers = make([]stream.Header, len(r.Headers))
				for i, h := range r.Headers {
					rec.Headers[i] = stream.Header{Key: h.Key, Value: h.Value}
				}
			}
			b.AddRecord(&rec)
			s.last = append(s.last, split)
		}
		s.next[p] = next
	})
	if s.finished() {
		return io.EOF // b may hold the last records
	}
	return nil
}

// Splits tells the task which partition each record of the last Next came
// from: split i is the i-th owned partition by topic and number.
func (s *Source) Splits() (int, []int32) { return len(s.split), s.last }

// position is the JSON form: topic → partition (decimal) → next offset.
// A bounded source adds its stop offsets under "$stop:" + topic ("$" is
// not a character of Kafka topic names).
type position map[string]map[string]int64

const stopPrefix = "$stop:"

// Position returns the next offset of every owned partition, and a
// bounded source's stop offsets.
func (s *Source) Position() ([]byte, error) {
	pos := position{}
	put := func(key string, p tp, off int64) {
		if pos[key] == nil {
			pos[key] = map[string]int64{}
		}
		pos[key][strconv.Itoa(int(p.partition))] = off
	}
	for p, off := range s.next {
		put(p.topic, p, off)
	}
	for p, off := range s.stop {
		put(stopPrefix+p.topic, p, off)
	}
	return json.Marshal(pos)
}

// Seek restores offsets written by Position. Partitions this subtask owns
// that pos does not name (added since) start at their earliest offset, as
// partitions discovery finds do. A bounded source takes the stop offsets
// pos names, so that it ends where the first run would have.
func (s *Source) Seek(raw []byte) error {
	if s.started {
		return errors.New("kafka source: Seek after Next")
	}
	offsets, stops, err := decodePosition(raw)
	if err != nil {
		return err
	}
	for k := range offsets {
		if _, ok := s.next[k]; !ok {
			return fmt.Errorf("%w: %s/%d is not a partition of this subtask", ErrBadPosition, k.topic, k.partition)
		}
	}
	s.fromEarliest = nil
	for k := range s.next {
		if _, ok := offsets[k]; !ok {
			// Not in the checkpoint: a partition found after it (by
			// discovery, or added while the job was down), read from
			// its start as discovery would.
			s.fromEarliest = append(s.fromEarliest, k)
		}
	}
	for k, off := range offsets {
		s.next[k] = off
		delete(s.skipBefore, k) // a checkpoint's offset is exact
	}
	if s.stop != nil {
		for k, off := range stops {
			if _, ok := s.stop[k]; ok {
				s.stop[k] = off
			}
		}
	}
	return nil
}

// decodePosition reads what Position wrote: the offsets, and the stops of
// a bounded source.
func decodePosition(raw []byte) (offsets, stops map[tp]int64, err error) {
	var pos position
	if err := json.Unmarshal(raw, &pos); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadPosition, err)
	}
	offsets, stops = map[tp]int64{}, map[tp]int64{}
	for key, parts := range pos {
		into, topic := offsets, key
		if t, ok := strings.CutPrefix(key, stopPrefix); ok {
			into, topic = stops, t
		}
		for ps, off := range parts {
			n, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || n < 0 || off < 0 {
				return nil, nil, fmt.Errorf("%w: partition %q offset %d", ErrBadPosition, ps, off)
			}
			into[tp{topic, int32(n)}] = off
		}
	}
	return offsets, stops, nil
}

// CheckpointTaken remembers pos, the position of checkpoint, to commit
// it to the group if the checkpoint completes.
func (s *Source) CheckpointTaken(checkpoint int64, pos []byte) {
	if s.cfg.Group == "" {
		return
	}
	if len(s.taken) == maxTaken {
		s.taken = append(s.taken[:0], s.taken[1:]...)
	}
	s.taken = append(s.taken, takenPosition{checkpoint, pos})
}

// CheckpointCompleted commits the offsets checkpoint recorded (not the
// current ones) to the group, and forgets the positions of it and of
// older checkpoints. The commit is a simple one (generation -1, no
// member), which Kafka accepts for a group without members; it fails
// while consumers of the group are members. Without a group, or for a
// checkpoint this source did not take, it does nothing.
func (s *Source) CheckpointCompleted(ctx context.Context, checkpoint int64) error {
	var pos []byte
	i := 0
	for ; i < len(s.taken) && s.taken[i].checkpoint <= checkpoint; i++ {
		if s.taken[i].checkpoint == checkpoint {
			pos = s.taken[i].pos
		}
	}
	s.taken = append(s.taken[:0], s.taken[i:]...)
	if pos == nil || s.client == nil {
		return nil
	}
	offsets, _, err := decodePosition(pos)
	if err != nil {
		return err
	}
	if len(offsets) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if err := s.commit(ctx, offsets); err != nil {
		return fmt.Errorf("kafka source: commit checkpoint %d to group %q: %w", checkpoint, s.cfg.Group, err)
	}
	return nil
}

func (s *Source) commit(ctx context.Context, offsets map[tp]int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = s.cfg.Group
	req.Generation = -1
	parts := make([]tp, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, p)
	}
	for _, g := range groupByTopic(parts) {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = g.topic, s.topicIDs[g.topic]
		for _, p := range g.partitions {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[tp{g.topic, p}], -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.client)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
			}
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
