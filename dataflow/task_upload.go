package dataflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/storage"
)

// maxUploads bounds a task's snapshots that are captured but not yet
// durable: one uploading, one waiting behind it. A barrier that finds
// both taken waits, and the task with it, until the older upload ended:
// storage slower than the checkpoint interval then holds the stream back,
// as synchronous snapshots did, instead of piling captures up on local
// disk. (The coordinator has one checkpoint in flight, so a second one
// arrives only once the first completed, timed out or failed.)
const maxUploads = 2

// pendingSnapshot is a task's snapshot of one checkpoint between its
// capture at the barrier and its acknowledgement.
type pendingSnapshot struct {
	id    int64
	start time.Time     // the checkpoint's first barrier reached the task
	sync  time.Duration // the capture's, the task's pause
	// swapPause: Ack.SwapPause.
	swapPause time.Duration
	// manifest is complete but for the state of keyed nodes, which the
	// upload fills in. Nothing in it is shared with the task.
	manifest checkpoint.TaskManifest
	states   []nodeCapture // the keyed nodes, in chain order
}

type nodeCapture struct {
	node    string
	capture stateCapture
}

// discard removes the local files of the captures not uploaded yet.
func (s *pendingSnapshot) discard() {
	for _, n := range s.states {
		n.capture.discard()
	}
	s.states = nil
}

// uploads is the asynchronous phase of a task's snapshots, as in Flink: a
// goroutine of the task's that uploads the captured state, writes the task
// manifest and acknowledges, while the task goes on processing. It takes
// one snapshot at a time, in checkpoint order, so that acknowledgements
// follow the checkpoints and each snapshot's incremental size is measured
// against the one before it.
//
// The task's goroutine calls reserve, release, start and stop; the
// goroutine calls Checkpointing.Ack and, for a source that listens,
// posts the checkpoint taken to the task's mailbox: sources, sinks and
// operators are only ever called from the task's goroutine.
type uploads struct {
	store  storage.Store
	prefix string
	ack    func(Ack)
	taken  func(id int64, pos []byte) // nil unless the task's source listens
	log    *slog.Logger

	ctx    context.Context // ends when the task stops without finishing
	cancel context.CancelFunc
	// slots holds a token for each snapshot from its capture to the end
	// of its upload; queue never blocks, since slots bound it.
	slots chan struct{}
	queue chan *pendingSnapshot
	done  chan struct{} // closed when the goroutine returned

	// prevFiles are the state files of the previous snapshot this run
	// uploaded, to tell the incremental size. The goroutine's own.
	prevFiles map[string]bool
}

// startUploads starts the uploads of task t, under ctx, the task's run.
func startUploads(ctx context.Context, t *task) *uploads {
	var taken func(int64, []byte)
	if t.listener != nil {
		taken = t.mailbox.taken
	}
	return newUploads(ctx, t.cp.Store, t.cp.Prefix, t.cp.Ack, taken, t.job.log.With("task", t.name))
}

func newUploads(ctx context.Context, store storage.Store, prefix string, ack func(Ack), taken func(int64, []byte), log *slog.Logger) *uploads {
	u := &uploads{
		store:  store,
		prefix: prefix,
		ack:    ack,
		taken:  taken,
		log:    log,
		slots:  make(chan struct{}, maxUploads),
		queue:  make(chan *pendingSnapshot, maxUploads),
		done:   make(chan struct{}),
	}
	u.ctx, u.cancel = context.WithCancel(ctx)
	go u.run()
	return u
}

// reserve waits for room for one more snapshot (see maxUploads).
func (u *uploads) reserve(ctx context.Context, id int64) error {
	select {
	case u.slots <- struct{}{}:
		return nil
	default:
	}
	u.log.Debug("checkpoint waits for the upload of an earlier one", "checkpoint", id)
	select {
	case u.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives back a reservation that no snapshot came of.
func (u *uploads) release() { <-u.slots }

// start hands a captured snapshot, which holds a reservation, to the
// goroutine.
func (u *uploads) start(s *pendingSnapshot) { u.queue <- s }

// stop ends the uploads when the task ends. A task that finished (its
// input ended) waits for the uploads in flight, which acknowledge as
// usual; any other cancels them. Either way the goroutine has returned
// when stop does, and no capture is left on local disk. nil is stopped.
func (u *uploads) stop(finished bool) {
	if u == nil {
		return
	}
	if !finished {
		u.cancel()
	}
	close(u.queue)
	<-u.done
	u.cancel()
}

func (u *uploads) run() {
	defer close(u.done)
	for s := range u.queue {
		u.upload(s)
		<-u.slots
	}
}

// upload makes s durable and acknowledges it. A failure declines the
// checkpoint, as a failed snapshot always did: logged, not acknowledged
// (the checkpoint never completes), and the task goes on.
func (u *uploads) upload(s *pendingSnapshot) {
	if u.ctx.Err() != nil {
		s.discard()
		return
	}
	ack, err := u.write(s)
	switch {
	case err == nil:
		if u.taken != nil && s.manifest.Source != nil {
			// Before the ack: so the task hears of it before the
			// checkpoint can complete.
			u.taken(s.id, s.manifest.Source.Position)
		}
		u.log.Debug("checkpoint acknowledged", "checkpoint", s.id, "duration", ack.Duration, "sync_duration", s.sync, "state_bytes", ack.FullSize)
		if u.ack != nil {
			u.ack(ack)
		}
	case u.ctx.Err() != nil:
		u.log.Debug("checkpoint upload canceled", "checkpoint", s.id, "err", err)
	default:
		u.log.Warn("checkpoint declined", "checkpoint", s.id, "err", err)
	}
}

// write uploads the state captures of s and then its task manifest.
func (u *uploads) write(s *pendingSnapshot) (Ack, error) {
	defer s.discard() // the captures a failure left
	m := &s.manifest
	ack := Ack{CheckpointID: s.id, Task: m.Task, Manifest: checkpoint.TaskManifestKey(u.prefix, s.id, m.Task)}
	files := map[string]bool{}
	for len(s.states) > 0 {
		n := s.states[0]
		s.states = s.states[1:]
		raw, err := n.capture.upload(u.ctx, u.store, u.prefix)
		if err != nil {
			return Ack{}, fmt.Errorf("checkpoint %d: state of %s: %w", s.id, n.node, err)
		}
		m.Nodes[n.node] = checkpoint.NodeSnapshot{State: raw}
		for key, size := range snapshotFiles(raw) {
			if files[key] {
				continue
			}
			files[key] = true
			ack.FullSize += size
			if !u.prevFiles[key] {
				ack.Incremental += size
			}
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return Ack{}, err
	}
	if err := u.store.Put(u.ctx, ack.Manifest, bytes.NewReader(data), int64(len(data))); err != nil {
		return Ack{}, fmt.Errorf("checkpoint %d: write task manifest: %w", s.id, err)
	}
	u.prevFiles = files
	ack.Duration = time.Since(s.start)
	ack.SwapPause = s.swapPause
	return ack, nil
}
