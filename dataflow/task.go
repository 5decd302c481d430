package dataflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eddy-stream/eddy/abi/jsonscan"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/state"
)

type msgKind uint8

const (
	msgBatch msgKind = iota
	msgWatermark
	msgIdle // the channel produces nothing for now: ignore its watermark
	msgEOS  // the channel ended: its watermark is +∞
	msgBarrier
	msgProcessingTime // Options.ManualProcessingTime: processing time moves to wm
)

// message is what travels through an input queue.
type message struct {
	kind    msgKind
	channel int
	batch   *stream.Batch
	wm      int64
	barrier *barrier // msgBarrier
}

// stage is one non-source vertex of a chain with the batch it writes into.
type stage struct {
	v   *vertex
	op  stream.Operator
	out *stream.Batch
	// sideOutputs are this vertex's outputs on side ports.
	sideOutputs []*output
}

// processingTimeTick is how often processing-time operators are woken.
const processingTimeTick = 50 * time.Millisecond

// task runs one subtask of a chain in one goroutine: it pulls batches from
// its source or input queue and pushes each through the chain's stages with
// plain calls.
type task struct {
	job     *Job
	chain   *chain
	subtask int
	id      string // TaskSpec.ID
	dep     *deployment
	pool    *rpc.Pool
	metrics *taskMetrics
	// input is the task's input gate; nil for a source task.
	input *inputGate
	// outs[i][s] is the channel to subtask s of chain.outputs[i]'s
	// consumer (only s == subtask on a forward edge).
	outs [][]outlet

	name   string
	log    *slog.Logger // with job, task (name), task_id and subtask attributes; set by run
	source stream.Source
	stages []stage
	// releases says that the head stage keeps nothing of a batch it was
	// given (stream.InputReleaser): a batch that came in is recycled once
	// the chain is done with it.
	releases    bool
	mainOutputs []*output
	rr          []int // round-robin position per output
	stores      []state.Store
	// stateCheck is when the keyed state's size is next compared with
	// Options.StateLimit.
	stateCheck time.Time

	// Output buffers (output_buffer.go): bufs[i] holds what goes on
	// chain.outputs[i] — one buffer, or one per consumer subtask of a keyed
	// output. buffered counts the non-empty ones; flushAt is the earliest
	// deadline among them (zero when none is).
	bufs          [][]outputBuffer
	buffered      int
	flushAt       time.Time
	bufferTimeout time.Duration // 0: every batch goes at once

	// Event time.
	wm        int64   // the task's current watermark
	chanWM    []int64 // per input channel
	chanIdle  []bool
	idleSent  bool
	timed     bool // some stage implements ProcessingTimeOperator
	nextTick  time.Time
	eventTime *jobspec.EventTimeSpec
	maxTs     int64 // source task: the largest event time so far
	// splits is the source when it reads several splits with event
	// time of their own (see runSource).
	splits stream.SplitSource

	// Checkpoints; see task_checkpoint.go.
	cp        *Checkpointing            // nil: the deployment does not checkpoint
	restore   *restorePoint             // nil: the task starts from scratch
	mailbox   *mailbox                  // triggers and completions; nil without cp
	align     *aligner                  // gate tasks
	injected  int64                     // source task: the newest barrier injected
	committed int64                     // the newest checkpoint the sink committed
	sinkTx    stream.Transactional      // the chain's sink, when it stages output
	listener  stream.CheckpointListener // the source, when it listens
	sinkNode  string
	// uploads runs the asynchronous phase of the task's snapshots; nil
	// without cp.
	uploads    *uploads
	alignStart time.Time
	restoredWM int64
	// swaps are the swap slots of the chain's Wasm nodes, by node.
	swaps map[string]*swapSlot
	// procNow is the processing time of a job with ManualProcessingTime,
	// in Unix ms: written by the task's goroutine, read by its guests'
	// processing_time (which may run on a prepared swap's goroutine).
	procNow atomic.Int64
}

func (t *task) info(v *vertex) stream.TaskInfo {
	jobID := t.job.id
	if t.dep != nil && t.dep.JobID != "" {
		jobID = t.dep.JobID
	}
	info := stream.TaskInfo{Tenant: t.job.tenant, Job: t.job.spec.Name, JobID: jobID, Node: v.node.Name, Subtask: t.subtask, Parallelism: v.parallelism, MaxParallelism: t.job.spec.MaxParallelism,
		Checkpointing: t.cp != nil, Logger: t.log, Gate: t.job.opts.Gate}
	if t.job.opts.ManualProcessingTime {
		info.Now = t.procNow.Load
	}
	if t.restore != nil {
		info.RestoredCheckpoint = t.restore.id
	}
	return info
}

// displayName is how errors and logs name the task: its chain's nodes and
// subtask, "enrich→per_card[1]".
func (t *task) displayName() string {
	names := make([]string, len(t.chain.vertices))
	for i, v := range t.chain.vertices {
		names[i] = v.node.Name
	}
	return fmt.Sprintf("%s[%d]", strings.Join(names, "→"), t.subtask)
}

func (t *task) run(ctx context.Context) (err error) {
	t.name = t.displayName()
	t.wm = math.MinInt64
	t.maxTs = math.MinInt64
	t.restoredWM = math.MinInt64
	log := t.job.log.With("task", t.name, "task_id", t.id, "subtask", t.subtask)
	t.log = log
	defer func() {
		inputFailed := false
		if t.input != nil {
			t.input.stop() // remote producers still sending are told so
			if gerr := t.input.failure(); gerr != nil {
				err, inputFailed = gerr, true // the cause; the run's cancellation followed it
			}
		}
		for _, outs := range t.outs {
			for _, o := range outs {
				if o != nil {
					o.abort()
				}
			}
		}
		// Before the stores close: a finished task acknowledges what it
		// captured, a failed or cancelled one drops it.
		t.uploads.stop(err == nil)
		for _, s := range t.swaps {
			s.end() // closes what PrepareSwap left and was never installed
		}
		if cerr := t.close(); cerr != nil && err == nil {
			err = cerr
		}
		if err != nil && (ctx.Err() == nil || inputFailed) {
			log.Error("task failed", "err", err)
		} else if err == nil {
			log.Info("task finished")
		}
		if err != nil {
			err = fmt.Errorf("task %s: %w", t.name, err)
		}
		t.metrics.end.Store(time.Now().UnixNano())
		switch {
		case err == nil:
			t.metrics.setState(TaskFinished)
		case ctx.Err() != nil && !inputFailed && errors.Is(err, ctx.Err()):
			t.metrics.setState(TaskCanceled)
		default:
			failure := err
			t.metrics.err.Store(&failure)
			t.metrics.setState(TaskFailed)
		}
	}()
	if err := t.open(ctx); err != nil {
		return err
	}
	if err := t.openOutputs(ctx); err != nil {
		return err
	}
	if t.cp != nil {
		t.uploads = startUploads(ctx, t)
	}
	t.metrics.setState(TaskRunning)
	if t.restore != nil {
		log.Info("task started", "restored_from_checkpoint", t.restore.id)
	} else {
		log.Info("task started")
	}
	for _, o := range t.chain.outputs {
		if o.port == "" && o.from == t.chain.tail() {
			t.mainOutputs = append(t.mainOutputs, o)
		}
	}
	t.rr = make([]int, len(t.chain.outputs))
	for i := range t.rr {
		t.rr[i] = t.subtask // spread the first batches of each producer
	}
	t.openBuffers()
	if t.restoredWM != math.MinInt64 {
		// Where the checkpoint left event time: the stages see it again
		// (timers it makes due fired before the snapshot), consumers too.
		if err := t.advanceWatermark(ctx, t.restoredWM); err != nil {
			return err
		}
	}
	if t.source != nil {
		err = t.runSource(ctx)
	} else {
		err = t.runGate(ctx)
	}
	if err != nil {
		return err
	}
	if err := t.advanceWatermark(ctx, math.MaxInt64); err != nil {
		return err
	}
	if err := t.finish(ctx); err != nil {
		return err
	}
	if err := t.broadcast(ctx, message{kind: msgEOS}); err != nil {
		return err
	}
	return t.finishOutputs(ctx)
}

// openOutputs creates the task's channels: the input queue of a consumer
// in this deployment, an Exchange stream to one elsewhere. Remote streams
// are opened now, before the first record, so that a consumer that is not
// deployed yet delays the task here (retrying), not in the middle of its
// output.
func (t *task) openOutputs(ctx context.Context) error {
	t.outs = make([][]outlet, len(t.chain.outputs))
	for i, o := range t.chain.outputs {
		t.outs[i] = make([]outlet, o.to.parallelism)
		for s := range t.outs[i] {
			if o.mode == forward && s != t.subtask {
				continue
			}
			cid := o.to.taskID(s)
			if g := t.dep.gates[cid]; g != nil {
				t.outs[i][s] = localOutlet{gate: g}
				continue
			}
			addr := t.dep.Addresses[cid]
			ro := &remoteOutlet{addr: addr, consumer: cid, channel: o.channel(t.subtask), open: &eddyv1.ChannelOpen{
				JobId: t.dep.JobID, Attempt: t.dep.attempt, ProducerTaskId: t.id, ConsumerTaskId: cid,
				Edge: o.edge(), ChannelIndex: uint32(o.channel(t.subtask)),
			}}
			t.outs[i][s] = ro
			conn, err := t.pool.Get(addr)
			if err != nil {
				return mark(fmt.Errorf("output to worker %s: %w", addr, err), ErrChannelLost)
			}
			if err := ro.connect(ctx, conn); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishOutputs waits until every remote consumer confirmed the end of
// its channel: only then has everything the task sent been delivered.
func (t *task) finishOutputs(ctx context.Context) error {
	for _, outs := range t.outs {
		for _, o := range outs {
			if o == nil {
				continue
			}
			if err := o.finish(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *task) open(ctx context.Context) error {
	j := t.job
	for _, v := range t.chain.vertices {
		n := v.node
		info := t.info(v)
		var op stream.Operator
		switch {
		case n.Source != nil:
			src, err := j.opts.Connectors.NewSource(n.Source, j.spec.Dir())
			if err != nil {
				return err
			}
			t.source = src
			t.eventTime = n.EventTime
			if err := src.Open(ctx, info); err != nil {
				return fmt.Errorf("open source %s: %w", n.Name, err)
			}
			if err := t.restoreSource(v); err != nil {
				return err
			}
			if ss, ok := src.(stream.SplitSource); ok && n.EventTime != nil {
				t.splits = ss
			}
			if l, ok := src.(stream.CheckpointListener); ok && t.cp != nil {
				t.listener = l
			}
			continue
		case n.Sink != nil:
			snk, err := j.opts.Connectors.NewSink(n.Sink, j.spec.Dir())
			if err != nil {
				return err
			}
			op = &sinkOperator{sink: snk}
			if tx, ok := snk.(stream.Transactional); ok && t.cp != nil {
				t.sinkTx, t.sinkNode = tx, n.Name
			}
		default:
			var err error
			if op, err = j.newOperator(v); err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			if slot := t.swaps[n.Name]; slot != nil {
				setSwapSlot(op, slot)
			}
		}
		if n.Keyed() {
			st, err := t.openState(v, &info)
			if err != nil {
				_ = op.Close()
				return err
			}
			t.stores = append(t.stores, st)
			if err := t.restoreState(ctx, v, st); err != nil {
				_ = op.Close()
				return err
			}
		}
		st := stage{v: v, op: op, out: stream.NewBatch(j.spec.BatchSize)}
		for _, o := range t.chain.outputs {
			if o.from == v && o.port != "" {
				st.sideOutputs = append(st.sideOutputs, o)
			}
		}
		if _, ok := op.(stream.ProcessingTimeOperator); ok {
			t.timed = true
		}
		if err := op.Open(ctx, info); err != nil {
			_ = op.Close()
			return fmt.Errorf("open %s: %w", n.Name, err)
		}
		t.stages = append(t.stages, st)
	}
	// Only the head stage reads a batch that came in: the stages after
	// it read what the one before emitted, which operators copy.
	t.releases = len(t.stages) > 0 && stream.ReleasesInput(t.stages[0].op)
	if err := t.restoreSink(ctx); err != nil {
		return err
	}
	t.restoredWM = t.restoreWatermark()
	return nil
}

func (t *task) openState(v *vertex, info *stream.TaskInfo) (state.Store, error) {
	backend, err := t.job.stateBackend()
	if err != nil {
		return nil, err
	}
	groups := state.KeyGroupRange(t.subtask, v.parallelism, t.job.spec.MaxParallelism)
	info.KeyGroups = stream.KeyGroupRange(groups)
	scope := state.Scope{Tenant: t.job.tenant, Job: t.job.id, Operator: v.node.Name}
	st, err := backend.OpenTask(scope, t.job.spec.MaxParallelism, groups)
	if err != nil {
		return nil, fmt.Errorf("%s: open state: %w", v.node.Name, err)
	}
	info.State = st
	return st, nil
}

func (t *task) close() error {
	var errs []error
	if t.source != nil {
		errs = append(errs, t.source.Close())
	}
	for _, st := range t.stages {
		errs = append(errs, st.op.Close())
	}
	for _, s := range t.stores {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// runSource pulls batches from the source and derives the task's
// watermark from their event times: the largest timestamp seen −
// max_out_of_orderness − 1 over the subtask, or, for a SplitSource, the
// lowest of that over the splits that are not idle (splitClock). A
// subtask that produced nothing for idle_timeout (every split idle) tells
// its consumers it is idle; its next watermark ends that. What it sends
// waits in the output buffers; while some does, Next runs on a goroutine
// of its own (readSource), so that it leaves on time however long Next
// blocks.
func (t *task) runSource(ctx context.Context) error {
	bs := t.job.spec.BatchSize
	stats := t.chain.head().stats
	var (
		ooo        int64
		idle       time.Duration
		lastRecord = time.Now()
	)
	if et := t.eventTime; et != nil {
		ooo = et.MaxOutOfOrderness.D().Milliseconds()
		idle = et.IdleTimeout.D()
	}
	var field []byte
	if t.eventTime != nil && t.eventTime.Field != "" {
		field = []byte(t.eventTime.Field)
	}
	// Per-split event time starts empty, after a restore too: the
	// restored watermark (t.wm) is the floor, and a split holds the
	// watermark back until it produced or went idle.
	var clock *splitClock
	if t.splits != nil {
		clock = newSplitClock(ooo, idle)
	}
	pending, _ := t.source.(stream.PendingReporter)
	ws, _ := t.source.(stream.WatermarkSource)
	var pts stream.ProcessingTimeSource
	if t.job.opts.ManualProcessingTime {
		pts, _ = t.source.(stream.ProcessingTimeSource)
	}
	progress, _ := t.source.(stream.ProgressReporter)
	// The source batch is reused when a stage consumes it synchronously;
	// when the chain is just the source it is sent downstream, so fresh.
	var reuse *stream.Batch
	if len(t.stages) > 0 {
		reuse = stream.NewBatch(bs)
	}
	var flush flushTimer
	defer flush.stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Between two batches: barriers go in here.
		if err := t.checkMailbox(ctx); err != nil {
			return err
		}
		if err := t.checkStateSize(); err != nil {
			return err
		}
		if err := t.flushDue(ctx, time.Now()); err != nil {
			return err
		}
		b := reuse
		if b == nil {
			b = stream.GetBatch(bs, 0)
		} else {
			b.Reset()
		}
		err, ferr := t.readSource(ctx, &flush, b, bs)
		if ferr != nil {
			return ferr
		}
		if pending != nil {
			if n, ok := pending.PendingRecords(); ok {
				t.metrics.pending.Store(n)
			}
		}
		if progress != nil {
			if done, total, ok := progress.Progress(); ok {
				stats.setProgress(t.subtask, done, total)
			}
		}
		now := time.Now()
		n := b.Len()
		if n > 0 {
			lastRecord = now
			if field != nil {
				if terr := assignTimestamps(b, field); terr != nil {
					return fmt.Errorf("source %s: %w", t.chain.head().node.Name, terr)
				}
			}
			if t.eventTime != nil {
				for i := range b.Records {
					t.maxTs = max(t.maxTs, b.Records[i].Timestamp)
				}
			}
		}
		if clock != nil {
			// Before push: b may go downstream and is read-only there.
			if serr := t.observeSplits(clock, b, now); serr != nil {
				return serr
			}
		}
		if n > 0 {
			if err := t.leaveIdle(ctx); err != nil {
				return err
			}
			stats.Out.Add(int64(n))
			t.metrics.in.Add(int64(n))
			t.metrics.bytesIn.Add(payloadBytes(b))
			if perr := t.push(ctx, b, 0); perr != nil {
				return perr
			}
			t.countLate()
		}
		switch {
		case clock != nil && clock.splits() > 0:
			wm, allIdle := clock.watermark(now)
			if allIdle {
				if !t.idleSent {
					t.idleSent = true
					if err := t.broadcast(ctx, message{kind: msgIdle}); err != nil {
						return err
					}
				}
			} else if wm > t.wm {
				if err := t.advanceWatermark(ctx, wm); err != nil {
					return err
				}
			}
		case n > 0:
			if t.eventTime != nil && t.maxTs != math.MinInt64 {
				if wm := t.maxTs - ooo - 1; wm > t.wm {
					if err := t.advanceWatermark(ctx, wm); err != nil {
						return err
					}
				}
			}
		case idle > 0 && !t.idleSent && now.Sub(lastRecord) >= idle:
			t.idleSent = true
			if err := t.broadcast(ctx, message{kind: msgIdle}); err != nil {
				return err
			}
		}
		if ws != nil {
			if wm, ok := ws.Watermark(); ok && wm > t.wm {
				if err := t.advanceWatermark(ctx, wm); err != nil {
					return err
				}
			}
		}
		if pts != nil {
			if now, ok := pts.ProcessingTime(); ok {
				if err := t.advanceProcessingTime(ctx, now); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("source %s: %w", t.chain.head().node.Name, err)
		}
		if err := t.maybeTick(ctx); err != nil {
			return err
		}
	}
}

// observeSplits hands the event times of the records of b, which the
// source's last Next appended, to clock by split.
func (t *task) observeSplits(clock *splitClock, b *stream.Batch, now time.Time) error {
	n, last := t.splits.Splits()
	if len(last) != b.Len() {
		return fmt.Errorf("source %s: Splits names the split of %d records, Next appended %d", t.chain.head().node.Name, len(last), b.Len())
	}
	clock.grow(n, now)
	for i, s := range last {
		if s < 0 || int(s) >= n {
			return fmt.Errorf("source %s: record of split %d of %d", t.chain.head().node.Name, s, n)
		}
		clock.observe(int(s), b.Records[i].Timestamp, now)
	}
	return nil
}

// assignTimestamps sets each record's event time from a JSON field holding
// milliseconds since the epoch.
func assignTimestamps(b *stream.Batch, field []byte) error {
	for i := range b.Records {
		r := &b.Records[i]
		raw, st := jsonscan.Lookup(r.Value, field)
		if st != jsonscan.Field || jsonscan.KindOf(raw) != jsonscan.Number {
			return fmt.Errorf("event_time: record has no numeric field %q: %.80s", field, r.Value)
		}
		f, ok := jsonscan.ParseNumber(raw)
		if !ok {
			return fmt.Errorf("event_time: field %q is not a number: %s", field, raw)
		}
		r.Timestamp = int64(f)
	}
	return nil
}

func (t *task) runGate(ctx context.Context) error {
	gate := t.input
	open := t.chain.channels
	t.chanWM = make([]int64, open)
	t.chanIdle = make([]bool, open)
	for i := range t.chanWM {
		t.chanWM[i] = math.MinInt64
	}
	t.align = newAligner(open)
	var tick <-chan time.Time
	if t.timed && !t.job.opts.ManualProcessingTime {
		ticker := time.NewTicker(processingTimeTick)
		defer ticker.Stop()
		tick = ticker.C
	}
	var mail <-chan struct{}
	if t.mailbox != nil {
		mail = t.mailbox.signal
	}
	var flush flushTimer
	defer flush.stop()
	for open > 0 {
		m, replayed := t.align.next()
		if !replayed {
			// Waiting here is the task's idle time, until whatever ends
			// the wait.
			t.metrics.idleStart()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-gate.failed:
				return gate.err
			case <-flush.channel(t):
				t.metrics.idleEnd()
				flush.fired()
				if err := t.flushDue(ctx, time.Now()); err != nil {
					return err
				}
				continue
			case now := <-tick:
				t.metrics.idleEnd()
				if err := t.processingTime(ctx, now); err != nil {
					return err
				}
				continue
			case <-mail:
				t.metrics.idleEnd()
				if err := t.readMailbox(ctx); err != nil {
					return err
				}
				continue
			case m = <-gate.queue:
				t.metrics.idleEnd()
			}
		}
		aligning := t.align.active
		switch t.align.admit(m) {
		case alignAbsorbed:
			if !aligning && t.align.active {
				t.alignStart = time.Now()
			}
			continue
		case alignAborted:
			t.job.log.Warn("checkpoint alignment aborted by a newer barrier", "task", t.name, "checkpoint", t.align.aborted, "newer", m.barrier.id)
			continue
		case alignComplete:
			if !aligning {
				t.alignStart = time.Now()
			}
			if err := t.alignedCheckpoint(ctx); err != nil {
				return err
			}
			continue
		}
		switch m.kind {
		case msgBatch:
			t.metrics.in.Add(int64(m.batch.Len()))
			t.metrics.bytesIn.Add(payloadBytes(m.batch))
			if err := t.pushInput(ctx, m.batch, 0, t.chain.inputOf[m.channel]); err != nil {
				return err
			}
			if t.releases {
				m.batch.Recycle() // the task owns it (send), and its head stage kept nothing of it
			}
			t.countLate()
			if err := t.checkStateSize(); err != nil {
				return err
			}
			continue
		case msgWatermark:
			t.chanWM[m.channel] = max(t.chanWM[m.channel], m.wm)
			t.chanIdle[m.channel] = false
		case msgIdle:
			t.chanIdle[m.channel] = true
		case msgProcessingTime:
			if err := t.advanceProcessingTime(ctx, m.wm); err != nil {
				return err
			}
			continue
		case msgEOS:
			t.chanWM[m.channel] = math.MaxInt64
			t.chanIdle[m.channel] = false
			open--
		}
		if err := t.combineWatermarks(ctx); err != nil {
			return err
		}
		if m.kind == msgEOS && t.align.end(m.channel) {
			if err := t.alignedCheckpoint(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// combineWatermarks advances the task's watermark to the minimum over its
// active input channels; when every open channel is idle, the task tells
// its consumers it is idle too.
func (t *task) combineWatermarks(ctx context.Context) error {
	wm, active := int64(math.MaxInt64), false
	for i, w := range t.chanWM {
		if t.chanIdle[i] {
			continue
		}
		active = true
		wm = min(wm, w)
	}
	if !active {
		if !t.idleSent {
			t.idleSent = true
			return t.broadcast(ctx, message{kind: msgIdle})
		}
		return nil
	}
	t.metrics.inWatermark.Store(wm)
	if wm > t.wm && wm != math.MaxInt64 {
		return t.advanceWatermark(ctx, wm)
	}
	return t.leaveIdle(ctx)
}

// payloadBytes is the key and value bytes of b's records: a batch that
// buffers coalesced holds records that point into other batches, so its
// arena does not tell. A loop of two lengths a record, for the metrics.
func payloadBytes(b *stream.Batch) int64 {
	var n int
	for i := range b.Records {
		n += len(b.Records[i].Key) + len(b.Records[i].Value)
	}
	return int64(n)
}

// lateCounter is a stage that drops late records (a window without a
// late_output).
type lateCounter interface{ Dropped() int64 }

// countLate publishes the late records the chain's windows dropped so far.
// Windows count them on the task's goroutine; this copies the sum where
// a scrape can read it, once per batch.
func (t *task) countLate() {
	var n int64
	found := false
	for k := range t.stages {
		if lc, ok := t.stages[k].op.(lateCounter); ok {
			n += lc.Dropped()
			found = true
		}
	}
	if found {
		t.metrics.late.Store(n)
	}
}

// leaveIdle tells the consumers of a task that said it was idle that it
// is active again, before its records, as Flink's active stream status:
// its current watermark, unchanged, makes its channel count again, so that
// other inputs cannot carry a consumer's watermark past its records. (The
// consumer's watermark does not go back: records already behind it are
// late there, as in Flink.)
func (t *task) leaveIdle(ctx context.Context) error {
	if !t.idleSent {
		return nil
	}
	t.idleSent = false
	return t.broadcast(ctx, message{kind: msgWatermark, wm: t.wm})
}

// advanceWatermark hands wm to every stage in chain order — what a stage
// fires flows through the stages after it before they see wm — and then
// downstream. The final +∞ is not sent: end-of-stream implies it.
func (t *task) advanceWatermark(ctx context.Context, wm int64) error {
	if wm <= t.wm {
		return nil
	}
	t.wm = wm
	t.metrics.watermark.Store(wm)
	for k := range t.stages {
		st := &t.stages[k]
		wo, ok := st.op.(stream.WatermarkOperator)
		if !ok {
			continue
		}
		out := stream.NewBatch(t.job.spec.BatchSize)
		if err := wo.ProcessWatermark(ctx, wm, out); err != nil {
			return fmt.Errorf("%s: watermark: %w", st.v.node.Name, err)
		}
		if err := t.emitFrom(ctx, k, out); err != nil {
			return err
		}
	}
	if wm == math.MaxInt64 {
		return nil
	}
	t.idleSent = false
	return t.broadcast(ctx, message{kind: msgWatermark, wm: wm})
}

func (t *task) maybeTick(ctx context.Context) error {
	if !t.timed || t.job.opts.ManualProcessingTime {
		return nil
	}
	now := time.Now()
	if now.Before(t.nextTick) {
		return nil
	}
	t.nextTick = now.Add(processingTimeTick)
	return t.processingTime(ctx, now)
}

// advanceProcessingTime moves a ManualProcessingTime job's processing
// time to now (a value not above it changes nothing), fires the timers due
// in the chain's stages and passes the advance on to the consumers, after
// what the stages emitted. With several inputs each advance is taken as it
// comes: the harness's jobs have one source.
func (t *task) advanceProcessingTime(ctx context.Context, now int64) error {
	if now <= t.procNow.Load() {
		return nil
	}
	t.procNow.Store(now)
	if t.timed {
		if err := t.processingTime(ctx, time.UnixMilli(now)); err != nil {
			return err
		}
	}
	return t.broadcast(ctx, message{kind: msgProcessingTime, wm: now})
}

func (t *task) processingTime(ctx context.Context, now time.Time) error {
	for k := range t.stages {
		st := &t.stages[k]
		po, ok := st.op.(stream.ProcessingTimeOperator)
		if !ok {
			continue
		}
		out := stream.NewBatch(t.job.spec.BatchSize)
		if err := po.OnProcessingTime(ctx, now.UnixMilli(), out); err != nil {
			return fmt.Errorf("%s: processing time: %w", st.v.node.Name, err)
		}
		if err := t.emitFrom(ctx, k, out); err != nil {
			return err
		}
	}
	return nil
}

// emitFrom routes out, produced by stage k outside Process (at a
// watermark, a timer or the end), to its side outputs and through the
// stages after k.
func (t *task) emitFrom(ctx context.Context, k int, out *stream.Batch) error {
	st := &t.stages[k]
	st.v.stats.Out.Add(int64(out.Len()))
	if err := t.routeSides(ctx, st, out); err != nil {
		return err
	}
	if out.Len() == 0 {
		return nil
	}
	return t.push(ctx, out, k+1)
}

// push runs b through stages[from:] and sends what comes out of the last
// one downstream.
func (t *task) push(ctx context.Context, b *stream.Batch, from int) error {
	return t.pushInput(ctx, b, from, 0)
}

// pushInput is push of a batch that came in on input of the stage from,
// which a two-input operator (a join) is told.
func (t *task) pushInput(ctx context.Context, b *stream.Batch, from, input int) error {
	for k := from; k < len(t.stages); k++ {
		st := &t.stages[k]
		st.v.stats.In.Add(int64(b.Len()))
		if _, sink := st.op.(*sinkOperator); sink {
			t.metrics.out.Add(int64(b.Len()))
			t.metrics.bytesOut.Add(payloadBytes(b))
		}
		st.out.Reset()
		var err error
		if two, ok := st.op.(stream.TwoInputOperator); ok && k == from {
			err = two.ProcessInput(ctx, input, b, st.out)
		} else {
			err = st.op.Process(ctx, b, st.out)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", st.v.node.Name, err)
		}
		st.v.stats.Out.Add(int64(st.out.Len()))
		if err := t.routeSides(ctx, st, st.out); err != nil {
			return err
		}
		b = st.out
		if b.Len() == 0 {
			return nil
		}
	}
	if len(t.mainOutputs) == 0 {
		return nil
	}
	return t.send(ctx, t.mainOutputs, b)
}

func (t *task) routeSides(ctx context.Context, st *stage, b *stream.Batch) error {
	sides := b.Sides()
	for port, side := range sides {
		if side.Len() == 0 {
			continue
		}
		var outs []*output
		for _, o := range st.sideOutputs {
			if o.port == port {
				outs = append(outs, o)
			}
		}
		delete(sides, port)
		if len(outs) == 0 {
			continue // nobody reads this side output: dropped, as in Flink
		}
		if err := t.send(ctx, outs, side); err != nil {
			return err
		}
	}
	return nil
}

// owned returns the stage slot holding b, if b is a batch a stage reuses.
func (t *task) owned(b *stream.Batch) **stream.Batch {
	for k := range t.stages {
		if t.stages[k].out == b {
			return &t.stages[k].out
		}
	}
	return nil
}

// send hands b to outs: to the same subtask on a forward edge,
// round-robin by batch on a rebalance edge, by key group on a keyed edge,
// through the outputs' buffers (output_buffer.go). Nothing else refers to
// b here: it is a stage's output, a batch a stage emitted at a timer, a
// watermark or the end, a side output, or a source's batch in a chain
// without stages. A batch goes on whole to one consumer, which then owns
// it, or its records are copied into the buffers; either way every batch
// that leaves a task is its receiver's alone, and the receiver may
// recycle it (stream.Batch.Recycle). A stage whose output went on whole
// gets another for its next; one whose records were copied keeps its own.
func (t *task) send(ctx context.Context, outs []*output, b *stream.Batch) error {
	bytes := payloadBytes(b)
	slot := t.owned(b)
	for range outs {
		t.metrics.out.Add(int64(b.Len()))
		t.metrics.bytesOut.Add(bytes)
	}
	if len(outs) == 1 && outs[0].mode != hashKey {
		taken, err := t.buffer(ctx, t.outputIndex(outs[0]), b)
		switch {
		case taken && slot != nil:
			// The next batch of the stage will likely be about as large:
			// room for as many records and one arena for as many bytes
			// (and an eighth more), rather than room for a full batch of
			// records (20 KB for 256, where a filter passes a few) and
			// Add's chain of doubling arenas.
			n := min(t.job.spec.BatchSize, b.Len()+b.Len()/8+8)
			*slot = stream.GetBatch(n, int(bytes+bytes/8))
		case !taken && slot == nil:
			b.Recycle()
		}
		return err
	}
	for _, o := range outs {
		idx := t.outputIndex(o)
		var err error
		if o.mode == hashKey {
			err = t.partition(ctx, idx, o, b)
		} else {
			err = t.copyInto(ctx, idx, b.Records)
		}
		if err != nil {
			return err
		}
	}
	if slot == nil {
		b.Recycle()
	}
	return nil
}

// partition copies each record of b into the buffer of the consumer
// subtask that owns its key group. The key_by key becomes the record's
// key, which is what keyed operators and state see.
func (t *task) partition(ctx context.Context, idx int, o *output, b *stream.Batch) error {
	keyBy := o.keyBy
	maxP := t.job.spec.MaxParallelism
	field := []byte(keyBy)
	for i := range b.Records {
		r := b.Records[i]
		if keyBy != jobspec.RecordKey {
			k, err := keyOf(r.Value, field)
			if err != nil {
				return fmt.Errorf("key_by %s: %w", keyBy, err)
			}
			r.Key = k
		}
		target := state.SubtaskFor(state.KeyGroup(r.Key, maxP), o.to.parallelism, maxP)
		if err := t.addRecord(ctx, idx, target, &r); err != nil {
			return err
		}
	}
	if t.bufferTimeout <= 0 {
		return t.flushOutput(ctx, idx)
	}
	return nil
}

// keyOf returns the key_by field of a JSON value: a string's content, or
// the raw text of any other value.
func keyOf(value, field []byte) ([]byte, error) {
	raw, st := jsonscan.Lookup(value, field)
	if st != jsonscan.Field {
		return nil, fmt.Errorf("record has no field %q: %.80s", field, value)
	}
	if jsonscan.KindOf(raw) == jsonscan.String {
		inner := raw[1 : len(raw)-1]
		for _, c := range inner {
			if c == '\\' {
				return jsonscan.AppendUnquote(nil, raw), nil
			}
		}
		return inner, nil
	}
	return raw, nil
}

func (t *task) outputIndex(o *output) int {
	for i, x := range t.chain.outputs {
		if x == o {
			return i
		}
	}
	return 0
}

// finish flushes every stage in chain order: what a stage emits at the end
// still flows through the stages after it.
func (t *task) finish(ctx context.Context) error {
	for k := range t.stages {
		st := &t.stages[k]
		out := stream.NewBatch(t.job.spec.BatchSize)
		if err := st.op.Finish(ctx, out); err != nil {
			return fmt.Errorf("%s: finish: %w", st.v.node.Name, err)
		}
		if err := t.emitFrom(ctx, k, out); err != nil {
			return err
		}
	}
	return nil
}

// broadcast sends a control message to every consumer subtask of every
// output, after the records the output buffers hold: it never overtakes
// them.
func (t *task) broadcast(ctx context.Context, m message) error {
	for i, o := range t.chain.outputs {
		if err := t.flushOutput(ctx, i); err != nil {
			return err
		}
		m.channel = o.channel(t.subtask)
		for _, target := range t.outs[i] {
			if target == nil {
				continue // forward: another subtask's
			}
			if err := target.deliver(ctx, m, t.metrics); err != nil {
				return err
			}
		}
	}
	return nil
}

// stateCheckInterval is how often a task with a state limit measures its
// keyed state: often enough that a job over its quota fails long before
// it fills a disk, rarely enough that measuring costs nothing per record.
const stateCheckInterval = time.Second

// checkStateSize fails the task when its keyed state alone exceeds the
// job's limit (the whole job's is summed by the leader at checkpoints).
func (t *task) checkStateSize() error {
	limit := t.job.opts.StateLimit
	if limit <= 0 || len(t.stores) == 0 {
		return nil
	}
	now := time.Now()
	if now.Before(t.stateCheck) {
		return nil
	}
	t.stateCheck = now.Add(stateCheckInterval)
	var total int64
	for _, st := range t.stores {
		sz, ok := st.(interface{ Size() (int64, error) })
		if !ok {
			return nil
		}
		n, err := sz.Size()
		if err != nil {
			return fmt.Errorf("measure keyed state: %w", err)
		}
		total += n
	}
	if total > limit {
		// The task's name prefixes it where the failure is reported.
		return fmt.Errorf("keyed state %d bytes exceeds the job's limit state_bytes=%d (its tenant's quota)", total, limit)
	}
	return nil
}
