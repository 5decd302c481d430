// Package statetest opens state backends for the tests of the operators
// built on package state (windows, joins): each is closed when the test
// ends.
package statetest

import (
	"testing"

	"github.com/eddy-stream/eddy/state"
)

// Memory opens an in-memory backend.
func Memory(t testing.TB) state.Backend {
	m, err := state.NewMemory(state.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Pebble opens a Pebble backend in a temporary directory. Outside
// benchmarks its memtable is small, so that a small test's reads also go
// to table files, as with large state.
func Pebble(t testing.TB) state.Backend {
	cfg := state.DefaultPebbleConfig(t.TempDir())
	if _, bench := t.(*testing.B); !bench {
		cfg.BlockCacheBytes, cfg.MemTableBytes = 8<<20, 4<<20
	}
	p, err := state.OpenPebble(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
