package dataflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/storage"
)

// stateSnapshots captures, uploads and reads the snapshots of keyed state
// stores: package state's, incremental on Pebble.
var stateSnapshots snapshotter = snapshotFuncs[*state.SnapshotCapture, state.SnapshotManifest]{
	take:    state.CaptureSnapshot,
	upload:  (*state.SnapshotCapture).Upload,
	discard: (*state.SnapshotCapture).Discard,
	from:    state.RestoreFrom,
}

// snapshotter keeps the manifest type of the state package out of the
// task manifest code: the task records the manifest as raw JSON.
type snapshotter interface {
	// capture is the synchronous part of a snapshot: it freezes st's
	// state, from the task's goroutine, between two writes.
	capture(ctx context.Context, st state.Store) (stateCapture, error)
	restore(ctx context.Context, st state.Store, blobs storage.Store, prefix string, ms []json.RawMessage) error
}

// stateCapture is a captured snapshot waiting for its upload, the
// asynchronous part, which may run on any goroutine. Exactly one of
// upload and discard is called; both remove the capture's local files.
type stateCapture interface {
	upload(ctx context.Context, blobs storage.Store, prefix string) (json.RawMessage, error)
	discard()
}

// snapshotFuncs adapts the functions of the state package's API
// (state.CaptureSnapshot, SnapshotCapture.Upload and Discard,
// state.RestoreFrom) over its capture type C and manifest type M.
type snapshotFuncs[C, M any] struct {
	take    func(ctx context.Context, st state.Store) (C, error)
	upload  func(c C, ctx context.Context, blobs storage.Store, prefix string) (M, error)
	discard func(c C)
	from    func(ctx context.Context, st state.Store, blobs storage.Store, prefix string, ms []M) error
}

func (f snapshotFuncs[C, M]) capture(ctx context.Context, st state.Store) (stateCapture, error) {
	c, err := f.take(ctx, st)
	if err != nil {
		return nil, err
	}
	return captured[C, M]{f, c}, nil
}

type captured[C, M any] struct {
	f snapshotFuncs[C, M]
	c C
}

func (c captured[C, M]) upload(ctx context.Context, blobs storage.Store, prefix string) (json.RawMessage, error) {
	m, err := c.f.upload(c.c, ctx, blobs, prefix)
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

func (c captured[C, M]) discard() { c.f.discard(c.c) }

func (f snapshotFuncs[C, M]) restore(ctx context.Context, st state.Store, blobs storage.Store, prefix string, raws []json.RawMessage) error {
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
