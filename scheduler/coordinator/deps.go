package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/storage"
)

// ModuleStore holds module bytes, keyed by ModuleKey. Every coordinator of
// a group must see the same store (an s3:// bucket, or a directory they
// share): any of them may become the leader that serves GetModule.
//
// It is an interface for decoupling (the caller wires package storage to
// it), not for third-party implementations. Implementations are safe for
// concurrent use. Put of an existing key stores the same bytes again
// (keys are content hashes), so it may overwrite or keep the old copy.
type ModuleStore interface {
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the bytes stored under key, or an error matching
	// ErrBlobNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
}

// ErrBlobNotFound is matched by ModuleStore.Get for a key never stored.
var ErrBlobNotFound = errors.New("coordinator: blob not found")

// ModuleKey is where a module's bytes live in the ModuleStore:
// tenants/<tenant>/modules/<sha256>.
func ModuleKey(tenant, sha256Hex string) string {
	return "tenants/" + tenant + "/modules/" + sha256Hex
}

// Validator compiles and checks a module against the host ABI (the caller
// wires host.Engine to it). The error it returns is the one line shown to
// the user who uploaded the module, as INVALID_ARGUMENT.
type Validator func(ctx context.Context, name string, wasm []byte) error

// Planner turns a job spec into the ids of its tasks, each needing one
// slot (the caller wires jobspec.Parse and dataflow.PlanTasks to it). Its
// errors are the spec's errors, with line numbers, shown to the user as
// INVALID_ARGUMENT. Workers build the same tasks from the same spec, so
// the ids must be a deterministic function of the spec.
type Planner func(specYAML []byte) (tasks []string, err error)

// Deps are the coordinator's links to other subsystems: the blob store,
// the Wasm host and the job planner. (The coordinator itself reads a spec
// only with package jobspec, for the job's name and module references.)
type Deps struct {
	Store     ModuleStore
	Validator Validator
	Planner   Planner
	// NodeTasks returns the ids of the tasks whose chain runs a node of a
	// spec (the caller wires dataflow.PlanTasks to it): the tasks that
	// prepare a hot swap of the node. nil: every task of the job does.
	NodeTasks func(specYAML []byte, node string) ([]string, error)
	// Graph returns the dataflow graph of a spec for JobStatus (the caller
	// wires dataflow.PlanGraph to it); nil: JobStatus has no graph.
	Graph func(specYAML []byte) (*eddyv1.JobGraph, error)
	// Now is the clock (nil: time.Now). Every time the leader proposes, and
	// every liveness, backoff and checkpoint decision, reads it.
	Now func() time.Time
	// OpenStorage opens a job's checkpoint storage by URL (nil:
	// storage.Open with storage.ConfigFromEnv, credentials from
	// EDDY_S3_*). The leader opens each URL once.
	OpenStorage func(ctx context.Context, url string) (storage.Store, error)
}

// openStorage is the default Deps.OpenStorage.
func openStorage(ctx context.Context, url string) (storage.Store, error) {
	cfg, err := storage.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return storage.Open(ctx, url, cfg)
}

func (d Deps) check() error {
	switch {
	case d.Store == nil:
		return fmt.Errorf("%w: no module store", ErrInvalidConfig)
	case d.Validator == nil:
		return fmt.Errorf("%w: no module validator", ErrInvalidConfig)
	case d.Planner == nil:
		return fmt.Errorf("%w: no job planner", ErrInvalidConfig)
	}
	return nil
}

// MemStore is a ModuleStore in memory, for tests and for a standalone
// process that does not keep modules.
type MemStore struct {
	mu    sync.Mutex
	blobs map[string][]byte
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{blobs: map[string][]byte{}} }

// Put implements ModuleStore.
func (s *MemStore) Put(_ context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[key] = append([]byte(nil), data...)
	return nil
}

// Get implements ModuleStore.
func (s *MemStore) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.blobs[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, ErrBlobNotFound)
	}
	return append([]byte(nil), data...), nil
}

// DirStore is a ModuleStore in a local directory: key a/b/c is the file
// Dir/a/b/c. Writes go to a temporary file renamed into place, so a reader
// never sees part of a module.
type DirStore struct {
	Dir string
}

// Put implements ModuleStore.
func (s DirStore) Put(ctx context.Context, key string, data []byte) error {
	path, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("module store: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("module store: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("module store: write %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("module store: sync %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("module store: close %s: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("module store: %w", err)
	}
	return nil
}

// Get implements ModuleStore.
func (s DirStore) Get(ctx context.Context, key string) ([]byte, error) {
	path, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, ErrBlobNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("module store: %w", err)
	}
	return data, nil
}

func (s DirStore) path(key string) (string, error) {
	if s.Dir == "" {
		return "", errors.New("module store: no directory")
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.Dir, filepath.FromSlash(key)), nil
}

// checkKey refuses keys that could escape a directory or name nothing.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") {
		return fmt.Errorf("module store: bad key %q", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, ".tmp-") {
			return fmt.Errorf("module store: bad key %q", key)
		}
	}
	return nil
}
