package dataflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/storage"
)

// Checkpointing is set on a Deployment to make it checkpoint (aligned
// checkpoints, docs/rfcs/2026-11-30-checkpoints.md). Triggers and
// completions reach the running deployment through Running.Trigger and
// Running.Complete.
type Checkpointing struct {
	// Store is the job's checkpoint storage.
	Store storage.Store
	// Prefix is the job's root in Store (checkpoint.JobRoot): task
	// manifests go to checkpoint.TaskManifestKey under it, state files to
	// its checkpoint.SharedDir.
	Prefix string
	// Ack is called once a task's snapshot of a checkpoint is durable,
	// from the goroutine that uploads that task's snapshots (one per
	// task, in checkpoint order), and so possibly concurrently for
	// different tasks. The task forwarded the barrier long before, but it
	// must not block for long: the task's next snapshots wait for it.
	// nil drops acknowledgements.
	Ack func(Ack)
	// Restore, when not nil, is the checkpoint the deployment starts from
	// (checkpoint.ReadManifest reads one).
	Restore *checkpoint.Manifest
}

func (c *Checkpointing) validate() error {
	if c.Store == nil {
		return errors.New("checkpointing without a Store")
	}
	if err := storage.ValidateKey(c.Prefix); err != nil {
		return fmt.Errorf("checkpoint prefix: %w", err)
	}
	if r := c.Restore; r != nil {
		if r.Version != checkpoint.Version {
			return fmt.Errorf("checkpoint %d: manifest version %d, want %d", r.Checkpoint, r.Version, checkpoint.Version)
		}
		if r.Checkpoint <= 0 {
			return fmt.Errorf("restore: checkpoint id %d, want > 0", r.Checkpoint)
		}
	}
	return nil
}

// Trigger asks the source tasks of a deployment to start checkpoint ID.
type Trigger struct {
	ID        int64
	Savepoint bool
	// SwapNode, when set, makes the checkpoint swap SwapID's savepoint
	// (Savepoint is implied): at its barrier, the tasks of SwapNode
	// install what Running.PrepareSwap prepared for SwapID.
	SwapID   int64
	SwapNode string
}

// Ack reports that a task's snapshot of a checkpoint is durable.
type Ack struct {
	CheckpointID int64
	Task         string // TaskSpec.ID
	Manifest     string // key of the task manifest in Checkpointing.Store
	// FullSize is the bytes of state files the snapshot references,
	// Incremental those of them the task's previous snapshot in this run
	// did not reference (what this checkpoint added).
	FullSize    int64
	Incremental int64
	// Duration is the time from the checkpoint's first barrier reaching the
	// task (its trigger, for a source task) to the acknowledgement:
	// alignment and snapshot.
	Duration time.Duration
	// SwapPause, for a task of a swap's node at the swap's savepoint, is
	// the time from the checkpoint's first barrier reaching the task to
	// the new instance installed: alignment, capture and install, during
	// which the node processed nothing. 0 for other tasks.
	SwapPause time.Duration
}

// restorePoint is a checkpoint read for a deployment: every task
// manifest it lists, shared by the deployment's tasks.
type restorePoint struct {
	id        int64
	manifests []*checkpoint.TaskManifest // in task id order of the checkpoint manifest
	// prefix is the root the checkpoint's state files are under: the one
	// its task manifests are under (checkpoint.RootOf), which is the job's
	// own for a checkpoint and the savepoint's directory for a
	// self-contained savepoint.
	prefix string
}

// loadRestorePoint reads every task manifest of cp.Restore and checks the
// checkpoint against the job.
func (j *Job) loadRestorePoint(ctx context.Context, cp *Checkpointing) (*restorePoint, error) {
	m := cp.Restore
	incompatible := func(format string, args ...any) error {
		return mark(fmt.Errorf("job %s: checkpoint %d %s", j.spec.Name, m.Checkpoint, fmt.Sprintf(format, args...)), checkpoint.ErrIncompatible)
	}
	if m.MaxParallelism != j.spec.MaxParallelism {
		return nil, incompatible("was taken with max_parallelism %d, not %d: key groups would not match", m.MaxParallelism, j.spec.MaxParallelism)
	}
	c, err := checkpoint.ReadContents(ctx, cp.Store, m)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("job %s: %w", j.spec.Name, &checkpoint.RestoreError{Checkpoint: m.Checkpoint, Err: err})
	}
	rp := &restorePoint{id: m.Checkpoint, prefix: c.Root}
	for _, t := range c.Tasks {
		rp.manifests = append(rp.manifests, t.Manifest)
	}
	// Sources resume where their subtask stopped: that needs the same
	// split of the input.
	for _, v := range j.vertices {
		if v.node.Source == nil {
			continue
		}
		for _, tm := range rp.manifests {
			if s := tm.Source; s != nil && s.Node == v.node.Name && s.Parallelism != v.parallelism {
				return nil, incompatible("was taken with source %s at parallelism %d, not %d", v.node.Name, s.Parallelism, v.parallelism)
			}
		}
	}
	return rp, nil
}
