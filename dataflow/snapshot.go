package dataflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/storage"
)

// stateSnapshots writes and reads the snapshots of keyed state stores:
// package state's, incremental on Pebble.
var stateSnapshots snapshotter = snapshotFuncs[state.SnapshotManifest]{state.SnapshotTo, state.RestoreFrom}

// snapshotter keeps the manifest type of the state package out of the
// task manifest code: the task records the manifest as raw JSON.
type snapshotter interface {
	snapshot(ctx context.Context, st state.Store, blobs storage.Store, prefix string) (json.RawMessage, error)
	restore(ctx context.Context, st state.Store, blobs storage.Store, prefix string, ms []json.RawMessage) error
}

// snapshotFuncs adapts the pair of functions of the state package's API
// (state.SnapshotTo, state.RestoreFrom) over its manifest type M.
type snapshotFuncs[M any] struct {
	to   func(ctx context.Context, st state.Store, blobs storage.Store, prefix string) (M, error)
	from func(ctx context.Context, st state.Store, blobs storage.Store, prefix string, ms []M) error
}

func (f snapshotFuncs[M]) snapshot(ctx context.Context, st state.Store, blobs storage.Store, prefix string) (json.RawMessage, error) {
	m, err := f.to(ctx, st, blobs, prefix)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	// The leader finds the snapshot's files as package checkpoint reads
	// them: what it could not read there it would neither keep nor copy.
	if _, err := (checkpoint.NodeSnapshot{State: raw}).StateFiles(); err != nil {
		return nil, err
	}
	return raw, nil
}

func (f snapshotFuncs[M]) restore(ctx context.Context, st state.Store, blobs storage.Store, prefix string, raws []json.RawMessage) error {
	ms := make([]M, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &ms[i]); err != nil {
			return fmt.Errorf("%w: state snapshot manifest: %v", state.ErrCorrupt, err)
		}
	}
	return f.from(ctx, st, blobs, prefix, ms)
}

// snapshotFiles returns the state files a snapshot manifest of package
// state references and their sizes, as checkpoint.NodeSnapshot.StateFiles
// reads them: what an acknowledgement counts is what the leader keeps.
func snapshotFiles(raw json.RawMessage) map[string]int64 {
	list, err := checkpoint.NodeSnapshot{State: raw}.StateFiles()
	if err != nil {
		return nil // snapshot refused such a manifest
	}
	files := make(map[string]int64, len(list))
	for _, f := range list {
		files[f.Key] = f.Size
	}
	return files
}
