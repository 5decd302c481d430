package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/storage"
)

// This file is the checkpoint coordinator's I/O, which the leader runs in
// goroutines of its term, one job at a time: writing checkpoint manifests,
// copying savepoints, and deleting the files of checkpoints no longer
// retained. The layout is the one of docs/rfcs/2026-11-30-checkpoints.md:
//
//	tenants/<tenant>/jobs/<job>/chk/<id>/_manifest.json   checkpoint manifest (written here)
//	tenants/<tenant>/jobs/<job>/chk/<id>/<task>.json      task manifests (written by tasks)
//	tenants/<tenant>/jobs/<job>/shared/<sha256>           state files, shared between checkpoints
//	tenants/<tenant>/savepoints/<job>-<id>/…              a savepoint, self-contained

// manifestName is the name of a checkpoint manifest in its directory.
const manifestName = "_manifest.json"

// checkpointManifestVersion is the version of the checkpoint manifests the
// leader writes.
const checkpointManifestVersion = 1

// checkpointManifest is the checkpoint manifest the leader writes when every
// task of an attempt acknowledged a checkpoint: what a restore reads to find
// the task manifests.
type checkpointManifest struct {
	Version    int    `json:"version"`
	Job        string `json:"job"`
	Checkpoint uint64 `json:"checkpoint"`
	Savepoint  bool   `json:"savepoint"`
	// Tasks maps every task of the attempt to the key of its task manifest.
	Tasks          map[string]string `json:"tasks"`
	MaxParallelism int               `json:"max_parallelism"`
}

// jobPrefix is where a job's checkpoints live in its checkpoint storage:
// tenants/<tenant>/jobs/<job> (workers hand the same to their
// deployments).
func jobPrefix(tenant, job string) string { return "tenants/" + tenant + "/jobs/" + job }

func checkpointManifestKey(tenant, job string, id uint64) string {
	return jobPrefix(tenant, job) + "/chk/" + strconv.FormatUint(id, 10) + "/" + manifestName
}

// savepointPath is the directory of a savepoint: what TriggerSavepoint
// returns and from_savepoint takes.
func savepointPath(tenant, job string, id uint64) string {
	return "tenants/" + tenant + "/savepoints/" + job + "-" + strconv.FormatUint(id, 10)
}

// savepointDir returns the directory of a savepoint's manifest key.
func savepointDir(manifest string) string { return strings.TrimSuffix(manifest, "/"+manifestName) }

// restoreKey turns what a user gives as from_savepoint (a savepoint
// directory or a manifest key, with or without a trailing slash) into the
// key of the checkpoint manifest to restore from.
func restoreKey(path string) (string, error) {
	key := strings.TrimSuffix(strings.TrimSpace(path), "/")
	if !strings.HasSuffix(key, "/"+manifestName) {
		key += "/" + manifestName
	}
	if err := storage.ValidateKey(key); err != nil {
		return "", fmt.Errorf("savepoint path %q: %w", path, err)
	}
	return key, nil
}

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
		for _, a := range acks {
			full += a.fullSize
			incremental += a.incremental
		}
		cmd = &fsm.CheckpointCompleted{JobID: j.ID, Attempt: p.Attempt, ID: p.ID, Savepoint: p.Savepoint, Manifest: location,
			Duration: max(0, c.now().Sub(p.Triggered)), FullSize: full, IncrementalSize: incremental, Retain: cfg.retain}
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
	}
}

// writeCheckpoint writes the checkpoint manifest and, for a savepoint, its
// self-contained copy; it returns the key of the manifest to restore from.
func (c *Coordinator) writeCheckpoint(ctx context.Context, j *fsm.Job, p fsm.Checkpoint, cfg checkpointConfig, acks map[string]checkpointAck) (string, error) {
	st, err := c.stores.get(ctx, cfg.storage)
	if err != nil {
		return "", fmt.Errorf("checkpoint %d: %w", p.ID, err)
	}
	m := checkpointManifest{
		Version:        checkpointManifestVersion,
		Job:            j.ID,
		Checkpoint:     p.ID,
		Savepoint:      p.Savepoint,
		Tasks:          make(map[string]string, len(acks)),
		MaxParallelism: cfg.maxParallelism,
	}
	for task, a := range acks {
		m.Tasks[task] = a.manifest
	}
	key := checkpointManifestKey(j.Tenant, j.ID, p.ID)
	if err := putJSON(ctx, st, key, m); err != nil {
		return "", fmt.Errorf("checkpoint %d: write its manifest: %w", p.ID, err)
	}
	if !p.Savepoint {
		return key, nil
	}
	location, err := copySavepoint(ctx, st, j, m)
	if err != nil {
		return "", fmt.Errorf("savepoint %d: %w", p.ID, err)
	}
	return location, nil
}

func putJSON(ctx context.Context, st storage.Store, key string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return st.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
}

// maxManifestSize bounds the manifests the leader reads.
const maxManifestSize = 64 << 20

func readObject(ctx context.Context, st storage.Store, key string) ([]byte, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if len(data) > maxManifestSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", key, maxManifestSize)
	}
	return data, nil
}

// decodeJSON decodes a manifest as generic JSON, keeping numbers exact.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// rewriteStrings replaces every string value of a decoded JSON document
// (not the object keys) with fn's result.
func rewriteStrings(v any, fn func(string) string) any {
	switch x := v.(type) {
	case string:
		return fn(x)
	case []any:
		for i := range x {
			x[i] = rewriteStrings(x[i], fn)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = rewriteStrings(e, fn)
		}
	}
	return v
}

// copySavepoint copies every task manifest of a savepoint's checkpoint, and
// every file of the job's checkpoint storage they reference, into the
// savepoint's directory, rewriting the references, and writes the
// savepoint's checkpoint manifest there; it returns that manifest's key.
// The copy references nothing outside its directory, so it survives the
// deletion of the job's checkpoints and can start another job.
//
// The savepoint directory takes the place of the job's prefix: prefix/<x>
// is copied to dir/<x> (task manifests to dir/chk/<id>/, state files to
// dir/shared/), so that a restore, which resolves state files against the
// root its task manifests are under, finds them there. References in a
// task manifest are its string values that are keys under the job's prefix
// (rewritten to the copy's key) or keys relative to it starting with
// shared/ (as package state writes them: copied, and left as they are).
// The checkpoint manifest is dir/_manifest.json. On error, what was copied
// is deleted again.
func copySavepoint(ctx context.Context, st storage.Store, j *fsm.Job, m checkpointManifest) (location string, err error) {
	prefix := jobPrefix(j.Tenant, j.ID) + "/"
	dir := savepointPath(j.Tenant, j.ID, m.Checkpoint)
	target := func(key string) (string, bool) {
		rel, ok := strings.CutPrefix(key, prefix)
		if !ok || storage.ValidateKey(key) != nil {
			return "", false
		}
		return dir + "/" + rel, true
	}
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
	copied := map[string]bool{}
	copyFile := func(src, dst string) error {
		if copied[src] {
			return nil
		}
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
		copied[src] = true
		return nil
	}
	out := m
	out.Savepoint = true
	out.Tasks = make(map[string]string, len(m.Tasks))
	for _, task := range slices.Sorted(maps.Keys(m.Tasks)) {
		key := m.Tasks[task]
		dst, ok := target(key)
		if !ok {
			return "", fmt.Errorf("task %s: manifest %s is not under %s", task, key, prefix)
		}
		data, err := readObject(ctx, st, key)
		if err != nil {
			return "", fmt.Errorf("task %s: %w", task, err)
		}
		doc, err := decodeJSON(data)
		if err != nil {
			return "", fmt.Errorf("task %s: manifest %s: %w", task, key, err)
		}
		var copyErr error
		doc = rewriteStrings(doc, func(s string) string {
			if copyErr != nil {
				return s
			}
			if strings.HasPrefix(s, "shared/") && storage.ValidateKey(s) == nil {
				// A key relative to the prefix, if there is such a file.
				switch err := copyFile(prefix+s, dir+"/"+s); {
				case errors.Is(err, storage.ErrNotFound):
				case err != nil:
					copyErr = err
				}
				return s
			}
			to, ok := target(s)
			if !ok {
				return s
			}
			copyErr = copyFile(s, to)
			return to
		})
		if copyErr != nil {
			return "", fmt.Errorf("task %s: %w", task, copyErr)
		}
		written = append(written, dst)
		if err := putJSON(ctx, st, dst, doc); err != nil {
			return "", fmt.Errorf("task %s: write manifest: %w", task, err)
		}
		out.Tasks[task] = dst
	}
	location = dir + "/" + manifestName
	written = append(written, location)
	if err := putJSON(ctx, st, location, out); err != nil {
		return "", fmt.Errorf("write manifest: %w", err)
	}
	return location, nil
}

// errUnreadable marks a checkpoint whose manifests are missing or do not
// decode: it cannot be restored from, so it protects no file.
var errUnreadable = errors.New("unreadable checkpoint")

// references adds to refs every key under prefix that the checkpoint whose
// manifest is at key references: its task manifests and the strings of
// those that name keys under prefix (state files written as keys relative
// to the prefix, "shared/<x>", count too).
func references(ctx context.Context, st storage.Store, prefix, key string, refs map[string]bool) error {
	read := func(key string) ([]byte, error) {
		data, err := readObject(ctx, st, key)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("%w: %v", errUnreadable, err)
		}
		return data, err
	}
	data, err := read(key)
	if err != nil {
		return err
	}
	var m checkpointManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%w: %s: %v", errUnreadable, key, err)
	}
	for _, task := range slices.Sorted(maps.Keys(m.Tasks)) {
		tkey := m.Tasks[task]
		refs[tkey] = true
		data, err := read(tkey)
		if err != nil {
			return err
		}
		doc, err := decodeJSON(data)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errUnreadable, tkey, err)
		}
		rewriteStrings(doc, func(s string) string {
			switch {
			case strings.HasPrefix(s, prefix):
				refs[s] = true
			case strings.HasPrefix(s, "shared/"):
				refs[prefix+s] = true
			}
			return s
		})
	}
	return nil
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
	prefix := jobPrefix(j.Tenant, j.ID) + "/"
	keep := map[string]bool{}
	refs := map[string]bool{}
	for _, cp := range j.Checkpoints {
		keep[prefix+"chk/"+strconv.FormatUint(cp.ID, 10)+"/"] = true
		if err := references(ctx, st, prefix, cp.Location, refs); err != nil {
			if !errors.Is(err, errUnreadable) {
				return fmt.Errorf("checkpoint %d: %w", cp.ID, err)
			}
			if cp.Bad == "" {
				c.log.Warn("retained checkpoint unreadable: its files are not kept for it", "job", j.ID, "checkpoint", cp.ID, "err", err)
			}
		}
	}
	var deleted int
	for _, dir := range []string{"chk/", "shared/"} {
		infos, err := st.List(ctx, prefix+dir)
		if err != nil {
			return err
		}
		for _, info := range infos {
			if refs[info.Key] || dir == "chk/" && keptDir(info.Key, keep) {
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
