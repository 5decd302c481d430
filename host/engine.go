package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/eddy-stream/eddy/abi"
)

// Engine compiles and instantiates operator modules. It owns one wazero
// runtime, so the host modules ("eddy" and WASI) are instantiated once and
// compiled code is shared by every instance in the process. It is safe for
// concurrent use.
type Engine struct {
	cfg     Config
	logger  *slog.Logger
	runtime wazero.Runtime
	cache   wazero.CompilationCache // nil without CacheDir
	// wasi are the functions wasi_snapshot_preview1 provides, by name: the
	// only imports besides module "eddy" a guest may have.
	wasi   map[string]api.FunctionDefinition
	closed atomic.Bool
}

// NewEngine starts a runtime configured by cfg. Zero fields of cfg take
// their defaults (see Config).
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()

	// NewRuntimeConfig picks the compiler when this platform supports it
	// (checking the CPU features and executable memory the compiler needs,
	// which a GOARCH test cannot) and the interpreter otherwise.
	rc := wazero.NewRuntimeConfig().
		// Stops a runaway guest at its call deadline. It costs ~1µs per
		// call, which is why the ABI makes one call per batch.
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(cfg.memoryLimitPages())
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("host: compilation cache %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	e := &Engine{
		cfg:     cfg,
		logger:  cfg.Logger,
		runtime: wazero.NewRuntimeWithConfig(ctx, rc),
		cache:   cache,
	}
	if err := e.instantiateHostModules(ctx); err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	e.logger.Debug("host engine started",
		slog.String("cache_dir", cfg.CacheDir),
		slog.String("memory_limit", sizeString(uint64(cfg.memoryLimitPages())*wasmPageSize)),
		slog.Duration("call_timeout", cfg.CallTimeout))
	return e, nil
}

func (e *Engine) instantiateHostModules(ctx context.Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.runtime); err != nil {
		return fmt.Errorf("host: instantiate %s: %w", abi.WASIModule, err)
	}
	e.wasi = e.runtime.Module(abi.WASIModule).ExportedFunctionDefinitions()
	if err := instantiateEddyModule(ctx, e.runtime); err != nil {
		return fmt.Errorf("host: instantiate host module %q: %w", abi.ImportModule, err)
	}
	return nil
}

// Close releases the runtime, every module compiled by it and every
// instance still open, then the compilation cache. Using any of them
// afterwards fails with ErrClosed or a wazero error.
func (e *Engine) Close(ctx context.Context) error {
	if e.closed.Swap(true) {
		return nil
	}
	err := e.runtime.Close(ctx)
	if e.cache != nil {
		if cerr := e.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("host: close engine: %w", err)
	}
	return nil
}

// Load reads the module at path and compiles it; the module's name is path.
func (e *Engine) Load(ctx context.Context, path string) (*Module, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	return e.Compile(ctx, path, wasm)
}

// Compile compiles wasm and validates it against the ABI: required exports
// and their signatures, exported memory, allowed imports, and the declared
// ABI version (read from a probe instance). A module that fails any check is
// refused with an error wrapping ErrInvalidModule. name identifies the
// module in errors and logs.
func (e *Engine) Compile(ctx context.Context, name string, wasm []byte) (m *Module, err error) {
	// The bytes come from whoever uploaded the module: should they trip a
	// bug in wazero's decoder or compiler, refuse the module rather than
	// take the process down.
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, markf([]error{ErrInvalidModule}, "module %s: the runtime failed on this module: %s", name, firstLine(fmt.Sprint(r)))
		}
	}()
	if e.closed.Load() {
		return nil, markf([]error{ErrClosed}, "module %s: engine is closed", name)
	}
	start := time.Now()
	if err := checkMagic(wasm); err != nil {
		return nil, markf([]error{ErrInvalidModule}, "module %s: %v", name, err)
	}
	compiled, err := e.runtime.CompileModule(ctx, wasm)
	if err != nil {
		return nil, markf([]error{ErrInvalidModule}, "module %s: does not compile: %s", name, firstLine(err.Error()))
	}
	sum := sha256.Sum256(wasm)
	m = &Module{engine: e, name: name, sha256: hex.EncodeToString(sum[:]), compiled: compiled}
	if err := m.validate(ctx); err != nil {
		_ = compiled.Close(ctx)
		return nil, err
	}
	e.logger.Info("operator module compiled",
		slog.String("module", name),
		slog.String("sha256", m.sha256),
		slog.Uint64("abi_version", uint64(m.abiVersion)),
		slog.Duration("took", time.Since(start)))
	return m, nil
}

// Module is a compiled, validated operator module from which instances are
// made. It is safe for concurrent use.
type Module struct {
	engine   *Engine
	name     string
	sha256   string
	compiled wazero.CompiledModule

	// Filled by validate.
	abiVersion    uint32
	hasInitialize bool
	// memoryLimit is the most memory an instance can have: the engine's
	// limit or the module's own declared maximum when that is lower.
	memoryLimit uint64

	closed atomic.Bool
}

// Name is the name given to Compile (the path for Load).
func (m *Module) Name() string { return m.name }

// SHA256 is the hex SHA-256 of the module's bytes.
func (m *Module) SHA256() string { return m.sha256 }

// ABIVersion is the ABI version the module declared.
func (m *Module) ABIVersion() uint32 { return m.abiVersion }

// Close releases the module's compiled code. Instances already made keep
// working; NewInstance fails afterwards. Modules are also released by
// Engine.Close, so this matters only to a long-lived process that loads
// many modules.
func (m *Module) Close(ctx context.Context) error {
	if m.closed.Swap(true) {
		return nil
	}
	if err := m.compiled.Close(ctx); err != nil {
		return fmt.Errorf("module %s: close: %w", m.name, err)
	}
	return nil
}
