package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ContentKey returns the key of the content-addressed blob with the given
// lowercase hex sha256 under prefix: prefix/sha (or sha if prefix is "").
func ContentKey(prefix, sha string) string {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return sha
	}
	return prefix + "/" + sha
}

// PutContent stores data under prefix/<sha256 of data> and returns the
// digest in lowercase hex. If an object of the same size is already there,
// it is left alone: its name says what it holds, so a second upload of the
// same module costs one Stat. (A stored blob of another size is corrupt
// and is replaced.)
func PutContent(ctx context.Context, st Store, prefix string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	key := ContentKey(prefix, sha)
	info, err := st.Stat(ctx, key)
	switch {
	case err == nil && info.Size == int64(len(data)):
		return sha, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return "", err
	}
	if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return "", err
	}
	return sha, nil
}

// GetContent reads the blob that PutContent stored under prefix and sha
// and checks that it hashes to sha: a blob that does not gives an error
// matching ErrCorrupt, a missing one ErrNotFound, and a sha that is not 64
// lowercase hex digits ErrInvalidKey.
func GetContent(ctx context.Context, st Store, prefix, sha string) ([]byte, error) {
	if !isSHA256Hex(sha) {
		return nil, fmt.Errorf("%w: %q is not a lowercase hex sha256", ErrInvalidKey, sha)
	}
	key := ContentKey(prefix, sha)
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	h := sha256.New()
	data, err := io.ReadAll(io.TeeReader(rc, h))
	if err != nil {
		return nil, opError("get", key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		return nil, fmt.Errorf("%w: %s: content hashes to %s", ErrCorrupt, key, got)
	}
	return data, nil
}

func isSHA256Hex(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
