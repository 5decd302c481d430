package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFileStore(t *testing.T) {
	suite{
		newStore: func(t *testing.T) Store {
			st, err := Open(t.Context(), "file://"+t.TempDir(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		writers:  8,
		putsEach: 40,
	}.run(t)
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, c := range []struct {
		url  string
		root string
	}{
		{"file://" + dir + "/a", dir + "/a"},
		{"file:" + dir + "/b", dir + "/b"},
		{"file://localhost" + dir + "/c", dir + "/c"},
		{dir + "/d/e", dir + "/d/e"},
		{"rel/f", dir + "/rel/f"},
		{"./g", dir + "/g"},
		{"h:colon", dir + "/h:colon"}, // not a scheme we know, and no "://": a path
	} {
		st, err := Open(t.Context(), c.url, Config{})
		if err != nil {
			t.Errorf("Open(%q): %v", c.url, err)
			continue
		}
		if got := st.(*fileStore).root; got != c.root {
			t.Errorf("Open(%q) root = %s, want %s", c.url, got, c.root)
		}
		if fi, err := os.Stat(c.root); err != nil || !fi.IsDir() {
			t.Errorf("Open(%q) did not create %s: %v", c.url, c.root, err)
		}
	}
	for _, bad := range []string{
		"", "file://otherhost/x", "file:relative", "file:///x?q=1", "ftp://host/x", "s3:bucket", "s3://",
		"s3://bucket?endpoint=x&bogus=1", "s3://bucket/a//b?endpoint=x", "s3://user:secret@bucket/x?endpoint=x",
		"s3://bucket?endpoint=http://x", "s3://bucket?tls=maybe&endpoint=x", "s3://Bad_Bucket?endpoint=x",
	} {
		st, err := Open(t.Context(), bad, Config{})
		if err == nil {
			st.Close()
			t.Errorf("Open(%q) succeeded", bad)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Open(%q) error %q: want ErrInvalidConfig", bad, err)
		}
		if !strings.HasPrefix(err.Error(), "storage: open ") || strings.Count(err.Error(), "storage:") != 1 || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error %q: want one line starting with storage: and no secret", bad, err)
		}
	}
	// A root that cannot be a directory.
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), filepath.Join(dir, "file"), Config{}); err == nil {
		t.Error("Open of a regular file as root succeeded")
	}
}

func TestFileStoreLayout(t *testing.T) {
	root := t.TempDir()
	st, err := Open(t.Context(), root, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	put(t, st, "a/b/c", []byte("c"))
	if b, err := os.ReadFile(filepath.Join(root, "a", "b", "c")); err != nil || string(b) != "c" {
		t.Fatalf("object not at its path: %q, %v", b, err)
	}

	// A key cannot be both an object and a "directory" of objects here.
	if err := st.Put(ctx, "a/b", strings.NewReader("x"), 1); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Put(a/b) over directory: error %v, want ErrInvalidKey", err)
	}
	if err := st.Put(ctx, "a/b/c/d", strings.NewReader("x"), 1); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Put(a/b/c/d) under object: error %v, want ErrInvalidKey", err)
	}
	wantContent(t, st, "a/b/c", []byte("c"))

	// Failed Puts leave no temporary files; stray ones are never listed.
	if err := os.WriteFile(filepath.Join(root, "a", reservedPrefix+"-stray"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, st, ""); !slices.Equal(got, []string{"a/b/c"}) {
		t.Errorf("List = %q, want [a/b/c]", got)
	}
	os.Remove(filepath.Join(root, "a", reservedPrefix+"-stray"))

	// Deleting the last object under a directory prunes it, up to the root.
	if err := st.Delete(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Errorf("root after deleting everything: %v, %v", ents, err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("root itself was removed: %v", err)
	}

	// A symlinked or special file is not an object, and a non-empty
	// directory is never deleted as one.
	put(t, st, "x/y", []byte("y"))
	if err := st.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, st, "x/y", []byte("y"))
}
