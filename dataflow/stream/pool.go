package stream

import "sync"

// Batch reuse. Every batch a task sends downstream used to be a new one
// (its records and the arena of their bytes), dropped when the consumer
// was done: at a million records a second that is about 300 bytes a record
// for the garbage collector, which took a fifth of a pass-through query's
// CPU (Nexmark q0, measured with GOGC=400). A batch whose consumer is done
// with it now goes back to a pool, and the next batch some task needs
// comes out of it.
//
// Who may recycle a batch is a matter of ownership (package dataflow:
// every batch that leaves a task is its receiver's alone, and the receiver
// recycles it when the operator or sink that read it says it keeps no
// reference to it, InputReleaser). Recycling a batch something still reads would
// hand its bytes to another writer: built with -tags invariants, Recycle
// overwrites what the batch held, so that such a reader sees garbage in
// tests instead of quietly reading another batch's records.

var batchPool sync.Pool

// Batches beyond these bounds (a rare huge one) are left to the
// collector: the pool keeps only what a task would ask for again.
const (
	maxPooledRecords = 1 << 16
	maxPooledArena   = 8 << 20
)

// GetBatch returns an empty batch with room for n records and bytes bytes
// of keys and values in one arena, as NewBatchSized does, reusing a
// recycled batch when there is one.
func GetBatch(n, bytes int) *Batch {
	b, _ := batchPool.Get().(*Batch)
	if b == nil {
		return NewBatchSized(n, bytes)
	}
	if cap(b.Records) < n {
		b.Records = make([]Record, 0, n)
	}
	if cap(b.arena) < bytes {
		b.arena = make([]byte, 0, bytes)
	}
	return b
}

// Recycle hands b back for GetBatch to reuse. The caller promises that
// nothing refers to b any more: not b itself, not its Records, not the
// bytes of its arena (records other batches took from b without copying
// them — AddOwned — are such references). The bytes b's records borrowed
// from other batches are not b's and are not reused.
func (b *Batch) Recycle() {
	if b == nil || cap(b.Records) > maxPooledRecords || cap(b.arena) > maxPooledArena {
		return
	}
	if invariants {
		poison(b)
	}
	b.Reset()
	batchPool.Put(b)
}

// poison overwrites the bytes of b's arena (Reset then clears its
// records).
func poison(b *Batch) {
	a := b.arena[:cap(b.arena)]
	for i := range a {
		a[i] = 0xee
	}
}

// InputReleaser is implemented by an operator or sink that keeps no
// reference to the batch it was given — its records, keys, values or
// headers — once Process (a sink's Write) has returned, and passes none of
// them on in what it emits (it copies what it outputs). The runtime may
// then reuse the input batch for another. ReleasesInput may depend on the
// instance's configuration; it is asked once, after Open.
type InputReleaser interface {
	ReleasesInput() bool
}

// ReleasesInput says whether op (an Operator or a Sink) implements
// InputReleaser and releases its input.
func ReleasesInput(op any) bool {
	r, ok := op.(InputReleaser)
	return ok && r.ReleasesInput()
}
