package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/eddy-stream/eddy/storage"
)

// Version is the version of both manifest formats.
const Version = 1

// Manifest is a checkpoint manifest: what the leader writes once every
// task of an attempt acknowledged a checkpoint, and what a restore starts
// from.
type Manifest struct {
	Version    int    `json:"version"`
	Job        string `json:"job"`
	Checkpoint int64  `json:"checkpoint"`
	Savepoint  bool   `json:"savepoint"`
	// Tasks maps every task id of the attempt to the key of its task
	// manifest. Every one is under the same root.
	Tasks          map[string]string `json:"tasks"`
	MaxParallelism int               `json:"max_parallelism"`
}

// TaskManifest is what a task records for a checkpoint.
type TaskManifest struct {
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
	// Nodes has every node of the task's chain.
	Nodes  map[string]NodeSnapshot `json:"nodes"`
	Source *SourceSnapshot         `json:"source,omitempty"`
	Sink   *SinkSnapshot           `json:"sink,omitempty"`
}

// NodeSnapshot is one node of a task manifest.
type NodeSnapshot struct {
	// State is set for keyed nodes: the manifest package state's snapshot
	// returned (state.SnapshotManifest), kept as it is. Of it this package
	// reads the files only (StateFiles).
	State json.RawMessage `json:"state,omitempty"`
}

// SourceSnapshot is where the source at the head of a task stopped.
type SourceSnapshot struct {
	Node        string `json:"node"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
	// Position is the connector's (stream.Checkpointed), opaque here;
	// base64 in JSON.
	Position []byte `json:"position"`
	// MaxTimestamp is the largest event time the source task had seen,
	// from which it derives its watermarks.
	MaxTimestamp int64 `json:"max_timestamp"`
}

// SinkSnapshot is what the sink at the tail of a task staged for the
// checkpoint (stream.Transactional); entries are the connector's and name
// nothing in checkpoint storage.
type SinkSnapshot struct {
	Node   string   `json:"node"`
	Staged []string `json:"staged"`
}

// StateFile is a state file a node's snapshot references. It is the part
// of package state's manifest (state.SnapshotManifest.Files, state.File)
// that the leader needs to keep and copy the files.
type StateFile struct {
	// Key is relative to the root: "shared/<sha256>" (StateFileKey gives
	// the key in storage).
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// stateFiles is the part of a state snapshot manifest that names files.
type stateFiles struct {
	Files []StateFile `json:"files"`
}

// StateFiles returns the state files the node's snapshot references, as
// its state manifest lists them (none for a node without state). Errors
// wrap ErrCorrupt: the manifest does not decode, or a file's key is not a
// key under the root's SharedDir or its size is negative.
func (n NodeSnapshot) StateFiles() ([]StateFile, error) {
	if len(n.State) == 0 {
		return nil, nil
	}
	var sf stateFiles
	if err := json.Unmarshal(n.State, &sf); err != nil {
		return nil, corrupt("state snapshot manifest: %v", err)
	}
	for i, f := range sf.Files {
		if !validStateKey(f.Key) || f.Size < 0 {
			return nil, corrupt("state snapshot manifest: file %d: key %q (want %s/…), size %d", i, f.Key, SharedDir, f.Size)
		}
	}
	return sf.Files, nil
}

// WriteManifest stores m under key: ManifestKey for a checkpoint,
// SavepointManifestKey for a savepoint. A zero Version is written as the
// current one.
func WriteManifest(ctx context.Context, st storage.Store, key string, m *Manifest) error {
	out := *m
	if out.Version == 0 {
		out.Version = Version
	}
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return err
	}
	if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("checkpoint %d: write manifest: %w", m.Checkpoint, err)
	}
	return nil
}

// ReadManifest reads a checkpoint manifest. Its errors name the key and
// match storage's errors, or ErrCorrupt for what is not a checkpoint
// manifest; a restoring side wraps them in a RestoreError.
func ReadManifest(ctx context.Context, st storage.Store, key string) (*Manifest, error) {
	var m Manifest
	if err := readJSON(ctx, st, key, &m); err != nil {
		return nil, fmt.Errorf("checkpoint manifest %s: %w", key, err)
	}
	if m.Version != Version || m.Checkpoint <= 0 || len(m.Tasks) == 0 {
		return nil, corrupt("checkpoint manifest %s: version %d, checkpoint %d, %d tasks: not a checkpoint manifest", key, m.Version, m.Checkpoint, len(m.Tasks))
	}
	return &m, nil
}

// maxManifestBytes bounds what readJSON reads: manifests are small, and a
// huge object under a manifest's key is damage, not a manifest.
const maxManifestBytes = 64 << 20

// readJSON decodes the object at key into v. A failure to decode wraps
// ErrCorrupt.
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
		return corrupt("larger than %d MiB", maxManifestBytes>>20)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return corrupt("corrupt: %w", err)
	}
	return nil
}
