package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/state"
)

// backends opens each state backend of the process once, on first use:
// one Pebble database per process shared by every task, as a worker has.
type backends struct {
	dir string // parent of the Pebble directory; "" = a temporary one

	mu      sync.Mutex
	pebble  *state.Pebble
	memory  *state.Memory
	tempDir string
}

func (b *backends) get(kind string) (state.Backend, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch kind {
	case jobspec.BackendMemory:
		if b.memory == nil {
			m, err := state.NewMemory(state.DefaultMemoryConfig())
			if err != nil {
				return nil, err
			}
			b.memory = m
		}
		return b.memory, nil
	case jobspec.BackendPebble:
		if b.pebble == nil {
			dir := b.dir
			if dir == "" {
				tmp, err := os.MkdirTemp("", "eddy-state-")
				if err != nil {
					return nil, err
				}
				b.tempDir, dir = tmp, tmp
			}
			p, err := state.OpenPebble(state.DefaultPebbleConfig(filepath.Join(dir, "state")))
			if err != nil {
				return nil, err
			}
			b.pebble = p
		}
		return b.pebble, nil
	}
	return nil, fmt.Errorf("unknown state backend %q", kind)
}

func (b *backends) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pebble != nil {
		_ = b.pebble.Close()
	}
	if b.memory != nil {
		_ = b.memory.Close()
	}
	if b.tempDir != "" {
		_ = os.RemoveAll(b.tempDir)
	}
}
