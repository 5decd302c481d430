package dataflow

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
	"time"

	"github.com/eddy-stream/eddy/storage"
)

// Checkpointing is set on a Deployment to make it checkpoint (aligned
// checkpoints, docs/rfcs/2026-11-30-checkpoints.md). Triggers and
// completions reach the running deployment through Running.Trigger and
// Running.Complete.
type Checkpointing struct {
	// Store is the job's checkpoint storage.
	Store storage.Store
	// Prefix is the job's root in Store, "tenants/<tenant>/jobs/<job>":
	// task manifests go to Prefix/chk/<id>/<task>.json, state files to
	// Prefix/shared/.
	Prefix string
	// Ack is called once a task's snapshot of a checkpoint is durable,
	// from the goroutine that uploads that task's snapshots (one per
	// task, in checkpoint order), and so possibly concurrently for
	// different tasks. The task forwarded the barrier long before, but it
	// must not block for long: the task's next snapshots wait for it.
	// nil drops acknowledgements.
	Ack func(Ack)
	// Restore, when not nil, is the checkpoint the deployment starts from
	// (ReadCheckpointManifest reads one).
	Restore *CheckpointManifest
}

func (c *Checkpointing) validate() error {
	if c.Store == nil {
		return errors.New("checkpointing without a Store")
	}
	if err := storage.ValidateKey(c.Prefix); err != nil {
		return fmt.Errorf("checkpoint prefix: %w", err)
	}
	if r := c.Restore; r != nil {
		if r.Version != manifestVersion {
			return fmt.Errorf("checkpoint %d: manifest version %d, want %d", r.Checkpoint, r.Version, manifestVersion)
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
}

// CheckpointManifest is the checkpoint manifest the leader writes once
// every task of an attempt acknowledged a checkpoint.
type CheckpointManifest struct {
	Version    int    `json:"version"`
	Job        string `json:"job"`
	Checkpoint int64  `json:"checkpoint"`
	Savepoint  bool   `json:"savepoint"`
	// Tasks maps every task id of the attempt to the key of its task
	// manifest (Ack.Manifest).
	Tasks          map[string]string `json:"tasks"`
	MaxParallelism int               `json:"max_parallelism"`
}

// manifestVersion is the version of both manifest formats.
const manifestVersion = 1

// ErrRestore marks the failure of a deployment that cannot read the
// checkpoint it restores from: a missing or corrupt manifest or state file
// (the error also wraps the cause, such as storage.ErrNotFound,
// storage.ErrCorrupt or state.ErrCorrupt). An earlier checkpoint may
// still be restorable.
var ErrRestore = errors.New("dataflow: cannot restore checkpoint")

// ErrIncompatibleCheckpoint marks a checkpoint that was read but does not
// fit the job: a source at another parallelism, another max parallelism.
// An earlier checkpoint of the same job will not fit either.
var ErrIncompatibleCheckpoint = errors.New("dataflow: checkpoint does not fit the job")

// CheckpointManifestKey is the key of checkpoint id's manifest under a
// job's prefix.
func CheckpointManifestKey(prefix string, id int64) string {
	return checkpointDir(prefix, id) + "_manifest.json"
}

// TaskManifestKey is the key of a task's manifest of checkpoint id.
func TaskManifestKey(prefix string, id int64, task string) string {
	return checkpointDir(prefix, id) + task + ".json"
}

func checkpointDir(prefix string, id int64) string {
	return prefix + "/chk/" + strconv.FormatInt(id, 10) + "/"
}

// WriteCheckpointManifest stores m under its key (CheckpointManifestKey)
// and returns the key. A zero Version is written as the current one.
func WriteCheckpointManifest(ctx context.Context, st storage.Store, prefix string, m *CheckpointManifest) (string, error) {
	out := *m
	if out.Version == 0 {
		out.Version = manifestVersion
	}
	b, err := json.Marshal(&out)
	if err != nil {
		return "", err
	}
	key := CheckpointManifestKey(prefix, m.Checkpoint)
	if err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		return "", fmt.Errorf("checkpoint %d: write manifest: %w", m.Checkpoint, err)
	}
	return key, nil
}

// ReadCheckpointManifest reads a checkpoint manifest. Its errors wrap
// ErrRestore, and the cause (storage.ErrNotFound…).
func ReadCheckpointManifest(ctx context.Context, st storage.Store, key string) (*CheckpointManifest, error) {
	var m CheckpointManifest
	if err := readJSON(ctx, st, key, &m); err != nil {
		return nil, mark(fmt.Errorf("checkpoint manifest %s: %w", key, err), ErrRestore)
	}
	if m.Version != manifestVersion || m.Checkpoint <= 0 || len(m.Tasks) == 0 {
		return nil, mark(fmt.Errorf("checkpoint manifest %s: version %d, checkpoint %d, %d tasks: not a checkpoint manifest", key, m.Version, m.Checkpoint, len(m.Tasks)), ErrRestore)
	}
	return &m, nil
}

// CheckpointFiles returns the keys of every object that checkpoint m
// references: its task manifests and the state files they reference, in
// order and without repeats. The leader keeps what a retained checkpoint
// references, and copies it into a savepoint. Errors wrap ErrRestore.
func CheckpointFiles(ctx context.Context, st storage.Store, m *CheckpointManifest) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(m.Tasks)) {
		key := m.Tasks[id]
		var tm taskManifest
		if err := readJSON(ctx, st, key, &tm); err != nil {
			return nil, mark(fmt.Errorf("checkpoint %d: task manifest %s: %w", m.Checkpoint, key, err), ErrRestore)
		}
		add(key)
		// State file keys are relative to the root the task manifests are
		// under (see restorePoint.prefix).
		prefix := ""
		if i := strings.LastIndex(key, "/chk/"); i > 0 {
			prefix = key[:i] + "/"
		}
		for _, name := range slices.Sorted(maps.Keys(tm.Nodes)) {
			if raw := tm.Nodes[name].State; len(raw) > 0 {
				files := snapshotFiles(raw)
				for _, k := range slices.Sorted(maps.Keys(files)) {
					add(prefix + k)
				}
			}
		}
	}
	return keys, nil
}

// maxManifestBytes bounds what readJSON reads: manifests are small, and a
// huge object under a manifest's key is damage, not a manifest.
const maxManifestBytes = 64 << 20

func readJSON(ctx context.Context, st storage.Store, key string, v any) error {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxManifestBytes {
		return fmt.Errorf("larger than %d MiB", maxManifestBytes>>20)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("corrupt: %w", err)
	}
	return nil
}

// taskManifest is what a task records for a checkpoint.
type taskManifest struct {
	Version     int    `json:"version"`
	Checkpoint  int64  `json:"checkpoint"`
	Savepoint   bool   `json:"savepoint,omitempty"`
	Task        string `json:"task"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
	// Watermark is the task's event-time watermark at the snapshot, so
	// that a restored task neither regresses it (windows that fired would
	// take late records again) nor waits for it.
	Watermark int64 `json:"watermark"`
	// Nodes has every node of the task's chain; State is set for keyed
	// nodes and is what the state package's snapshot returned.
	Nodes  map[string]nodeSnapshot `json:"nodes"`
	Source *sourceSnapshot         `json:"source,omitempty"`
	Sink   *sinkSnapshot           `json:"sink,omitempty"`
}

type nodeSnapshot struct {
	State json.RawMessage `json:"state,omitempty"`
}

type sourceSnapshot struct {
	Node        string `json:"node"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
	Position    []byte `json:"position"` // base64 in JSON
	// MaxTimestamp is the largest event time the source task had seen,
	// from which it derives its watermarks.
	MaxTimestamp int64 `json:"max_timestamp"`
}

type sinkSnapshot struct {
	Node   string   `json:"node"`
	Staged []string `json:"staged"`
}

// restorePoint is a checkpoint read for a deployment: every task
// manifest it lists, shared by the deployment's tasks.
type restorePoint struct {
	id        int64
	manifests []*taskManifest // in task id order of the checkpoint manifest
	keys      []string        // their keys, for errors
	// prefix is the root the checkpoint's state files are under: the one
	// its task manifests are under (<prefix>/chk/<id>/<task>.json), which
	// is the job's own for a checkpoint and the savepoint's directory for
	// a self-contained savepoint.
	prefix string
}

// loadRestorePoint reads every task manifest of cp.Restore and checks the
// checkpoint against the job.
func (j *Job) loadRestorePoint(ctx context.Context, cp *Checkpointing) (*restorePoint, error) {
	m := cp.Restore
	restoreErr := func(err error) error {
		return mark(fmt.Errorf("job %s: restore checkpoint %d: %w", j.spec.Name, m.Checkpoint, err), ErrRestore)
	}
	incompatible := func(format string, args ...any) error {
		return mark(fmt.Errorf("job %s: checkpoint %d %s", j.spec.Name, m.Checkpoint, fmt.Sprintf(format, args...)), ErrIncompatibleCheckpoint)
	}
	if m.MaxParallelism != j.spec.MaxParallelism {
		return nil, incompatible("was taken with max_parallelism %d, not %d: key groups would not match", m.MaxParallelism, j.spec.MaxParallelism)
	}
	if len(m.Tasks) == 0 {
		return nil, restoreErr(errors.New("the checkpoint manifest lists no task"))
	}
	rp := &restorePoint{id: m.Checkpoint}
	for _, id := range slices.Sorted(maps.Keys(m.Tasks)) {
		key := m.Tasks[id]
		var tm taskManifest
		if err := readJSON(ctx, cp.Store, key, &tm); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, restoreErr(fmt.Errorf("task manifest %s: %w", key, err))
		}
		switch {
		case tm.Version != manifestVersion:
			return nil, restoreErr(fmt.Errorf("task manifest %s: version %d, want %d", key, tm.Version, manifestVersion))
		case tm.Checkpoint != m.Checkpoint || tm.Task != id:
			return nil, restoreErr(fmt.Errorf("task manifest %s: of task %s of checkpoint %d, not of task %s", key, tm.Task, tm.Checkpoint, id))
		case tm.Parallelism <= 0 || tm.Subtask < 0 || tm.Subtask >= tm.Parallelism || tm.Parallelism > m.MaxParallelism:
			return nil, restoreErr(fmt.Errorf("task manifest %s: subtask %d of parallelism %d", key, tm.Subtask, tm.Parallelism))
		}
		rp.manifests = append(rp.manifests, &tm)
		rp.keys = append(rp.keys, key)
		if rp.prefix == "" {
			rp.prefix = cp.Prefix
			if i := strings.LastIndex(key, "/chk/"); i > 0 {
				rp.prefix = key[:i]
			}
		}
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
