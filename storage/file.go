package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// fileStore keeps each object as a file under root, at the key's path.
type fileStore struct {
	root   string
	closed atomic.Bool
}

func openFile(dir string) (*fileStore, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &fileStore{root: root}, nil
}

func (s *fileStore) String() string { return "file://" + s.root }

func (s *fileStore) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

func (s *fileStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := precheck(ctx, &s.closed, "put", key); err != nil {
		return err
	}
	return opError("put", key, s.put(ctx, key, r, size))
}

func (s *fileStore) put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	dst := s.path(key)
	dir := filepath.Dir(dst)
	tmp, newDir, err := s.createTemp(key, dir)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := copyExact(tmp, &ctxReader{ctx, &sourceReader{r}}, size); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		if fi, statErr := os.Stat(dst); statErr == nil && fi.IsDir() {
			return fmt.Errorf("%w: %s: other keys are stored under it", ErrInvalidKey, key)
		}
		return err
	}
	// The rename is durable only once the directory is synced, and a new
	// directory only once its parent is.
	if err := syncDir(dir); err != nil {
		return err
	}
	for d := dir; newDir && d != s.root && strings.HasPrefix(d, s.root); d = filepath.Dir(d) {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// createTemp makes the temporary file in the target's directory, creating
// the directories first (newDir tells whether it had to). A concurrent
// Delete may prune a directory between the two steps, hence the retries.
func (s *fileStore) createTemp(key, dir string) (f *os.File, newDir bool, err error) {
	for attempt := 0; ; attempt++ {
		if _, err := os.Stat(dir); err != nil {
			newDir = true
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, syscall.ENOTDIR) {
				return nil, false, fmt.Errorf("%w: %s: a prefix of it is stored as an object", ErrInvalidKey, key)
			}
			return nil, false, err
		}
		f, err := os.CreateTemp(dir, reservedPrefix+"-*")
		if errors.Is(err, fs.ErrNotExist) && attempt < 100 {
			continue
		}
		return f, newDir, err
	}
}

func (s *fileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := precheck(ctx, &s.closed, "get", key); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fs.ErrNotExist // a directory: only other keys live under it
		}
		return nil, s.wrap("get", key, err)
	}
	return f, nil
}

func (s *fileStore) Stat(ctx context.Context, key string) (Info, error) {
	if err := precheck(ctx, &s.closed, "stat", key); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(s.path(key))
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		return Info{}, s.wrap("stat", key, err)
	}
	return Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

func (s *fileStore) Delete(ctx context.Context, key string) error {
	if err := precheck(ctx, &s.closed, "delete", key); err != nil {
		return err
	}
	p := s.path(key)
	fi, err := os.Lstat(p)
	if err != nil || fi.IsDir() {
		if err == nil || isNotExist(err) {
			return nil
		}
		return s.wrap("delete", key, err)
	}
	if err := os.Remove(p); err != nil && !isNotExist(err) {
		return s.wrap("delete", key, err)
	}
	// Prune directories left empty, so that the tree mirrors the keys and
	// "a" can be put after "a/b" is gone. Remove fails on a non-empty
	// directory, which ends the walk.
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

func (s *fileStore) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := precheckPrefix(ctx, &s.closed, prefix); err != nil {
		return nil, err
	}
	// Walk only the directory that holds the prefix's last segment.
	base := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = s.path(prefix[:i])
	}
	var out []Info
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) { // base missing, or removed meanwhile
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), reservedPrefix) {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			// Descend only where keys with the prefix may be.
			if p != base && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		out = append(out, Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, opError("list", "prefix "+strconv.Quote(prefix), err)
	}
	// WalkDir's order is per directory ("a/b" before "a.txt"); keys sort by
	// byte order ("a.txt" before "a/b").
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *fileStore) Close() error {
	s.closed.Store(true)
	return nil
}

// wrap maps a file-system error of operation op on key.
func (s *fileStore) wrap(op, key string, err error) error {
	if isNotExist(err) {
		return notFound(key)
	}
	return opError(op, key, err)
}

// isNotExist also counts ENOTDIR: "a/b" when "a" is a file is simply absent.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyExact copies r to w: exactly size bytes, or to EOF if size < 0.
func copyExact(w io.Writer, r io.Reader, size int64) error {
	if size < 0 {
		_, err := io.Copy(w, r)
		return err
	}
	n, err := io.CopyN(w, r, size)
	if err == io.EOF {
		return shortRead(n, size)
	}
	return err
}

// ctxReader stops a long copy when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
