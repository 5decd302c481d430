package dataflow

import (
	"context"
	"time"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

// Output buffers: the records a task sends downstream wait in a batch of
// their output until it holds batch_size records or buffer_timeout has
// passed since its first record, whichever comes first, as Flink's output
// flusher. Batches that cross a queue or the network are then full at high
// rates, and a record of a low-rate stream still leaves within the
// timeout. Every buffer lives in the task's goroutine: the task flushes
// them between two messages (runGate), and while its source's Next blocks
// (readSource). A control message — watermark, idleness, barrier, end of
// stream — first flushes what its output holds, so it never overtakes a
// record sent before it.

// outputBuffer is the batch in the making of one output of a task (forward
// and rebalance edges) or of one consumer subtask of a keyed output.
type outputBuffer struct {
	batch *stream.Batch // nil while empty
	since time.Time     // when its first record came
	// bytes is the payload of the batch it sent last: the arena a batch
	// it fills by copy starts with, so that one whose consumer does not
	// recycle it (a keyed operator) is not grown through Add's chain of
	// doubling arenas.
	bytes int
}

// openBuffers sizes the task's output buffers after its outputs.
func (t *task) openBuffers() {
	t.bufferTimeout = t.job.spec.BufferTimeout.D()
	t.bufs = make([][]outputBuffer, len(t.chain.outputs))
	for i, o := range t.chain.outputs {
		n := 1
		if o.mode == hashKey {
			n = o.to.parallelism
		}
		t.bufs[i] = make([]outputBuffer, n)
	}
}

// buffer adds b, which nothing else refers to, to the buffer of output
// idx (a forward or rebalance edge) and sends the buffer each time it is
// full. It returns whether it took b itself — sent it on, or made it the
// buffer — and the caller must then leave b alone; otherwise b is the
// caller's again. What waits is filled from b's first records, copied;
// the rest of b then goes on as it is (no timeout, or a full batch) or
// becomes the buffer, its records moved to the front of b without
// copying their bytes. A stage's batch of nearly batch_size records (a
// projection, a filter that passes most) is so handed on with a few of
// its records copied, and every batch that leaves is full but the last
// before a timeout or a control message.
func (t *task) buffer(ctx context.Context, idx int, b *stream.Batch) (bool, error) {
	size := t.job.spec.BatchSize
	buf := &t.bufs[idx][0]
	if buf.batch != nil {
		k := min(size-buf.batch.Len(), b.Len())
		for i := range k {
			buf.batch.AddRecord(&b.Records[i])
		}
		if buf.batch.Len() >= size {
			if err := t.flushBuffer(ctx, idx, 0); err != nil {
				return false, err
			}
		}
		if k == b.Len() {
			return false, nil
		}
		n := copy(b.Records, b.Records[k:])
		clear(b.Records[n:])
		b.Records = b.Records[:n]
	}
	if b.Len() == 0 {
		return false, nil
	}
	if t.bufferTimeout <= 0 || b.Len() >= size {
		return true, t.deliverBatch(ctx, idx, 0, b)
	}
	if cap(b.Records) < size {
		// Too small to fill without growing: a filter's few records.
		return false, t.copyInto(ctx, idx, b.Records)
	}
	t.startBuffer(buf, b)
	return true, nil
}

// copyInto copies recs into the buffer of output idx (a forward or
// rebalance edge), sending it each time it is full, and at once with no
// timeout.
func (t *task) copyInto(ctx context.Context, idx int, recs []stream.Record) error {
	for i := range recs {
		if err := t.addRecord(ctx, idx, 0, &recs[i]); err != nil {
			return err
		}
	}
	if t.bufferTimeout <= 0 {
		return t.flushOutput(ctx, idx)
	}
	return nil
}

// addRecord copies r into buffer slot of output idx, and sends the
// buffer when it is full.
func (t *task) addRecord(ctx context.Context, idx, slot int, r *stream.Record) error {
	buf := &t.bufs[idx][slot]
	if buf.batch == nil {
		t.startBuffer(buf, stream.GetBatch(t.job.spec.BatchSize, buf.bytes+buf.bytes/8))
	}
	buf.batch.AddRecord(r)
	if buf.batch.Len() >= t.job.spec.BatchSize {
		return t.flushBuffer(ctx, idx, slot)
	}
	return nil
}

// startBuffer makes b the batch of the empty buffer buf.
func (t *task) startBuffer(buf *outputBuffer, b *stream.Batch) {
	buf.batch = b
	buf.since = time.Now()
	t.buffered++
	t.armFlush(buf.since.Add(t.bufferTimeout))
}

// deliverBatch sends b on output idx: to the same subtask on a forward
// edge, round-robin by batch on a rebalance edge, to subtask slot on a
// keyed edge. The receiver owns b from here on.
func (t *task) deliverBatch(ctx context.Context, idx, slot int, b *stream.Batch) error {
	o := t.chain.outputs[idx]
	target := slot
	switch o.mode {
	case forward:
		target = t.subtask
	case rebalance:
		target = t.rr[idx] % o.to.parallelism
		t.rr[idx]++
	}
	return t.outs[idx][target].deliver(ctx, message{kind: msgBatch, channel: o.channel(t.subtask), batch: b}, t.metrics)
}

// flushBuffer sends what buffer slot of output idx holds, if anything.
func (t *task) flushBuffer(ctx context.Context, idx, slot int) error {
	buf := &t.bufs[idx][slot]
	b := buf.batch
	if b == nil {
		return nil
	}
	buf.batch = nil
	buf.bytes = int(payloadBytes(b))
	t.buffered--
	if t.buffered == 0 {
		t.flushAt = time.Time{}
	}
	return t.deliverBatch(ctx, idx, slot, b)
}

// flushOutput sends every buffer of output idx.
func (t *task) flushOutput(ctx context.Context, idx int) error {
	for slot := range t.bufs[idx] {
		if err := t.flushBuffer(ctx, idx, slot); err != nil {
			return err
		}
	}
	return nil
}

// flushDue sends the buffers whose first record is buffer_timeout old at
// now, and sets flushAt to the deadline of the earliest one left.
func (t *task) flushDue(ctx context.Context, now time.Time) error {
	if t.buffered == 0 || now.Before(t.flushAt) {
		return nil
	}
	t.flushAt = time.Time{}
	for idx := range t.bufs {
		for slot := range t.bufs[idx] {
			buf := &t.bufs[idx][slot]
			if buf.batch == nil {
				continue
			}
			if due := buf.since.Add(t.bufferTimeout); now.Before(due) {
				t.armFlush(due)
				continue
			}
			if err := t.flushBuffer(ctx, idx, slot); err != nil {
				return err
			}
		}
	}
	return nil
}

// armFlush makes deadline the next flush if it is earlier than the one
// set. A flushAt whose buffer went out full is left in place: flushDue
// finds nothing due then and moves it on.
func (t *task) armFlush(deadline time.Time) {
	if t.flushAt.IsZero() || deadline.Before(t.flushAt) {
		t.flushAt = deadline
	}
}

// flushTimer is a timer that fires at the task's next flush; it is reset
// only when that deadline changes.
type flushTimer struct {
	timer *time.Timer
	at    time.Time
}

// channel returns the channel that delivers the task's next flush, nil
// when nothing is buffered.
func (f *flushTimer) channel(t *task) <-chan time.Time {
	if t.buffered == 0 {
		return nil
	}
	if !t.flushAt.Equal(f.at) {
		f.at = t.flushAt
		d := time.Until(f.at)
		if f.timer == nil {
			f.timer = time.NewTimer(d)
		} else {
			f.timer.Reset(d)
		}
	}
	return f.timer.C
}

// fired is called after the timer's channel delivered.
func (f *flushTimer) fired() { f.at = time.Time{} }

func (f *flushTimer) stop() {
	if f.timer != nil {
		f.timer.Stop()
	}
}

// readSource calls the source's Next. With records waiting in the output
// buffers, Next runs on a goroutine of its own while the task flushes them
// on time, since Next may block for long (a Kafka poll, a paced
// generator): a low-rate stream's records then leave within buffer_timeout
// instead of waiting for the next ones. The task waits for that Next
// before it touches the source again, so the source is still used by one
// goroutine at a time. flushErr is a failure to send; Next's own error is
// nextErr.
func (t *task) readSource(ctx context.Context, timer *flushTimer, b *stream.Batch, limit int) (nextErr, flushErr error) {
	if t.buffered == 0 {
		return t.source.Next(ctx, b, limit), nil
	}
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- t.source.Next(readCtx, b, limit) }()
	for {
		select {
		case err := <-done:
			return err, nil
		case <-timer.channel(t):
			timer.fired()
			if err := t.flushDue(ctx, time.Now()); err != nil {
				cancel() // Next must not outlive the task's use of the source
				<-done
				return nil, err
			}
		}
	}
}
