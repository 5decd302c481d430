package eddy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWriteSDK(t *testing.T) {
	tests := []struct {
		lang      string
		want      []string // among the files written
		wantNone  []string // substrings no written path may have
		wantCount int      // at least this many files
	}{
		{"go", []string{"abi/ABI.md", "abi/abi.go", "abi/codec.go", "abi/fields.go", "abi/jsonscan/jsonscan.go", "abi/jsonscan/paths.go", "abi/jsonscan/plain_amd64.s", "sdk/go/eddy.go",
			"sdk/go/internal/guest/abi_wasip1.go", "sdk/go/keyed/keyed.go", "sdk/go/aggregate/aggregate.go",
			"sdk/go/window/window.go", "sdk/go/README.md"}, []string{"_test.go", "testdata", "sdk/c/"}, 12},
		{"c", []string{"abi/ABI.md", "sdk/c/eddy.h", "sdk/c/eddy.c", "sdk/c/eddy_keyed.c", "sdk/c/eddy_aggregate.c",
			"sdk/c/eddy_window.c", "sdk/c/eddy_json.c", "sdk/c/eddy_fields.c", "sdk/c/eddy_fields.h", "sdk/c/README.md"}, []string{".go", "sdk/go/"}, 10},
	}
	for _, tc := range tests {
		t.Run(tc.lang, func(t *testing.T) {
			dir := t.TempDir()
			written, err := WriteSDK(dir, tc.lang)
			if err != nil {
				t.Fatal(err)
			}
			if len(written) < tc.wantCount {
				t.Errorf("wrote %d files, want at least %d: %v", len(written), tc.wantCount, written)
			}
			for _, w := range tc.want {
				if !slices.Contains(written, w) {
					t.Errorf("did not write %s: %v", w, written)
				}
			}
			for _, p := range written {
				for _, bad := range tc.wantNone {
					if strings.Contains(p, bad) {
						t.Errorf("wrote %s", p)
					}
				}
				// The copy is the repository's file, byte for byte.
				got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.FromSlash(p))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the repository's", p)
				}
			}
		})
	}
}

func TestWriteSDKUnknownLanguage(t *testing.T) {
	if _, err := WriteSDK(t.TempDir(), "cobol"); !errors.Is(err, ErrNoSDK) {
		t.Fatalf("WriteSDK(cobol) = %v, want ErrNoSDK", err)
	}
}

func TestGoVersion(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	v := GoVersion()
	if v == "" || !bytes.Contains(mod, []byte("\ngo "+v+"\n")) {
		t.Fatalf("GoVersion() = %q, not the go directive of go.mod", v)
	}
}

// TestWriteSDKEveryLanguage catches a language added to sdkDirs without
// its go:embed line, which would otherwise fail only in eddy new.
func TestWriteSDKEveryLanguage(t *testing.T) {
	for _, lang := range SDKLanguages() {
		written, err := WriteSDK(t.TempDir(), lang)
		if err != nil || len(written) == 0 {
			t.Errorf("WriteSDK(%s) = %d files, %v", lang, len(written), err)
		}
	}
}
