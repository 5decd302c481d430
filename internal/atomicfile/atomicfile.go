// Package atomicfile writes a file whole or not at all, with its mode set
// before anyone can read it: what secrets (admin tokens, TLS keys, the
// CLI's configuration) need. It is not for large or appended files.
package atomicfile

import (
	"errors"
	"os"
)

// Write replaces path with data through a temporary file next to it, so
// that a reader sees the old file or the new one, and the new one is
// never readable with a wider mode than mode, not even for a moment.
func Write(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // a tmp left over may have had another mode
		return errors.Join(err, os.Remove(tmp))
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
