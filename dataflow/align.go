package dataflow

// barrier is a checkpoint barrier on its way through the graph: every
// message of a channel before it belongs to the checkpoint, every message
// after it to the next.
type barrier struct {
	id        int64
	savepoint bool
	// triggered is when the trigger reached the source task, in Unix ms.
	triggered int64
	// swapNode, when set, makes the barrier a swap's (a savepoint): the
	// tasks of that node install what PrepareSwap prepared for swapID
	// after their snapshot at this barrier (swap.go).
	swapID   int64
	swapNode string
}

// alignAction tells the task what to do with a message the aligner saw.
type alignAction uint8

const (
	// alignProcess: handle the message as usual.
	alignProcess alignAction = iota
	// alignAbsorbed: the aligner kept it (held back or queued for replay)
	// or dropped it (an old barrier); nothing to do.
	alignAbsorbed
	// alignAborted: a newer barrier came before the current alignment
	// completed, which abandons it; the aligner queued everything for
	// replay. Nothing to do but log Aborted.
	alignAborted
	// alignComplete: every open channel delivered barrier Current: the
	// task snapshots, forwards the barrier, then calls release.
	alignComplete
)

// aligner is the barrier alignment of a task's input channels, a state
// machine without I/O: the task feeds it every message, first those it
// hands back for replay (next), then those of the gate.
//
// Once a channel delivered the barrier being aligned, its later messages
// are held back here until every channel that has not ended delivered it
// too; then the task snapshots, forwards the barrier and replays what was
// held, in the order it came. All channels share one queue, so holding
// back in the task is how a channel "stops being read". A channel that
// ended counts as aligned. A barrier at or below the last one completed or
// aborted is dropped; a newer barrier on a channel that has not delivered
// the current one means that channel's producer abandoned it, so the
// current alignment is aborted (that checkpoint never completes) and the
// newer barrier starts over once the held messages are replayed.
type aligner struct {
	ended []bool
	// floor: barriers ≤ floor were completed or aborted here.
	floor  int64
	active bool
	cur    barrier
	seen   []bool // channels that delivered cur
	held   []message
	replay []message
	// aborted is the id of the last alignment abandoned.
	aborted int64
}

func newAligner(channels int) *aligner {
	return &aligner{ended: make([]bool, channels), seen: make([]bool, channels)}
}

// next returns the next message to replay; those come before the gate's.
func (a *aligner) next() (message, bool) {
	if len(a.replay) == 0 {
		return message{}, false
	}
	m := a.replay[0]
	a.replay[0] = message{} // the batch is not kept alive
	a.replay = a.replay[1:]
	return m, true
}

// admit decides what happens to m.
func (a *aligner) admit(m message) alignAction {
	if a.active && a.seen[m.channel] {
		a.held = append(a.held, m)
		return alignAbsorbed
	}
	if m.kind != msgBarrier {
		return alignProcess
	}
	b := m.barrier
	switch {
	case b.id <= a.floor, a.active && b.id < a.cur.id:
		return alignAbsorbed
	case a.active && b.id > a.cur.id:
		a.aborted, a.floor = a.cur.id, a.cur.id
		a.requeue(append(a.held, m))
		a.active, a.held = false, nil
		return alignAborted
	case !a.active:
		a.active, a.cur = true, *b
		clear(a.seen)
	}
	a.seen[m.channel] = true
	if a.aligned() {
		return alignComplete
	}
	return alignAbsorbed
}

// end records that channel ch ended (its end of input was processed) and
// reports whether that completes the alignment in progress.
func (a *aligner) end(ch int) bool {
	a.ended[ch] = true
	return a.active && a.aligned()
}

func (a *aligner) aligned() bool {
	for i, s := range a.seen {
		if !s && !a.ended[i] {
			return false
		}
	}
	return true
}

// release ends the completed alignment: what was held back is replayed.
func (a *aligner) release() {
	a.floor = a.cur.id
	a.active = false
	a.requeue(a.held)
	a.held = nil
}

// requeue puts ms, which came before the messages still to replay, in
// front of them.
func (a *aligner) requeue(ms []message) {
	if len(ms) == 0 {
		return
	}
	a.replay = append(ms, a.replay...)
}
