// Package dataflow turns a job spec into a graph of tasks and runs them:
// sources, chains of operators working on record batches, bounded queues
// between tasks (backpressure), fan-out, union, and sinks.
//
// Job.Run runs every task of a job in this process. Job.RunDeployment runs
// a worker's share of them (PlanTasks names the tasks a coordinator
// places): channels to tasks on other workers are Exchange gRPC streams
// with credit-based flow control (exchange.proto), served by an Exchange.
//
// A Deployment with Checkpointing takes aligned checkpoints
// (docs/rfcs/2026-11-30-checkpoints.md): StartDeployment returns a Running
// whose Trigger injects barriers at the source tasks between two batches;
// tasks with several input channels align them (aligner), snapshot the
// keyed state of their nodes, their source's position and their sink's
// staged output into a task manifest, acknowledge (Checkpointing.Ack) and
// forward the barrier; Complete lets sinks publish. With
// Checkpointing.Restore a deployment starts from a checkpoint instead,
// at the same or another parallelism of its keyed nodes.
//
// It is not the place for connectors (package connectors implements Source
// and Sink), for running Wasm (package host) or for scheduling tasks onto
// machines (package scheduler).
package dataflow

import (
	"context"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/state"
)

// Record is the unit of data; see abi.Record.
type Record = abi.Record

// Header is a record header.
type Header = abi.Header

// NoTimestamp marks a record without event time.
const NoTimestamp = abi.NoTimestamp

// Batch is a group of records moving together through a chain of operators
// and across queues. Record bytes live in the batch's arena. Once a batch is
// handed downstream it is read-only: consumers of a fan-out share it.
type Batch struct {
	Records []Record
	arena   []byte
	// sides holds records for side outputs (such as late data), by port.
	sides map[string]*Batch
}

// NewBatch returns an empty batch with room for n records.
func NewBatch(n int) *Batch {
	return &Batch{Records: make([]Record, 0, n)}
}

// decodeBatch turns the bytes of an Exchange frame (abi.AppendBatch
// encoding) into a batch that owns them: the records alias buf, which
// becomes the batch's arena, so nothing is copied and buf must not be
// reused. Every offset is checked (abi.DecodeBatch): a malformed buf is an
// error wrapping abi.ErrMalformedBatch, never a panic.
func decodeBatch(buf []byte) (*Batch, error) {
	n, err := abi.BatchCount(buf)
	if err != nil {
		return nil, err
	}
	recs, err := abi.DecodeBatch(buf, make([]Record, 0, n))
	if err != nil {
		return nil, err
	}
	// Full: a later Add starts a new arena instead of writing over buf.
	return &Batch{Records: recs, arena: buf[:len(buf):len(buf)]}, nil
}

// Len is the number of records.
func (b *Batch) Len() int { return len(b.Records) }

// Reset empties b for reuse. Records taken from b before are invalid after.
func (b *Batch) Reset() {
	clear(b.Records)
	b.Records = b.Records[:0]
	b.arena = b.arena[:0]
	clear(b.sides)
}

// Side returns the batch of side output port, creating it on first use.
// The task routes it to the nodes that read that port.
func (b *Batch) Side(port string) *Batch {
	s := b.sides[port]
	if s == nil {
		if b.sides == nil {
			b.sides = map[string]*Batch{}
		}
		s = NewBatch(16)
		b.sides[port] = s
	}
	return s
}

// Bytes is the number of payload bytes held by the batch.
func (b *Batch) Bytes() int { return len(b.arena) }

func (b *Batch) copyBytes(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	if cap(b.arena)-len(b.arena) < len(p) {
		// Start a new arena: records already added keep the old one alive.
		n := 2 * cap(b.arena)
		if n < 4096 {
			n = 4096
		}
		for n < len(p) {
			n *= 2
		}
		b.arena = make([]byte, 0, n)
	}
	start := len(b.arena)
	b.arena = append(b.arena, p...)
	return b.arena[start:len(b.arena):len(b.arena)]
}

// Add appends a record, copying key and value into the batch.
func (b *Batch) Add(key, value []byte, ts int64) {
	b.Records = append(b.Records, Record{Key: b.copyBytes(key), Value: b.copyBytes(value), Timestamp: ts})
}

// AddRecord appends a copy of r, headers included.
func (b *Batch) AddRecord(r *Record) {
	c := Record{Key: b.copyBytes(r.Key), Value: b.copyBytes(r.Value), Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		c.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = Header{Key: h.Key, Value: b.copyBytes(h.Value)}
		}
	}
	b.Records = append(b.Records, c)
}

// AddRecords appends copies of recs.
func (b *Batch) AddRecords(recs []Record) {
	for i := range recs {
		b.AddRecord(&recs[i])
	}
}

// AddOwned appends r without copying: its bytes must not change afterwards.
func (b *Batch) AddOwned(r Record) { b.Records = append(b.Records, r) }

// TaskInfo tells an operator, source or sink which parallel instance it is.
type TaskInfo struct {
	Job string // the spec's name
	// JobID names the job for as long as it runs, across attempts (the
	// cluster's job id; in a process of its own, unique in the process).
	JobID       string
	Node        string
	Subtask     int // 0-based
	Parallelism int
	// Keyed operators: the key groups this subtask owns and its state.
	MaxParallelism int
	KeyGroups      state.Range
	State          state.Store // nil unless the node is keyed
	// Checkpointing is set when the deployment takes checkpoints: a sink
	// that implements Transactional then stages its output until a
	// checkpoint completes; otherwise it writes as it would without.
	Checkpointing bool
	// RestoredCheckpoint is the checkpoint the task starts from, 0 when it
	// starts from scratch.
	RestoredCheckpoint int64
}

// Source produces the records of one parallel instance of a source node.
type Source interface {
	// Open prepares the instance described by info.
	Open(ctx context.Context, info TaskInfo) error
	// Next appends up to max records to b. It returns io.EOF once the
	// source is exhausted (b may hold final records); an unbounded source
	// blocks until records are ready or ctx is done.
	Next(ctx context.Context, b *Batch, max int) error
	Close() error
}

// SplitSource is implemented by sources whose subtask reads several
// splits, each in roughly ascending event time of its own, such as the
// partitions of Kafka topics. The task then keeps event time per split,
// as Flink does per split: its watermark is the lowest over the splits
// that are not idle (max timestamp − max_out_of_orderness − 1), so a
// lagging split holds it back; a split that produced nothing for the
// event_time idle_timeout stops doing so (without an idle_timeout a
// split that never produces holds the watermark back forever), and when
// every split is idle the subtask is. Without event_time it is not used.
type SplitSource interface {
	// Splits returns the number n of splits the subtask reads and, for
	// each record the last Next call appended, in order, the index
	// (0..n-1) of its split. It is called after every Next, from the
	// task's goroutine; last may be reused by the following Next. n
	// does not shrink; 0 means no split (the subtask as a whole goes
	// idle after idle_timeout).
	Splits() (n int, last []int32)
}

// PendingReporter is implemented by sources that know how many records
// are waiting for them (Flink's pendingRecords metric; Kafka: each
// partition's end offset minus the position). The task asks after every
// Next, from its goroutine.
type PendingReporter interface {
	PendingRecords() (n int64, known bool)
}

// Sink consumes the records of one parallel instance of a sink node.
type Sink interface {
	Open(ctx context.Context, info TaskInfo) error
	Write(ctx context.Context, b *Batch) error
	// Finish is called once at the end of a bounded input: flush and commit.
	Finish(ctx context.Context) error
	// Close releases resources; called after Finish or after a failure.
	Close() error
}

// WatermarkOperator is implemented by operators that act on event time:
// windows fire and event-time timers run when the watermark passes them.
type WatermarkOperator interface {
	// ProcessWatermark is called when the task's watermark advances to wm
	// (math.MaxInt64 at the end of a bounded input); output goes to out.
	ProcessWatermark(ctx context.Context, wm int64, out *Batch) error
}

// ProcessingTimeOperator is implemented by operators with processing-time
// timers; the task calls it periodically with the wall clock in ms.
type ProcessingTimeOperator interface {
	OnProcessingTime(ctx context.Context, now int64, out *Batch) error
}

// Operator transforms batches. One instance per subtask, driven by one
// goroutine.
type Operator interface {
	Open(ctx context.Context, info TaskInfo) error
	// Process reads in (which it must not modify or keep) and appends its
	// output to out.
	Process(ctx context.Context, in *Batch, out *Batch) error
	// Finish is called once when the input ends; buffered output goes to out.
	Finish(ctx context.Context, out *Batch) error
	Close() error
}
