package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	// A leftover temporary file with a wide mode does not widen the result.
	if err := os.WriteFile(path+".tmp", []byte("old"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	if data, _ := os.ReadFile(path); string(data) != "new" {
		t.Fatalf("content %q", data)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := Write(filepath.Join(t.TempDir(), "no", "dir"), nil, 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
