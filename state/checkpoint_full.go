package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/eddy-stream/eddy/state/internal/entryfile"
)

// captureFull writes st's Snapshot entries into one entry file, in a
// temporary directory under tmpRoot, hashing it on the way. The caller
// fills in what it knows of the Store (groups, scope).
func captureFull(ctx context.Context, st Store, tmpRoot string) (*SnapshotCapture, error) {
	work, err := os.MkdirTemp(tmpRoot, "eddy-snapshot-")
	if err != nil {
		return nil, err
	}
	c := &SnapshotCapture{m: SnapshotManifest{Format: FormatVersion, Kind: SnapshotFull}, work: work}
	if err := c.writeEntries(ctx, st, filepath.Join(work, "entries")); err != nil {
		c.Discard()
		return nil, err
	}
	return c, nil
}

func (c *SnapshotCapture) writeEntries(ctx context.Context, st Store, p string) error {
	out, err := os.Create(p)
	if err != nil {
		return err
	}
	defer out.Close()
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(out, h)}
	w := entryfile.NewWriter(cw, FormatVersion)
	err = st.Snapshot(func(k, v []byte) error {
		if w.Count()%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return w.Add(k, v)
	})
	if err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	c.files = []capturedFile{{path: p, sha: hex.EncodeToString(h.Sum(nil)), size: cw.n}}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// restoreFull feeds the entries of the local entry file at p to st.
func restoreFull(st Store, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := entryfile.NewReader(f, size)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if v := r.Version(); !readableFormat(int(v)) {
		return fmt.Errorf("%w: entries of format %d; this version reads %d to %d", ErrCorrupt, v, MinFormatVersion, FormatVersion)
	}
	var readErr error
	err = st.Restore(func(yield func([]byte, []byte) bool) {
		for {
			k, v, ok, err := r.Next()
			if err != nil {
				readErr = fmt.Errorf("%w: %w", ErrCorrupt, err)
				return
			}
			if !ok || !yield(k, v) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return readErr
}
