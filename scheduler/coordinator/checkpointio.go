package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/storage"
)

// This file is the checkpoint coordinator's I/O, which the leader runs in
// goroutines of its term, one job at a time: writing checkpoint manifests,
// copying savepoints, and deleting the files of checkpoints no longer
// retained. The format and the layout are package dataflow/checkpoint's.

// storeCache opens each checkpoint storage URL once.
type storeCache struct {
	open   func(ctx context.Context, url string) (storage.Store, error)
	mu     sync.Mutex
	stores map[string]storage.Store
	closed bool
}

func (s *storeCache) get(ctx context.Context, url string) (storage.Store, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("coordinator stopped")
	}
	if st, ok := s.stores[url]; ok {
		s.mu.Unlock()
		return st, nil
	}
	s.mu.Unlock()
	// Opening an s3:// store talks to the server: not under the lock. A
	// failure is not cached, so the next checkpoint tries again.
	st, err := s.open(ctx, url)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.stores[url]; ok || s.closed {
		st.Close()
		if s.closed {
			return nil, errors.New("coordinator stopped")
		}
		return prev, nil
	}
	s.stores[url] = st
	return st, nil
}

func (s *storeCache) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, st := range s.stores {
		st.Close()
	}
	s.stores = nil
}

// checkpointAck is one task's acknowledgement of a checkpoint.
type checkpointAck struct {
	manifest    string
	fullSize    int64
	incremental int64
	duration    time.Duration
	worker      string
	// swapPause is how long a task of a swapped node held its input for
	// the swap (a swap savepoint only).
	swapPause time.Duration
}

// finalizeCheckpoint writes the manifest of the job's checkpoint in flight
// (every task acknowledged it), copies it into a savepoint if it is one,
// and commits the outcome: CheckpointCompleted, or CheckpointFailed with
// the storage's error. It runs in its own goroutine of the term.
func (c *Coordinator) finalizeCheckpoint(ctx context.Context, t *term, jobID string) {
	j, err := c.fsm.FindJob(jobID)
	if err != nil || j.PendingCheckpoint == nil {
		return
	}
	p := *j.PendingCheckpoint
	log := c.log.With("job", j.ID, "attempt", p.Attempt, "checkpoint", p.ID)
	acks := t.acks(j.ID, p.ID)
	cfg, err := c.checkpointConfig(&j)
	var cmd fsm.Command
	if err == nil {
		var location string
		location, err = c.writeCheckpoint(ctx, &j, p, cfg, acks)
		if ctx.Err() != nil {
			return // the next leader fails it
		}
		var full, incremental int64
		var pause time.Duration
		for _, a := range acks {
			full += a.fullSize
			incremental += a.incremental
			pause = max(pause, a.swapPause)
		}
		cmd = &fsm.CheckpointCompleted{JobID: j.ID, Attempt: p.Attempt, ID: p.ID, Savepoint: p.Savepoint, Manifest: location,
			Duration: max(0, c.now().Sub(p.Triggered)), FullSize: full, IncrementalSize: incremental, Retain: cfg.retain, SwapPause: pause}
		if err == nil {
			if t, terr := c.fsm.Tenant(j.Tenant); terr == nil {
				cmd = checkpointQuotaOutcome(&j, t.Quota, c.fsm.TenantUsage(j.Tenant).CheckpointBytes, cmd.(*fsm.CheckpointCompleted))
			}
		}
	}
	if err != nil {
		cmd = &fsm.CheckpointFailed{JobID: j.ID, ID: p.ID, Reason: oneLine(err.Error())}
	}
	if _, perr := c.propose(ctx, cmd); perr != nil {
		log.Warn("checkpoint outcome not committed", "err", perr)
		return
	}
	switch cmd := cmd.(type) {
	case *fsm.CheckpointCompleted:
		log.Info("checkpoint completed", "savepoint", cmd.Savepoint, "manifest", cmd.Manifest, "duration", cmd.Duration,
			"full_size", cmd.FullSize, "incremental_size", cmd.IncrementalSize)
	case *fsm.CheckpointFailed:
		log.Warn("checkpoint failed", "savepoint", p.Savepoint, "reason", cmd.Reason)
	case *fsm.FailJob:
		log.Warn("job failed at a checkpoint", "reason", cmd.Message)
	}
}

// writeCheckpoint writes the checkpoint manifest and, for a savepoint, its
// self-contained copy; it returns the key of the manifest to restore from.
func (c *Coordinator) writeCheckpoint(ctx context.Context, j *fsm.Job, p fsm.Checkpoint, cfg checkpointConfig, acks map[string]checkpointAck) (string, error) {
	st, err := c.stores.get(ctx, cfg.storage)
	if err != nil {
		return "", fmt.Errorf("checkpoint %d: %w", p.ID, err)
	}
	m := checkpoint.Manifest{
		Version:        checkpoint.Version,
		Job:            j.ID,
		Checkpoint:     int64(p.ID),
		Savepoint:      p.Savepoint,
		Tasks:          make(map[string]string, len(acks)),
		MaxParallelism: cfg.maxParallelism,
	}
	for task, a := range acks {
		m.Tasks[task] = a.manifest
	}
	key := checkpoint.ManifestKey(checkpoint.JobRoot(j.Tenant, j.ID), m.Checkpoint)
	if err := checkpoint.WriteManifest(ctx, st, key, &m); err != nil {
		return "", err
	}
	if !p.Savepoint {
		return key, nil
	}
	location, err := copySavepoint(ctx, st, j, &m)
	if err != nil {
		return "", fmt.Errorf("savepoint %d: %w", p.ID, err)
	}
	return location, nil
}

// copySavepoint copies the checkpoint m of a job into a savepoint: its
// directory (checkpoint.SavepointDir) is a root of its own holding the
// files of m's checkpoint.Contents, each under the same key relative to the
// root, and the savepoint's manifest; it returns that manifest's key. Task
// manifests are copied byte for byte: the state files they record are
// relative to the root, and nothing else in them names a file of checkpoint
// storage. The copy references nothing outside its directory, so it
// survives the deletion of the job's checkpoints and can start another job.
// On error, what was copied is deleted again.
func copySavepoint(ctx context.Context, st storage.Store, j *fsm.Job, m *checkpoint.Manifest) (location string, err error) {
	c, err := checkpoint.ReadContents(ctx, st, m)
	if err != nil {
		return "", err
	}
	if root := checkpoint.JobRoot(j.Tenant, j.ID); c.Root != root {
		return "", fmt.Errorf("its task manifests are under %s, not under the job's %s", c.Root, root)
	}
	dir := checkpoint.SavepointDir(j.Tenant, j.ID, m.Checkpoint)
	var written []string
	defer func() {
		if err != nil {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			for _, key := range written {
				_ = st.Delete(cleanup, key)
			}
		}
	}()
	copyFile := func(src, dst string) error {
		info, err := st.Stat(ctx, src)
		if err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		rc, err := st.Get(ctx, src)
		if err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		defer rc.Close()
		written = append(written, dst)
		if err := st.Put(ctx, dst, rc, info.Size); err != nil {
			return fmt.Errorf("copy %s to %s: %w", src, dst, err)
		}
		return nil
	}
	out := *m
	out.Savepoint = true
	out.Tasks = make(map[string]string, len(c.Tasks))
	for _, t := range c.Tasks {
		dst := checkpoint.TaskManifestKey(dir, m.Checkpoint, t.ID)
		if err := copyFile(t.Key, dst); err != nil {
			return "", fmt.Errorf("task %s: %w", t.ID, err)
		}
		out.Tasks[t.ID] = dst
	}
	for _, f := range c.StateFiles {
		if err := copyFile(checkpoint.StateFileKey(c.Root, f.Key), checkpoint.StateFileKey(dir, f.Key)); err != nil {
			return "", err
		}
	}
	location = checkpoint.SavepointManifestKey(dir)
	written = append(written, location)
	if err := checkpoint.WriteManifest(ctx, st, location, &out); err != nil {
		return "", err
	}
	return location, nil
}

// errUnreadable marks a checkpoint whose manifests are missing or do not
// decode: it cannot be restored from, so it protects no file.
var errUnreadable = errors.New("unreadable checkpoint")

// references adds to refs the key of every file that the checkpoint whose
// manifest is at key references (checkpoint.Contents.Keys).
func references(ctx context.Context, st storage.Store, key string, refs map[string]bool) error {
	c, err := readContents(ctx, st, key)
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
		return fmt.Errorf("%w: %v", errUnreadable, err)
	}
	if err != nil {
		return err
	}
	for _, k := range c.Keys() {
		refs[k] = true
	}
	return nil
}

func readContents(ctx context.Context, st storage.Store, key string) (*checkpoint.Contents, error) {
	m, err := checkpoint.ReadManifest(ctx, st, key)
	if err != nil {
		return nil, err
	}
	return checkpoint.ReadContents(ctx, st, m)
}

// collectCheckpoints deletes the files of the job's checkpoints that are no
// longer retained: everything under chk/ but the directories of the
// retained checkpoints, and every state file under shared/ that no
// retained checkpoint references. It then commits CheckpointsDeleted for
// the ids it was asked to delete. No checkpoint of the job is in flight
// meanwhile (the leader triggers none while it collects), so no task can
// come to reference a file being deleted.
func (c *Coordinator) collectCheckpoints(ctx context.Context, jobID string) error {
	j, err := c.fsm.FindJob(jobID)
	if err != nil || len(j.CheckpointsToDelete) == 0 || j.PendingCheckpoint != nil {
		return nil
	}
	cfg, err := c.checkpointConfig(&j)
	if err != nil {
		return err
	}
	st, err := c.stores.get(ctx, cfg.storage)
	if err != nil {
		return err
	}
	root := checkpoint.JobRoot(j.Tenant, j.ID)
	keep := map[string]bool{}
	refs := map[string]bool{}
	for _, cp := range j.Checkpoints {
		keep[checkpoint.CheckpointDir(root, int64(cp.ID))] = true
		if err := references(ctx, st, cp.Location, refs); err != nil {
			if !errors.Is(err, errUnreadable) {
				return fmt.Errorf("checkpoint %d: %w", cp.ID, err)
			}
			if cp.Bad == "" {
				c.log.Warn("retained checkpoint unreadable: its files are not kept for it", "job", j.ID, "checkpoint", cp.ID, "err", err)
			}
		}
	}
	var deleted int
	checkpoints := checkpoint.CheckpointsPrefix(root)
	for _, dir := range []string{checkpoints, checkpoint.SharedPrefix(root)} {
		infos, err := st.List(ctx, dir)
		if err != nil {
			return err
		}
		for _, info := range infos {
			if refs[info.Key] || dir == checkpoints && keptDir(info.Key, keep) {
				continue
			}
			if err := st.Delete(ctx, info.Key); err != nil {
				return err
			}
			deleted++
		}
	}
	if _, err := c.propose(ctx, &fsm.CheckpointsDeleted{JobID: j.ID, IDs: j.CheckpointsToDelete}); err != nil {
		return err
	}
	c.log.Info("old checkpoints deleted", "job", j.ID, "checkpoints", j.CheckpointsToDelete, "files", deleted)
	return nil
}

func keptDir(key string, keep map[string]bool) bool {
	for dir := range keep {
		if strings.HasPrefix(key, dir) {
			return true
		}
	}
	return false
}
