package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host/internal/interrupt"
	"github.com/eddy-stream/eddy/host/internal/wasmcheck"
)

// Engine compiles and instantiates operator modules. It owns one wazero
// runtime, so the host modules ("eddy" and WASI) are instantiated once and
// compiled code is shared by every instance in the process. It is safe for
// concurrent use.
type Engine struct {
	cfg     Config
	logger  *slog.Logger
	runtime wazero.Runtime
	// checker validates uploads as they came, before they are instrumented
	// (see Compile). It is an interpreter runtime: validation is the same
	// in either engine, and the interpreter gets there without compiling to
	// machine code, several times faster.
	checker wazero.Runtime
	cache   wazero.CompilationCache // nil without CacheDir
	// limits bound what a module may declare before wazero sees it (see
	// Compile).
	limits wasmcheck.Limits
	// wasi are the functions wasi_snapshot_preview1 provides, by name: the
	// only imports besides module "eddy" a guest may have.
	wasi   map[string]api.FunctionDefinition
	closed atomic.Bool

	// live are the instances not yet released, so that Close can stop
	// their guests; nil once closed.
	mu   sync.Mutex
	live map[*Instance]struct{}
	// running counts guest calls in progress, so that Close can wait for
	// them to unwind; drained is closed when the last one ends after Close
	// began.
	running   atomic.Int64
	drained   chan struct{}
	drainOnce sync.Once

	metrics engineMetrics // of guest calls (metrics.go)
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
	//
	// Not WithCloseOnContextDone: it makes every loop iteration exit to Go
	// and back, which made tight guest loops up to 20 times slower. Guests
	// are instrumented instead (package interrupt) and stopped through a
	// flag of their own (Instance.call).
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(cfg.memoryLimitPages())
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("host: compilation cache %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	limits := wasmcheck.DefaultLimits()
	limits.MemoryPages = cfg.memoryLimitPages()
	limits.TableElements = cfg.TableLimit
	e := &Engine{
		cfg:     cfg,
		logger:  cfg.Logger,
		runtime: wazero.NewRuntimeWithConfig(ctx, rc),
		checker: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().
			WithMemoryLimitPages(cfg.memoryLimitPages())),
		cache:   cache,
		limits:  limits,
		live:    map[*Instance]struct{}{},
		drained: make(chan struct{}),
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

// Close stops the guests still running and waits, until ctx is done, for
// their calls to return (a call blocked in its caller's emit callback
// returns when the callback does). Then it releases the runtime, every
// module compiled by it and every instance still open, and the compilation
// cache. Using any of them afterwards fails with ErrClosed or a wazero
// error. If ctx is done first, Close returns an error and releases
// nothing: the guests still running keep their memory.
func (e *Engine) Close(ctx context.Context) error {
	if e.closed.Swap(true) {
		return nil
	}
	e.mu.Lock()
	for i := range e.live {
		i.interrupt()
	}
	e.live = nil
	e.mu.Unlock()
	// Closing the runtime under a running guest would race with it:
	// wazero releases resources (WASI's among them) the guest may be using,
	// and unmaps its memory (memory_unix.go), which would crash the process
	// when the guest touched it. So a runtime whose guests do not return in
	// time is left open: a leak, until they return, rather than a crash.
	if e.running.Load() > 0 {
		select {
		case <-e.drained:
		case <-ctx.Done():
			return fmt.Errorf("host: close engine: %d guest calls still running (blocked in their emit callbacks?); the runtime is left open: %w",
				e.running.Load(), ctx.Err())
		}
	}
	err := e.runtime.Close(ctx)
	if cerr := e.checker.Close(ctx); err == nil {
		err = cerr
	}
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
//
// Before wazero reads the module, Compile refuses one that declares more
// than its bytes can hold (functions, locals, names, segments, …), more
// than 50,000 locals in a function or 524,288 in all, a memory larger than
// Config.MemoryLimit or tables of more than 1,048,576 elements in all: see
// package wasmcheck.
//
// What runs is an instrumented copy of wasm (package interrupt), which
// Instance.call can stop at its deadline; the module's SHA-256 remains that
// of wasm.
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
	// wazero sizes what it allocates by the counts the module declares
	// before it reads what they count: a 15-byte module can make it
	// allocate 16 GiB, or run the process out of memory, which no recover
	// catches. So the counts are checked against the bytes that hold them
	// first, as are the locals and the memory and table sizes that would
	// cost the process memory beyond the guest's limit.
	if err := wasmcheck.Check(wasm, e.limits); err != nil {
		if errors.Is(err, wasmcheck.ErrMalformed) {
			return nil, markf([]error{ErrInvalidModule}, "module %s: does not compile: %v", name, err)
		}
		return nil, markf([]error{ErrInvalidModule}, "module %s: %v", name, err)
	}
	compiled, growable, err := e.compile(ctx, name, wasm)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	m = &Module{engine: e, name: name, sha256: hex.EncodeToString(sum[:]), compiled: compiled, growableTables: growable}
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

// compile validates wasm as it came, then instruments it and compiles the
// result for running. Validating the original matters: instrumenting adds
// globals, so an instruction naming a global the module lacks could
// become valid, and a guest that could write its own interrupt flag could
// clear it. (Instrument refuses those too; wazero is the authority.) It
// also makes wazero's messages point at the author's own bytes.
//
// Before instrumenting, the tables' maximums are lowered to
// Config.TableLimit (wasmcheck.CapTables): wazero grows a table without
// bound while the module's maximum allows, and a table.grow bomb took 3.6
// GB. growable reports that the module's tables could have grown beyond
// the limit, so that a trap can name it.
func (e *Engine) compile(ctx context.Context, name string, wasm []byte) (_ wazero.CompiledModule, growable bool, _ error) {
	checked, err := e.checker.CompileModule(ctx, wasm)
	if err != nil {
		return nil, false, markf([]error{ErrInvalidModule}, "module %s: does not compile: %s", name, firstLine(err.Error()))
	}
	_ = checked.Close(ctx)
	capped, growable, err := wasmcheck.CapTables(wasm, e.cfg.TableLimit)
	if err != nil {
		return nil, false, markf([]error{ErrInvalidModule}, "module %s: cannot bound its tables: %v", name, err)
	}
	runnable, err := interrupt.Instrument(capped)
	if err != nil {
		return nil, false, markf([]error{ErrInvalidModule}, "module %s: cannot add the deadline check: %v", name, err)
	}
	compiled, err := e.runtime.CompileModule(ctx, runnable)
	if err != nil {
		return nil, false, markf([]error{ErrInvalidModule}, "module %s: does not compile once the deadline check is added: %s",
			name, firstLine(err.Error()))
	}
	return compiled, growable, nil
}

// register adds an instance to those Close stops; false if the engine is
// closed.
func (e *Engine) register(i *Instance) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.live == nil {
		return false
	}
	e.live[i] = struct{}{}
	return true
}

func (e *Engine) unregister(i *Instance) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.live, i)
}

// enter counts a guest call in; false if the engine is closing. The
// counter and closed are both sequentially consistent atomics, so either
// the call sees closed or Close sees the call.
func (e *Engine) enter() bool {
	e.running.Add(1)
	if e.closed.Load() {
		e.leave()
		return false
	}
	return true
}

// leave counts a guest call out, telling Close when the last one is.
func (e *Engine) leave() {
	if e.running.Add(-1) == 0 && e.closed.Load() {
		e.drainOnce.Do(func() { close(e.drained) })
	}
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
	// aggregate: the module exports the eddy_agg_* functions (ABI
	// version 3), and may lack eddy_process.
	aggregate bool
	// twoInput: the module exports eddy_process2 (version 5), so it takes
	// the records of a node's two inputs, each with its input's index.
	twoInput bool
	// hasStart: the module had a start function, which instrumenting
	// turned into an export that the host calls after instantiation.
	hasStart bool
	// memoryLimit is the most memory an instance can have: the engine's
	// limit or the module's own declared maximum when that is lower.
	memoryLimit uint64
	// growableTables: the module's tables could grow beyond
	// Config.TableLimit but for the maximums the host lowered, so a trap
	// may be the guest giving up on a failed table.grow.
	growableTables bool

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
