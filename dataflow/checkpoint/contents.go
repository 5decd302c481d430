package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/eddy-stream/eddy/storage"
)

// Contents is a checkpoint (or savepoint) read from storage: every task
// manifest its manifest lists and the state files they reference. It is
// what a restore starts from, what the leader keeps while the checkpoint is
// retained, and what a savepoint copies.
type Contents struct {
	Manifest *Manifest
	// Root is the root every task manifest is under (RootOf): the job's
	// for a checkpoint, the savepoint's directory for a savepoint. State
	// files are under it.
	Root string
	// Tasks are the task manifests, in task id order.
	Tasks []Task
	// StateFiles are the state files the task manifests reference, each
	// once, in key order.
	StateFiles []StateFile
}

// Task is one task manifest of a checkpoint.
type Task struct {
	ID       string // task id, the key of Manifest.Tasks
	Key      string // the task manifest's key in storage
	Manifest *TaskManifest
}

// Keys returns the key in storage of every object the checkpoint
// references, but the checkpoint manifest itself: task manifests, then
// state files.
func (c *Contents) Keys() []string {
	keys := make([]string, 0, len(c.Tasks)+len(c.StateFiles))
	for _, t := range c.Tasks {
		keys = append(keys, t.Key)
	}
	for _, f := range c.StateFiles {
		keys = append(keys, StateFileKey(c.Root, f.Key))
	}
	return keys
}

// ReadContents reads every task manifest that m lists and checks it
// against m: the same version, checkpoint and task, a subtask within its
// parallelism, and every one under the same root. It does not read state
// files. Errors name the task manifest and match storage's errors or
// ErrCorrupt; a restoring side wraps them in a RestoreError.
func ReadContents(ctx context.Context, st storage.Store, m *Manifest) (*Contents, error) {
	if len(m.Tasks) == 0 {
		return nil, corrupt("the checkpoint manifest lists no task")
	}
	c := &Contents{Manifest: m}
	sizes := map[string]int64{}
	for _, id := range slices.Sorted(maps.Keys(m.Tasks)) {
		key := m.Tasks[id]
		root, err := RootOf(key)
		if err != nil {
			return nil, mark(err, ErrCorrupt)
		}
		if c.Root == "" {
			c.Root = root
		} else if root != c.Root {
			return nil, corrupt("task manifest %s is not under %s, as the others", key, c.Root)
		}
		var tm TaskManifest
		if err := readJSON(ctx, st, key, &tm); err != nil {
			return nil, fmt.Errorf("task manifest %s: %w", key, err)
		}
		if err := tm.check(m, id); err != nil {
			return nil, fmt.Errorf("task manifest %s: %w", key, err)
		}
		for _, name := range slices.Sorted(maps.Keys(tm.Nodes)) {
			files, err := tm.Nodes[name].StateFiles()
			if err != nil {
				return nil, fmt.Errorf("task manifest %s: node %s: %w", key, name, err)
			}
			for _, f := range files {
				if size, seen := sizes[f.Key]; seen && size != f.Size {
					return nil, corrupt("task manifest %s: node %s: state file %s of %d bytes, %d elsewhere", key, name, f.Key, f.Size, size)
				}
				sizes[f.Key] = f.Size
			}
		}
		c.Tasks = append(c.Tasks, Task{ID: id, Key: key, Manifest: &tm})
	}
	for _, k := range slices.Sorted(maps.Keys(sizes)) {
		c.StateFiles = append(c.StateFiles, StateFile{Key: k, Size: sizes[k]})
	}
	return c, nil
}

// check checks a task manifest against the checkpoint manifest that lists
// it for task id. Errors wrap ErrCorrupt.
func (tm *TaskManifest) check(m *Manifest, id string) error {
	switch {
	case tm.Version != Version:
		return corrupt("version %d, want %d", tm.Version, Version)
	case tm.Checkpoint != m.Checkpoint || tm.Task != id:
		return corrupt("of task %s of checkpoint %d, not of task %s", tm.Task, tm.Checkpoint, id)
	case tm.Parallelism <= 0 || tm.Subtask < 0 || tm.Subtask >= tm.Parallelism || tm.Parallelism > m.MaxParallelism:
		return corrupt("subtask %d of parallelism %d", tm.Subtask, tm.Parallelism)
	}
	return nil
}
