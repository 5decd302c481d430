// Package stream holds the contracts of a running job that the runtime
// (package dataflow), the connectors and the operators share: records and
// batches, the Source, Sink and Operator interfaces, the optional
// capabilities a connector or operator may implement (checkpointed
// positions, split watermarks, two-phase commit, event and processing
// time), and the TaskInfo a task hands them.
//
// It is a leaf: it imports neither the runtime, nor wazero, Pebble or gRPC,
// so that a connector depends on what it implements and not on how jobs
// run. It is not for the runtime's own types (tasks, channels, barriers:
// package dataflow) nor for the checkpoint format (package
// dataflow/checkpoint).
package stream

import (
	"context"
	"log/slog"

	"time"

	"github.com/eddy-stream/eddy/abi"
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

// NewBatchSized returns an empty batch with room for n records and bytes
// bytes of keys and values in one arena: a batch that will hold about as
// much as one before it, which Add would otherwise fill through a chain
// of doubling arenas (4 KB, 8 KB, … each kept alive by its records).
func NewBatchSized(n, bytes int) *Batch {
	b := &Batch{Records: make([]Record, 0, n)}
	if bytes > 0 {
		b.arena = make([]byte, 0, bytes)
	}
	return b
}

// DecodeBatch turns the bytes of an Exchange frame (abi.AppendBatch
// encoding) into a batch that owns them: the records alias buf, which
// becomes the batch's arena, so nothing is copied and buf must not be
// reused. The batch and its records array come from the pool (GetBatch),
// so a consumer that recycles what it received allocates nothing per
// frame; the pooled batch's own arena gives way to buf. Every offset is
// checked (abi.DecodeBatch): a malformed buf is an error wrapping
// abi.ErrMalformedBatch, never a panic.
func DecodeBatch(buf []byte) (*Batch, error) {
	n, err := abi.BatchCount(buf)
	if err != nil {
		return nil, err
	}
	b := GetBatch(n, 0)
	recs, err := abi.DecodeBatch(buf, b.Records[:0])
	if err != nil {
		b.Recycle()
		return nil, err
	}
	b.Records = recs
	// Full: a later Add starts a new arena instead of writing over buf
	// (a recycled batch reuses buf as its arena: the batch owns it).
	b.arena = buf[:len(buf):len(buf)]
	return b, nil
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

// Sides returns the side-output batches of b by port, for the runtime to
// route; it may delete the ports it has routed. nil when there are none.
func (b *Batch) Sides() map[string]*Batch { return b.sides }

// Bytes is the number of payload bytes held by the batch.
func (b *Batch) Bytes() int { return len(b.arena) }

func (b *Batch) copyBytes(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	if cap(b.arena)-len(b.arena) < len(p) {
		b.grow(len(p))
	}
	start := len(b.arena)
	b.arena = append(b.arena, p...)
	return b.arena[start:len(b.arena):len(b.arena)]
}

// grow starts a new arena with room for at least need bytes: records
// already added keep the old one alive.
func (b *Batch) grow(need int) {
	n := 2 * cap(b.arena)
	if n < 4096 {
		n = 4096
	}
	for n < need {
		n *= 2
	}
	b.arena = make([]byte, 0, n)
}

// Spare returns the free end of the batch's arena, empty, with room for at
// least n bytes. A source that builds record values appends one to it and
// adds it with AddSpare, which saves the copy Add makes of a value built
// in a buffer of its own. Spare's slice is invalid after any other call
// that adds to b.
func (b *Batch) Spare(n int) []byte {
	if cap(b.arena)-len(b.arena) < n {
		b.grow(n)
	}
	return b.arena[len(b.arena):len(b.arena)]
}

// AddSpare appends a record without key whose value was appended to the
// slice Spare returned: the record takes those bytes in place. A value
// that outgrew Spare's room (append moved it elsewhere), or that is not
// Spare's, is copied as Add does.
func (b *Batch) AddSpare(value []byte, ts int64) {
	start := len(b.arena)
	if n := len(value); n > 0 && n <= cap(b.arena)-start && &value[0] == &b.arena[start : start+1][0] {
		b.arena = b.arena[:start+n]
		b.Records = append(b.Records, Record{Value: b.arena[start : start+n : start+n], Timestamp: ts})
		return
	}
	b.Add(nil, value, ts)
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
	// Tenant owns the job (labels its metrics).
	Tenant string
	Job    string // the spec's name
	// JobID names the job for as long as it runs, across attempts (the
	// cluster's job id; in a process of its own, unique in the process).
	JobID       string
	Node        string
	Subtask     int // 0-based
	Parallelism int
	// Keyed operators: the key groups this subtask owns and its state.
	MaxParallelism int
	KeyGroups      KeyGroupRange
	State          KeyedState // nil unless the node is keyed
	// Checkpointing is set when the deployment takes checkpoints: a sink
	// that implements Transactional then stages its output until a
	// checkpoint completes; otherwise it writes as it would without.
	Checkpointing bool
	// RestoredCheckpoint is the checkpoint the task starts from, 0 when it
	// starts from scratch.
	RestoredCheckpoint int64
	// Logger is the task's logger (with job and task attributes): a Wasm
	// operator's guest output goes there, so that it is the task's log
	// (what `eddy job logs` shows), not the process's. nil: slog.Default.
	Logger *slog.Logger
	// Gate admits the task's guest calls: its tenant's share of the
	// worker's CPU. nil: none. Operators that run Wasm modules hand it to
	// their instances.
	Gate Gate
	// Now is the task's processing time in Unix milliseconds, for the
	// instances of operators that run Wasm modules. nil: the wall clock;
	// set when the job's processing time is driven by its source
	// (ProcessingTimeSource, the local harness's).
	Now func() int64
}

// Gate is host.Gate, named here so that this leaf need not import the
// runtime: Acquire returns once a guest call may run, and release must be
// called when it returned.
type Gate interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// Source produces the records of one parallel instance of a source node.
// The task calls its methods one at a time, never concurrently, but Next
// may run on a goroutine other than Open's: while records wait in its
// output buffers, the task reads on a goroutine of its own so that it can
// send them on time however long Next blocks (buffer_timeout). A source
// must therefore not depend on which goroutine calls it.
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

// ProgressReporter is implemented by bounded sources that know how far
// through their input they are: a file source its byte offset of the
// file's size, a bounded generator its records of its count. done and
// total are in the source's own unit, the same for every subtask of a
// node, so that a node's fraction is the sum of done over the sum of
// total. ok is false while the source cannot tell (unbounded, not open).
// The task asks after every Next, from its goroutine.
type ProgressReporter interface {
	Progress() (done, total int64, ok bool)
}

// WatermarkSource is implemented by sources that say the watermark
// themselves, in place of or on top of the one event_time derives: the
// local harness (dataflow/localrun) replays a test's explicit watermarks
// so that they reach the operators exactly between the records they
// follow. The task asks after every Next, from its goroutine; a value not
// above the task's watermark changes nothing.
type WatermarkSource interface {
	Watermark() (wm int64, ok bool)
}

// ProcessingTimeSource is implemented by sources that drive processing
// time themselves, in a job run with dataflow.Options.ManualProcessingTime
// (the local harness replays a test's processing-time advances): after a
// Next, a value above the current processing time moves it there, in band
// — after the records of that Next, before those of the next —, fires the
// processing-time timers due in every task, and is what the guests'
// processing_time import returns from then on. The task asks after every
// Next, from its goroutine.
type ProcessingTimeSource interface {
	ProcessingTime() (ms int64, ok bool)
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

// TwoInputOperator is implemented by operators with two inputs, such as
// the built-in joins: the task hands each batch to ProcessInput with the
// index of the input it came from (0 for the node's first input, 1 for
// its second) and never calls Process. Watermarks of both inputs are
// combined by min before ProcessWatermark, as for any operator.
type TwoInputOperator interface {
	Operator
	ProcessInput(ctx context.Context, input int, in *Batch, out *Batch) error
}

// KeyGroupRange is the half-open range [Start, End) of key groups a
// subtask owns (state.Range, in the contract's own type).
type KeyGroupRange struct{ Start, End int }

// KeyedState is the keyed state of a keyed task: a state.Store. The
// contract names only its value state, so that a connector or a native
// operator can keep small per-key values without importing the state
// backends; operators that need lists, maps or timers (windows, Wasm)
// assert it to state.Store, which every TaskInfo.State is.
type KeyedState interface {
	ValueGet(name string, key, ns, dst []byte) ([]byte, bool, error)
	ValuePut(name string, key, ns, val []byte, ttl time.Duration) error
	ValueDelete(name string, key, ns []byte) error
}

// Checkpointed is implemented by sources that can be rewound: the position
// is opaque bytes recorded in the checkpoint.
type Checkpointed interface {
	// Position is where the next Next call would continue.
	Position() ([]byte, error)
	// Seek moves to pos, which Position returned for the same subtask
	// and parallelism; it is called after Open and before the first Next.
	// A pos that is not one is an error.
	Seek(pos []byte) error
}

// CheckpointListener is implemented by sources that act when a
// checkpoint completes, such as Kafka committing the checkpoint's
// offsets to a consumer group. dataflow calls it only when the deployment
// checkpoints, always from the task's goroutine between two batches, and
// only for a source that is also Checkpointed.
//
// What a listener does must not matter for correctness: a restore reads
// the checkpoint, not the listener's side effects. So an error from
// CheckpointCompleted is logged and the task goes on.
type CheckpointListener interface {
	// CheckpointTaken tells the source that pos, which its Position
	// returned, is in the durable snapshot of checkpoint (the task
	// acknowledged it). A checkpoint taken may never complete.
	CheckpointTaken(checkpoint int64, pos []byte)
	// CheckpointCompleted tells the source that checkpoint completed.
	// Completions are coalesced: checkpoint is the newest completed one,
	// older ones may never be announced, and it may name a checkpoint
	// this run never took (one the task restored from or older).
	CheckpointCompleted(ctx context.Context, checkpoint int64) error
}

// Transactional is implemented by sinks that take part in the two-phase
// commit of checkpoints. dataflow calls it only when the deployment
// checkpoints (TaskInfo.Checkpointing), always from the task's goroutine,
// and calls Abort once, after Open and before the first Write.
type Transactional interface {
	// PreCommit makes what was written since the previous PreCommit
	// durable but invisible, staged under checkpoint, and names what it
	// staged (recorded in the task manifest).
	PreCommit(ctx context.Context, checkpoint int64) (staged []string, err error)
	// Commit publishes what was staged by the checkpoints ≤ checkpoint,
	// which completed.
	Commit(ctx context.Context, checkpoint int64) error
	// Abort brings the sink's output back to the checkpoint the task
	// starts from (TaskInfo.RestoredCheckpoint, 0 for none): it drops
	// everything staged or published after it, and publishes what it had
	// staged — staged, from its task manifests — in case the completion
	// never reached the sink.
	Abort(ctx context.Context, staged []string) error
}
