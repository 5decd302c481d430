package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCompile feeds arbitrary bytes to Compile, as an upload would: it must
// accept the module or refuse it with one line wrapping ErrInvalidModule,
// and never panic or hang.
func FuzzCompile(f *testing.F) {
	paths, err := filepath.Glob("testdata/*.wasm")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 4096 { // the libc ones are too large to mutate usefully
			f.Add(b)
		}
	}
	f.Add(wasmModule{funcs: abiFuncs(), exportMemory: true}.bytes())
	// Declared counts are where a few bytes cost the most: each of these
	// once cost gigabytes.
	for _, h := range hostileModules() {
		f.Add(h.wasm)
	}
	e := newTestEngine(f, Config{CallTimeout: 100e6})
	f.Fuzz(func(t *testing.T, wasm []byte) {
		m, err := e.Compile(context.Background(), "fuzz.wasm", wasm)
		if err != nil {
			if !errors.Is(err, ErrInvalidModule) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Compile error %q: want one line wrapping ErrInvalidModule", err)
			}
			return
		}
		_ = m.Close(context.Background())
	})
}
