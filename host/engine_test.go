package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" = valid
	}{
		{name: "zero value takes defaults", cfg: Config{}},
		{name: "defaults", cfg: DefaultConfig()},
		{name: "memory below one page", cfg: Config{MemoryLimit: 1000}, wantErr: "MemoryLimit 1000 is outside"},
		{name: "memory above 4 GiB", cfg: Config{MemoryLimit: 5 << 30}, wantErr: "MemoryLimit"},
		{name: "negative timeout", cfg: Config{CallTimeout: -time.Second}, wantErr: "CallTimeout -1s is negative"},
		{name: "negative rate", cfg: Config{LogLinesPerSecond: -1}, wantErr: "LogLinesPerSecond"},
		{name: "negative burst", cfg: Config{LogBurst: -1}, wantErr: "LogBurst -1 is negative"},
		{name: "all problems in one line", cfg: Config{MemoryLimit: 1, LogBurst: -1}, wantErr: "MemoryLimit 1 is outside [64 KiB, 4 GiB]; LogBurst -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Validate() = %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompileRejectsInvalidModules(t *testing.T) {
	e := newTestEngine(t, Config{CallTimeout: 200 * time.Millisecond})
	fixture := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name + ".wasm")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name  string
		wasm  []byte
		is    error    // besides ErrInvalidModule, if set
		words []string // all must appear in the one-line message
	}{
		{name: "not wasm", wasm: []byte("#!/bin/sh\necho hi\n"), words: []string{"not a WebAssembly binary"}},
		{name: "empty", wasm: nil, words: []string{"not a WebAssembly binary"}},
		{name: "corrupt after header", wasm: []byte("\x00asm\x01\x00\x00\x00\x01\x7f"), words: []string{"does not compile"}},
		{name: "missing export", wasm: fixture("missing_export"),
			words: []string{`missing export "eddy_process" (want func(i32, i32) -> i32)`}},
		{name: "wrong export signature", wasm: fixture("wrong_sig"),
			words: []string{`export "eddy_process" has signature func(i32) -> i32, want func(i32, i32) -> i32`}},
		{name: "import not in the ABI", wasm: fixture("bad_import"),
			words: []string{`import "eddy"."nope" is not provided by this host`}},
		{name: "import from another module", wasm: fixture("env_import"),
			words: []string{`import "env"."host_thing"`, "unknown module"}},
		{name: "eddy import with wrong signature", wasm: fixture("bad_import_sig"),
			words: []string{`import "eddy"."emit" has signature func(i32), want func(i32, i32)`}},
		{name: "unsupported ABI version", wasm: fixture("abi_v8"),
			words: []string{"ABI version 8 is not supported by this host (supports 1, 2, 3, 4, 5, 6, 7)"}},
		{name: "no exported memory", wasm: wasmModule{funcs: abiFuncs()}.bytes(),
			words: []string{`no exported memory "memory"`}},
		{name: "imported memory", wasm: wasmModule{funcs: abiFuncs(), importMemory: true}.bytes(),
			words: []string{`imports memory "env"."memory"`, `no exported memory`}},
		{name: "several problems reported together", wasm: wasmModule{funcs: abiFuncs()[:3]}.bytes(),
			words: []string{`missing export "eddy_close" (want func() -> i32)`, `missing export "eddy_process"`, `no exported memory`}},
		{name: "_initialize with a result", wasm: wasmModule{exportMemory: true, funcs: append(abiFuncs(),
			wasmFunc{export: abi.ExportInitialize, results: []byte{0x7f}, body: []byte{0x41, 0}})}.bytes(),
			words: []string{`export "_initialize" has signature func() -> i32, want func()`}},
		{name: "_initialize traps", is: ErrTrap, wasm: wasmModule{exportMemory: true, funcs: append(abiFuncs(),
			wasmFunc{export: abi.ExportInitialize, body: opUnreachable})}.bytes(),
			words: []string{"probe instance: _initialize trapped: wasm error: unreachable"}},
		{name: "start function loops", is: ErrDeadline, wasm: wasmModule{exportMemory: true, start: 6, funcs: append(abiFuncs(),
			wasmFunc{body: opInfiniteLoop})}.bytes(),
			words: []string{"probe instance: instantiation exceeded its 200ms deadline"}},
		{name: "_initialize loops", is: ErrDeadline, wasm: wasmModule{exportMemory: true, funcs: append(abiFuncs(),
			wasmFunc{export: abi.ExportInitialize, body: opInfiniteLoop})}.bytes(),
			words: []string{"probe instance: _initialize exceeded its 200ms deadline"}},
		{name: "export name reserved for the deadline check", wasm: wasmModule{exportMemory: true, funcs: append(abiFuncs(),
			wasmFunc{export: "eddy_interrupt"})}.bytes(),
			words: []string{"cannot add the deadline check", `already exports "eddy_interrupt"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := e.Compile(context.Background(), "x.wasm", tt.wasm)
			if err == nil {
				t.Fatalf("Compile succeeded (ABI version %d), want an error", m.ABIVersion())
			}
			if !errors.Is(err, ErrInvalidModule) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("error %q does not wrap ErrInvalidModule and %v", err, tt.is)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "module x.wasm: ") || strings.Contains(msg, "\n") || !containsAll(msg, tt.words...) {
				t.Errorf("error = %q, want one line starting with the module name and containing %q", msg, tt.words)
			}
		})
	}
	checkEchoWorks(t, e)
}

func TestCompileAcceptsValidModules(t *testing.T) {
	e := newTestEngine(t, Config{})
	tests := []struct {
		name string
		wasm func(t *testing.T) []byte
	}{
		{name: "echo (C, wasi-libc reactor)", wasm: func(t *testing.T) []byte {
			b, err := os.ReadFile("testdata/echo.wasm")
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{name: "hand-built, no imports, no _initialize", wasm: func(*testing.T) []byte { return wasmModule{funcs: abiFuncs(), exportMemory: true}.bytes() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := tt.wasm(t)
			m, err := e.Compile(context.Background(), "ok.wasm", wasm)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			sum := sha256.Sum256(wasm)
			if m.Name() != "ok.wasm" || m.SHA256() != hex.EncodeToString(sum[:]) || m.ABIVersion() != 1 {
				t.Errorf("Name, SHA256, ABIVersion = %q, %q, %d", m.Name(), m.SHA256(), m.ABIVersion())
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	e := newTestEngine(t, Config{})
	_, err := e.Load(context.Background(), "testdata/nope.wasm")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "testdata/nope.wasm") {
		t.Fatalf("Load = %v, want a not-exist error naming the path", err)
	}
}

func TestCompilationCacheDir(t *testing.T) {
	dir := t.TempDir()
	countFiles := func() int {
		n := 0
		err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	e := newTestEngine(t, Config{CacheDir: dir})
	loadFixture(t, e, "echo")
	if countFiles() == 0 {
		t.Fatalf("compilation cache %s is empty after Compile", dir)
	}
	before := countFiles()

	// A second engine (a restarted process) finds the compiled code there.
	e2 := newTestEngine(t, Config{CacheDir: dir})
	checkEchoWorks(t, e2)
	if after := countFiles(); after != before {
		t.Errorf("cache grew from %d to %d files compiling the same module again", before, after)
	}
}

func TestClosedEngineAndModule(t *testing.T) {
	ctx := context.Background()
	e := newTestEngine(t, Config{}) // its cleanup's second Close must be a no-op
	m := loadFixture(t, e, "echo")
	i := newTestInstance(t, m, "job/echo[0]")
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(ctx); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := i.Process(nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Process after Engine.Close = %v, want ErrClosed", err)
	}
	if _, err := m.NewInstance(ctx, InstanceConfig{}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewInstance after Engine.Close = %v, want ErrClosed", err)
	}
	if _, err := e.Compile(ctx, "x", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Compile after Engine.Close = %v, want ErrClosed", err)
	}

	e2 := newTestEngine(t, Config{})
	m2 := loadFixture(t, e2, "echo")
	keep := newTestInstance(t, m2, "job/echo[1]")
	if err := m2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.NewInstance(ctx, InstanceConfig{}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewInstance after Module.Close = %v, want ErrClosed", err)
	}
	if err := keep.Open(nil); err != nil {
		t.Errorf("an instance made before Module.Close stopped working: %v", err)
	}
}
