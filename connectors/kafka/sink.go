package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-stream/eddy/abi/jsonscan"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// SinkConfig configures a Sink.
type SinkConfig struct {
	Brokers []string
	Topic   string
	// ExactlyOnce writes in transactions committed when checkpoints
	// complete; otherwise records are flushed at each checkpoint
	// (at-least-once).
	ExactlyOnce bool
	// TransactionalIDPrefix names the transactions PREFIX-SUBTASK-N;
	// "" means eddy-JOBID-NODE.
	TransactionalIDPrefix string
	// TransactionTimeout is asked of the broker for each transaction; 0
	// means 60 s.
	TransactionTimeout time.Duration
	// KeyField takes the key from this JSON field of the value.
	KeyField string
	Security Security
	// OpenTimeout bounds Open's wait for the cluster; 0 means 30 s.
	OpenTimeout time.Duration
	Logger      *slog.Logger
}

// SinkConfigFromSpec checks spec and turns it into a SinkConfig. The
// checkpoint section is the job's to check: delivery exactly_once without
// checkpoints is refused by the job spec's validation, not here.
func SinkConfigFromSpec(spec *jobspec.KafkaSinkSpec) (SinkConfig, error) {
	if spec == nil {
		return SinkConfig{}, errors.New("kafka: no spec")
	}
	c := SinkConfig{
		Brokers:               spec.Brokers,
		Topic:                 spec.Topic,
		ExactlyOnce:           spec.Delivery == jobspec.KafkaExactlyOnce,
		TransactionalIDPrefix: spec.TransactionalIDPrefix,
		TransactionTimeout:    spec.TransactionTimeout.D(),
		KeyField:              spec.KeyField,
		Security:              Security{SASL: spec.SASL, TLS: spec.TLS},
	}
	return c, spec.Check(true)
}

// Sink is one parallel instance of a Kafka sink. It implements
// stream.Sink and stream.Transactional.
//
// At-least-once: an idempotent producer; PreCommit flushes, so that a
// completed checkpoint's records are in Kafka. After a failure, what was
// written after the restored checkpoint is written again.
//
// Exactly-once, the two-phase commit of Flink's KafkaSink:
//   - Records go into a transaction with the id PREFIX-SUBTASK-N; N (the
//     sequence) grows by one with each transaction.
//   - PreCommit(c) flushes the open transaction and keeps it open, pending
//     on checkpoint c; the next record opens transaction N+1 with a new
//     producer. The task manifest records every pending transaction
//     (id, producer id and epoch) and the next sequence.
//   - Commit(c) commits the pending transactions of checkpoints ≤ c.
//   - Abort, when a task starts, first commits the transactions staged in
//     the checkpoint it restores from (the completion may not have reached
//     the failed attempt): an EndTxn with the recorded producer id and
//     epoch, which the broker accepts again for a transaction it already
//     committed. Then it fences what a failed attempt left open: it
//     initializes PREFIX-SUBTASK-next (aborting a transaction open under
//     it) and the ids after it, until one that was never used, as Flink
//     probes for lingering transactions.
//
// A pending transaction the broker aborts (transaction_timeout passed
// before its checkpoint completed and was committed) loses its records, as
// in Flink: the timeout must exceed the checkpoint interval plus the time
// to recover.
type Sink struct {
	cfg      SinkConfig
	log      *slog.Logger
	keyField []byte
	info     stream.TaskInfo
	prefix   string
	eos      bool // exactly-once in effect: cfg.ExactlyOnce and checkpointing

	client *kgo.Client // at-least-once producer, or the admin client (exactly-once)

	cur     *txn   // the open transaction, nil until a record needs one
	pending []*txn // flushed, waiting for their checkpoint; ascending
	seq     int64  // the sequence of the next transaction to open

	errMu sync.Mutex
	err   error // the first failed produce
	buf   []byte
}

// txn is one transaction and the producer that owns it.
type txn struct {
	seq        int64
	id         string
	client     *kgo.Client
	checkpoint int64 // pending on it, once pre-committed
	records    int   // produced in it
	pid        int64
	epoch      int16
}

// staged is one entry of what the sink records in a task manifest: a
// pending transaction (PID set), or the next sequence of a subtask's ids.
type staged struct {
	Prefix  string `json:"prefix"`
	Subtask int    `json:"subtask"`
	Seq     int64  `json:"seq"`
	Next    bool   `json:"next,omitempty"`
	PID     int64  `json:"pid,omitempty"`
	Epoch   int16  `json:"epoch,omitempty"`
}

func (s staged) id() string { return txnID(s.Prefix, s.Subtask, s.Seq) }

func txnID(prefix string, subtask int, seq int64) string {
	return fmt.Sprintf("%s-%d-%d", prefix, subtask, seq)
}

var (
	_ stream.Sink          = (*Sink)(nil)
	_ stream.Transactional = (*Sink)(nil)
)

// NewSink returns a sink for cfg; it connects in Open.
func NewSink(cfg SinkConfig) (*Sink, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, errors.New("kafka sink: brokers and topic are required")
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = time.Minute
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = openTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Sink{cfg: cfg, log: log}
	if cfg.KeyField != "" {
		s.keyField = []byte(cfg.KeyField)
	}
	return s, nil
}

// Open connects and checks that the topic exists, retrying with backoff
// while no broker answers.
func (s *Sink) Open(ctx context.Context, info stream.TaskInfo) error {
	s.info = info
	s.eos = s.cfg.ExactlyOnce && info.Checkpointing
	s.prefix = s.cfg.TransactionalIDPrefix
	if s.prefix == "" {
		job := info.JobID
		if job == "" {
			job = info.Job
		}
		s.prefix = "eddy-" + job + "-" + info.Node
	}
	var opts []kgo.Opt
	if !s.eos {
		opts = append(opts, kgo.DefaultProduceTopic(s.cfg.Topic))
	}
	cl, err := dialCluster(s.cfg.Brokers, s.cfg.Security, opts...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	s.client = cl
	octx, cancel := context.WithTimeout(ctx, s.cfg.OpenTimeout)
	defer cancel()
	if _, err := describeTopics(octx, cl, s.cfg.Brokers, []string{s.cfg.Topic}); err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	return nil
}

// Write produces b's records asynchronously; the producer's buffer bounds
// what is in flight (Produce blocks when it is full).
func (s *Sink) Write(ctx context.Context, b *stream.Batch) error {
	if err := s.produceErr(); err != nil {
		return err
	}
	cl := s.client
	if s.eos {
		if s.cur == nil {
			t, err := s.open(ctx, s.seq)
			if err != nil {
				return err
			}
			s.cur = t
		}
		cl = s.cur.client
		s.cur.records += len(b.Records)
	}
	// The batch is reused once Write returns; the producer keeps the
	// bytes until they are acknowledged, so they are copied, in one
	// allocation per batch.
	n := 0
	for i := range b.Records {
		r := &b.Records[i]
		n += len(r.Key) + len(r.Value)
	}
	buf := make([]byte, 0, n)
	for i := range b.Records {
		r := &b.Records[i]
		rec := &kgo.Record{Topic: s.cfg.Topic}
		start := len(buf)
		buf = append(buf, r.Value...)
		rec.Value = buf[start:len(buf):len(buf)]
		key := r.Key
		if s.keyField != nil {
			raw, st := jsonscan.Lookup(r.Value, s.keyField)
			if st != jsonscan.Field {
				return fmt.Errorf("kafka sink: key_field: record has no field %q: %.80s", s.cfg.KeyField, r.Value)
			}
			if jsonscan.KindOf(raw) == jsonscan.String {
				s.buf = jsonscan.AppendUnquote(s.buf[:0], raw)
				key = s.buf
			} else {
				key = raw
			}
		}
		if key != nil {
			start = len(buf)
			buf = append(buf, key...)
			rec.Key = buf[start:len(buf):len(buf)]
		}
		if r.Timestamp != stream.NoTimestamp {
			rec.Timestamp = time.UnixMilli(r.Timestamp)
		}
		if len(r.Headers) > 0 {
			rec.Headers = make([]kgo.RecordHeader, len(r.Headers))
			for j, h := range r.Headers {
				rec.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: append([]byte(nil), h.Value...)}
			}
		}
		cl.Produce(ctx, rec, s.promise)
	}
	return ctx.Err()
}

// ReleasesInput: Write copies what the producer keeps until it is
// acknowledged.
func (s *Sink) ReleasesInput() bool { return true }

func (s *Sink) promise(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
}

func (s *Sink) produceErr() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err != nil {
		return fmt.Errorf("kafka sink: produce to %q: %w", s.cfg.Topic, s.err)
	}
	return nil
}

// flush waits until everything produced on cl is acknowledged.
func (s *Sink) flush(ctx context.Context, cl *kgo.Client) error {
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka sink: flush: %w", err)
	}
	return s.produceErr()
}

// open starts transaction seq with a new transactional producer (Abort
// fenced the ids a failed attempt may have used beforehand).
func (s *Sink) open(ctx context.Context, seq int64) (*txn, error) {
	id := txnID(s.prefix, s.info.Subtask, seq)
	cl, err := dialCluster(s.cfg.Brokers, s.cfg.Security,
		kgo.DefaultProduceTopic(s.cfg.Topic),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(s.cfg.TransactionTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka sink: init transactional id %s: %w", id, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka sink: begin transaction %s: %w", id, err)
	}
	s.seq = seq + 1
	return &txn{seq: seq, id: id, client: cl}, nil
}

// PreCommit flushes; exactly-once, the open transaction becomes pending
// on checkpoint and the staged entries name every pending transaction and
// the next sequence.
func (s *Sink) PreCommit(ctx context.Context, checkpoint int64) ([]string, error) {
	if !s.eos {
		return nil, s.flush(ctx, s.client)
	}
	// A transaction without records stays open for the next checkpoint:
	// the broker knows nothing of it yet.
	if t := s.cur; t != nil && t.records > 0 {
		if err := s.flush(ctx, t.client); err != nil {
			return nil, err
		}
		pid, epoch, err := t.client.ProducerID(ctx)
		if err != nil {
			return nil, fmt.Errorf("kafka sink: producer id of %s: %w", t.id, err)
		}
		t.pid, t.epoch, t.checkpoint = pid, epoch, checkpoint
		s.pending = append(s.pending, t)
		s.cur = nil
	}
	var out []string
	for _, t := range s.pending {
		out = append(out, s.entry(staged{Prefix: s.prefix, Subtask: s.info.Subtask, Seq: t.seq, PID: t.pid, Epoch: t.epoch}))
	}
	out = append(out, s.entry(staged{Prefix: s.prefix, Subtask: s.info.Subtask, Seq: s.seq, Next: true}))
	return out, nil
}

func (s *Sink) entry(e staged) string {
	b, _ := json.Marshal(e) // plain struct: cannot fail
	return string(b)
}

// Commit commits the pending transactions of the checkpoints ≤ checkpoint.
func (s *Sink) Commit(ctx context.Context, checkpoint int64) error {
	for len(s.pending) > 0 && s.pending[0].checkpoint <= checkpoint {
		t := s.pending[0]
		if err := t.client.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka sink: commit %s (checkpoint %d): %w", t.id, t.checkpoint, err)
		}
		t.client.Close()
		s.pending = s.pending[1:]
	}
	return nil
}

// Abort commits what the restored checkpoint staged and fences what a
// failed attempt left open; see Sink.
func (s *Sink) Abort(ctx context.Context, raw []string) error {
	if !s.eos {
		return nil
	}
	var (
		commit []staged
		probe  []staged // ids to fence from, other subtasks' (rescaling)
	)
	own := staged{Prefix: s.prefix, Subtask: s.info.Subtask, Next: true}
	for _, r := range raw {
		var e staged
		if err := json.Unmarshal([]byte(r), &e); err != nil || e.Prefix == "" || e.Seq < 0 {
			return fmt.Errorf("kafka sink: staged entry %.80q is not one the sink writes", r)
		}
		switch {
		case !e.Next:
			commit = append(commit, e)
		case e.Prefix == own.Prefix && e.Subtask == own.Subtask:
			own.Seq = max(own.Seq, e.Seq)
		default:
			probe = append(probe, e)
		}
	}
	for _, e := range commit {
		if err := s.recommit(ctx, e); err != nil {
			return err
		}
	}
	// Fence the ids the failed attempts may have used, from the next one
	// on (the first transaction of this attempt), then open it.
	probe = append(probe, own)
	for _, e := range probe {
		if err := s.fenceFrom(ctx, e); err != nil {
			return err
		}
	}
	t, err := s.open(ctx, own.Seq)
	if err != nil {
		return err
	}
	s.cur = t
	return nil
}

// recommit commits a transaction of the restored checkpoint with its
// recorded producer id and epoch.
func (s *Sink) recommit(ctx context.Context, e staged) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = e.id()
	req.ProducerID = e.PID
	req.ProducerEpoch = e.Epoch
	req.Commit = true
	resp, err := req.RequestWith(ctx, s.client)
	if err != nil {
		return fmt.Errorf("kafka sink: commit %s of the restored checkpoint: %w", e.id(), err)
	}
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case err == nil:
		return nil
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.InvalidTxnState), errors.Is(err, kerr.InvalidProducerIDMapping):
		// The id moved on: only after the transaction was committed
		// (by the attempt that staged it, or by an earlier restore) does
		// this protocol reuse or fence it.
		s.log.Info("kafka sink: transaction of the restored checkpoint was already completed",
			"txn", e.id(), "answer", err.Error())
		return nil
	default:
		return fmt.Errorf("kafka sink: commit %s of the restored checkpoint: %w", e.id(), err)
	}
}

// fenceFrom fences the ids of e's subtask from e.Seq on, until an id that
// had never been used.
func (s *Sink) fenceFrom(ctx context.Context, e staged) error {
	for seq := e.Seq; ; seq++ {
		fresh, err := s.fence(ctx, txnID(e.Prefix, e.Subtask, seq))
		if err != nil || fresh {
			return err
		}
	}
}

// fence initializes transactional id, which bumps its epoch (fencing any
// producer that still holds it) and aborts a transaction open under it;
// fresh reports an id that had never been initialized. The id is
// initialized twice: once by name, which gives its producer id and epoch,
// then with them (KIP-360). Kafka aborts the open transaction at the
// first; kfake only at the second.
func (s *Sink) fence(ctx context.Context, id string) (fresh bool, err error) {
	pid, epoch := int64(-1), int16(-1)
	for i := range 2 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(id)
		req.TransactionTimeoutMillis = int32(s.cfg.TransactionTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = pid, epoch
		resp, err := req.RequestWith(ctx, s.client)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return false, fmt.Errorf("kafka sink: fence transactional id %s: %w", id, err)
		}
		if i == 0 && resp.ProducerEpoch == 0 {
			return true, nil // never used: nothing open under it
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
	}
	return false, nil
}

// Finish flushes and, exactly-once, commits everything: the input ended.
func (s *Sink) Finish(ctx context.Context) error {
	if !s.eos {
		return s.flush(ctx, s.client)
	}
	if _, err := s.PreCommit(ctx, maxCheckpoint); err != nil {
		return err
	}
	return s.Commit(ctx, maxCheckpoint)
}

const maxCheckpoint = int64(^uint64(0) >> 1)

// Close closes the producers. Open transactions stay open: a pending one
// is committed by the next attempt (Abort), the others are fenced by it or
// time out.
func (s *Sink) Close() error {
	if s.cur != nil {
		s.cur.client.Close()
		s.cur = nil
	}
	for _, t := range s.pending {
		t.client.Close()
	}
	s.pending = nil
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	return nil
}
