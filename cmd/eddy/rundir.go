package main

// The data directory of an `eddy run` without --data-dir: a new directory
// under the system's temporary directory, removed when the run ends. A run
// that is killed cannot remove its own, so every run first removes those
// whose owner is gone: each holds a lock on a file in it for as long as its
// process lives, and the lock goes with the process.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	runDirPrefix = "eddy-run-"
	// runDirLock is the file in a run directory its owner holds locked.
	runDirLock = "owner.lock"
)

// newRunDir removes the stale run directories under the temporary
// directory and makes a new one, locked until release, which removes it.
func newRunDir() (dir string, release func(), err error) {
	removeStaleRunDirs(os.TempDir())
	// Another run that took this directory for a stale one between its
	// creation and the lock removes it: then make another.
	for range 3 {
		dir, err = os.MkdirTemp("", runDirPrefix)
		if err != nil {
			return "", nil, err
		}
		var lock io.Closer
		lock, err = vfs.Default.Lock(filepath.Join(dir, runDirLock))
		if err == nil {
			return dir, func() {
				_ = os.RemoveAll(dir)
				_ = lock.Close()
			}, nil
		}
		_ = os.RemoveAll(dir)
	}
	return "", nil, fmt.Errorf("lock a run directory: %w", err)
}

// removeStaleRunDirs removes the run directories under tmp whose owner is
// gone: their lock file is there and not locked. A directory without one
// is left alone: its owner may be about to take it (or it is from a
// version of eddy that did not lock).
func removeStaleRunDirs(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, runDirPrefix+"*"))
	for _, dir := range dirs {
		path := filepath.Join(dir, runDirLock)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		lock, err := vfs.Default.Lock(path)
		if err != nil {
			continue // locked: its run is alive
		}
		_ = os.RemoveAll(dir) // what is left, the next run tries again
		_ = lock.Close()
	}
}
