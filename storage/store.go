package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Store is a blob store. It exists for decoupling (callers take a Store and
// tests hand them either implementation), not for third-party
// implementations: the contracts below are what the two built-in ones
// guarantee and what callers may rely on.
//
// All methods are safe for concurrent use. Every method validates its key
// first (see [ValidateKey]) and fails with [ErrInvalidKey] without touching
// the store. A method whose context is done returns an error matching the
// context's error. When the backing server cannot be reached, errors match
// [ErrUnavailable] and the caller may retry later. After Close, every
// method fails with [ErrClosed].
type Store interface {
	// Put stores the bytes of r under key, replacing any previous object.
	// It is atomic: a concurrent or later Get, Stat or List sees either the
	// previous object (or none) or the complete new one, never a part;
	// if Put fails, the previous object is left as it was. When two Puts of
	// one key race, one of them wins whole.
	//
	// size is the exact number of bytes r yields, or -1 if unknown (the s3
	// store then uploads in parts of Config.PartSize). With a size ≥ 0, Put
	// reads exactly size bytes and fails if r ends sooner; it does not read
	// past size. Put does not close r.
	Put(ctx context.Context, key string, r io.Reader, size int64) error

	// Get opens the object at key for reading; the caller must close it.
	// A missing key gives an error matching [ErrNotFound]. The reader yields
	// the object as it was when Get returned, even if it is replaced or
	// deleted meanwhile (the s3 store may instead fail the read).
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// Stat describes the object at key; a missing key gives an error
	// matching [ErrNotFound].
	Stat(ctx context.Context, key string) (Info, error)

	// Delete removes the object at key. Deleting a missing key is not an
	// error, so a retried Delete is harmless.
	Delete(ctx context.Context, key string) error

	// List describes every object whose key starts with prefix, in
	// ascending byte order of keys. The prefix is a plain string prefix,
	// not a directory: "chk-1" matches "chk-1/a" and "chk-10/a"; end it
	// with "/" to mean "under chk-1". An empty prefix lists the whole
	// store. Objects put or deleted while List runs may or may not appear.
	List(ctx context.Context, prefix string) ([]Info, error)

	// Close releases the store's resources (idle connections). It does
	// not wait for, or cancel, calls in progress.
	Close() error
}

// Info describes a stored object.
type Info struct {
	Key      string    // as given to Put
	Size     int64     // in bytes
	Modified time.Time // when it was last put, as the store's clock saw it
}

var (
	// ErrNotFound: no object is stored under the key.
	ErrNotFound = errors.New("storage: not found")
	// ErrInvalidKey: the key is not a clean relative slash-separated path,
	// or it clashes with the layout of existing keys (see ValidateKey).
	ErrInvalidKey = errors.New("storage: invalid key")
	// ErrUnavailable: the server could not be reached or answered that it
	// is unavailable; the error also wraps the cause. Retrying later may
	// succeed.
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrCorrupt: a content-addressed blob does not hash to its name.
	ErrCorrupt = errors.New("storage: corrupt blob")
	// ErrClosed: the Store has been closed.
	ErrClosed = errors.New("storage: store is closed")
)

// Key limits, chosen so that every valid key works on both stores: S3
// allows 1024 bytes per key and most file systems 255 bytes per name.
const (
	MaxKeyLen     = 1024
	MaxSegmentLen = 255
)

// reservedPrefix starts the names of the file store's temporary files; no
// key segment may start with it, so a temporary file is never taken for an
// object.
const reservedPrefix = ".eddy-tmp"

// ValidateKey reports whether key is usable in every Store. A key is a
// relative slash-separated path: not empty, at most MaxKeyLen bytes, valid
// UTF-8, with no leading or trailing slash, no empty, "." or ".." segment,
// no segment longer than MaxSegmentLen bytes or starting with ".eddy-tmp",
// and no control character or backslash. Other characters — spaces,
// unicode, "+%#?&=:@" and the like — are fine.
//
// One rule cannot be checked from the key alone: a key must not also be
// a "directory" of another key ("a" and "a/b" together). The file store
// rejects the second of such a pair with ErrInvalidKey; callers should
// design their layouts so that it never happens.
func ValidateKey(key string) error {
	if err := checkPath(key, false); err != nil {
		return fmt.Errorf("%w: %q: %s", ErrInvalidKey, key, err)
	}
	return nil
}

// validatePrefix accepts what ValidateKey accepts, plus the empty prefix,
// a trailing slash and a partial last segment.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := checkPath(prefix, true); err != nil {
		return fmt.Errorf("%w: prefix %q: %s", ErrInvalidKey, prefix, err)
	}
	return nil
}

// checkPath explains what is wrong with p as a key (or, if isPrefix, as a
// list prefix), or returns nil.
func checkPath(p string, isPrefix bool) error {
	switch {
	case p == "":
		return errors.New("empty")
	case len(p) > MaxKeyLen:
		return fmt.Errorf("longer than %d bytes", MaxKeyLen)
	case !utf8.ValidString(p):
		return errors.New("not valid UTF-8")
	case p[0] == '/':
		return errors.New("absolute (leading slash)")
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("control character %U", c)
		}
		if c == '\\' {
			return errors.New("backslash")
		}
	}
	segs := strings.Split(p, "/")
	last := len(segs) - 1
	for i, seg := range segs {
		partial := isPrefix && i == last // "chk-1" in "job/chk-1" may be a partial name
		switch {
		case seg == "" && partial:
			// A trailing slash ends a prefix.
		case seg == "" && i == last:
			return errors.New("trailing slash")
		case seg == "":
			return errors.New("empty segment (double slash)")
		case (seg == "." || seg == "..") && !partial:
			return fmt.Errorf("%q segment", seg)
		case len(seg) > MaxSegmentLen:
			return fmt.Errorf("segment longer than %d bytes", MaxSegmentLen)
		case strings.HasPrefix(seg, reservedPrefix):
			return fmt.Errorf("segment starts with reserved %q", reservedPrefix)
		}
	}
	return nil
}

// notFound is the error for a missing key.
func notFound(key string) error {
	return fmt.Errorf("%w: %s", ErrNotFound, key)
}

// opError adds the operation and key to err, unless err is nil or already
// one of the package's errors, which name the key themselves.
func opError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range []error{ErrNotFound, ErrInvalidKey, ErrUnavailable, ErrCorrupt, ErrClosed, ErrInvalidConfig} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	return fmt.Errorf("storage: %s %s: %w", op, key, err)
}

// sourceError is an error of the reader given to Put, not of the store.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return "read source: " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// shortRead is the error of a Put whose reader ended before size bytes.
func shortRead(n, size int64) error {
	return &sourceError{fmt.Errorf("ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)}
}

// sourceReader marks the errors of the reader given to Put.
type sourceReader struct{ r io.Reader }

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = &sourceError{err}
	}
	return n, err
}

// precheck is the common start of the methods that take a key: a closed
// store, an invalid key and a done context fail before any I/O.
func precheck(ctx context.Context, closed *atomic.Bool, op, key string) error {
	if closed.Load() {
		return ErrClosed
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	return opError(op, key, ctx.Err())
}

func precheckPrefix(ctx context.Context, closed *atomic.Bool, prefix string) error {
	if closed.Load() {
		return ErrClosed
	}
	if err := validatePrefix(prefix); err != nil {
		return err
	}
	return opError("list", "prefix "+strconv.Quote(prefix), ctx.Err())
}
