package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host/internal/interrupt"
	"github.com/eddy-stream/eddy/state"
)

// initialBuffer is the size of the first input buffer the host asks the
// guest for (with the configuration), so that typical batches fit without a
// second eddy_alloc.
const initialBuffer = 64 << 10

// InstanceConfig names and routes one instance.
type InstanceConfig struct {
	// Name identifies the task in errors ("operator job/node[2]: …") and
	// logs, e.g. "job/node[2]". Default: the module name.
	Name string
	// Logger receives the guest's log, stdout and stderr lines. Default:
	// the engine's logger.
	Logger *slog.Logger
	// State is the keyed state and timers of the task (ABI version 2), used
	// by the instance's goroutine only. nil means the node is not keyed:
	// the guest's state and timer imports then trap.
	State state.Store
	// Keyed, with State nil, makes an instance for a keyed node whose
	// store is bound later (BindState): its eddy_open may declare states,
	// and it can make no other call until bound. A hot swap prepares the
	// new version so, on another goroutine than the task's.
	Keyed bool
	// Gate, when set, admits every guest call of the instance: the
	// worker's CPU share of the instance's tenant. nil: calls run at once.
	Gate Gate
	// Now is processing time in Unix milliseconds, what the guest's
	// processing_time import returns. nil: the wall clock. The local
	// harness (dataflow/localrun) drives it from a test's script.
	Now func() int64
	// Metrics labels the instance's series (Engine.Collector).
	Metrics MetricLabels

	// noMetrics: an instance that is not a task's (Compile's probe) has
	// no series.
	noMetrics bool
}

// Gate admits guest calls: Acquire returns once the call may run, and the
// instance calls release when it returned. Acquire fails only when ctx (the
// one NewInstance was given) ends; the call then fails with its error. An
// interface for decoupling (package dataflow/cpushare implements it), not
// for third-party implementations.
type Gate interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// lifecycle is where an instance is in the open → process → finish order.
type lifecycle uint8

const (
	created lifecycle = iota
	opened
	finished
)

// Instance is one running copy of a module, owned by one task. It is not
// safe for concurrent use: the ABI promises the guest it never sees
// concurrent calls.
//
// An error wrapping ErrOperatorFailed leaves the instance usable. Any other
// error from a guest call (trap, deadline, memory limit, bad pointer, exit)
// makes it unusable: it is released at once and every later call returns
// that same error.
type Instance struct {
	module *Module
	// who starts every error message: "operator <name>", or for the probe
	// instance Compile runs, "module <name>: probe instance".
	who     string
	timeout time.Duration
	// memLimit is the most memory this instance can have: the module's
	// limit, or the tenant's when lower (InstanceLimits).
	memLimit uint64
	log      *guestLog
	// ctx lives as long as the instance and carries it, so the host
	// functions, which are shared by every instance of the engine, find the
	// instance that called them. It is never cancelled: deadlines are the
	// interrupt flag's business.
	ctx context.Context
	// gate admits each guest call (nil: none); gateCtx is NewInstance's
	// context with its cancellation, so that a task stopped while waiting
	// for a slot stops waiting.
	gate    Gate
	gateCtx context.Context

	// The deadline. flag is the module's interrupt flag (package
	// interrupt): once set, the guest traps at its next loop iteration.
	// The timer is armed for each guest call and sets it when it fires;
	// Engine.Close sets it too. One timer per instance, Reset and Stopped
	// around each call, so that a call allocates nothing for its deadline.
	flag  api.MutableGlobal
	timer *time.Timer
	// fired receives once the timer's function has run, for a call whose
	// Stop came too late to wait for it.
	fired chan struct{}
	// interruptMu serialises interrupt, which the timer and Engine.Close
	// may call at once.
	interruptMu sync.Mutex
	interrupted bool          // the flag is set: the instance is done for
	wake        chan struct{} // closed when the flag is set: ends a guest's sleep

	wmod                                api.Module
	mem                                 api.Memory
	fnAlloc, fnOpen, fnProcess, fnClose api.Function
	fnProcess2                          api.Function // eddy_process2 (version 5), nil if not exported
	// stack is reused by every CallWithStack: parameters in, results out.
	stack []uint64

	// The guest's input buffer from the last eddy_alloc; bufCap 0 means none.
	buf, bufCap uint32

	// State of the guest call in progress, read by the host functions.
	phase   string             // export being called, "" between calls
	emit    func([]abi.Record) // where emitted records go
	out     []abi.Record       // decode target reused by every emit
	gather  abi.Gather         // values in parts (version 7): where emit gathers them
	outMem  uint32             // guest memory size when out was last filled
	emitted emitted            // what the call emitted so far, against limits
	failMsg string             // set by the fail import
	hostErr error              // error a host function trapped the guest with
	cbPanic any                // panic of the caller's emit callback, raised again after the call

	// limits are Config.MaxEmitRecords and MaxEmitBytes, kept here so the
	// emit path reads them without going through the engine.
	limits emitted

	keyed keyedState // ABI version 2: state, timers, watermark (keyed.go)
	agg   aggCalls   // ABI version 3: aggregate modules (aggregate.go)
	// fields is what the instance declared with the fields import (ABI
	// version 6, fields.go), nil if nothing.
	fields *abi.Fields

	state  lifecycle
	err    error // sticky: why the instance is unusable
	closed bool

	stats *instanceStats // nil: no metrics (a probe)
}

type instanceKey struct{}

// emitted counts what one guest call emitted, in records and encoded
// bytes (abi.RecordSize); it also holds the limits.
type emitted struct{ records, bytes uint64 }

// NewInstance instantiates the module for one task and runs its
// _initialize export. ctx bounds instantiation; its values (not its
// cancellation) are carried into every later guest call.
func (m *Module) NewInstance(ctx context.Context, cfg InstanceConfig) (*Instance, error) {
	if m.closed.Load() {
		return nil, markf([]error{ErrClosed}, "module %s: module is closed", m.name)
	}
	name := cfg.Name
	if name == "" {
		name = m.name
	}
	return m.newInstance(ctx, cfg, name, "operator "+name)
}

func (m *Module) newInstance(ctx context.Context, cfg InstanceConfig, name, who string) (*Instance, error) {
	e := m.engine
	if e.closed.Load() {
		return nil, markf([]error{ErrClosed}, "module %s: engine is closed", m.name)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = e.logger
	}
	i := &Instance{
		module:   m,
		who:      who,
		timeout:  e.cfg.CallTimeout,
		limits:   emitted{records: e.cfg.MaxEmitRecords, bytes: e.cfg.MaxEmitBytes},
		stack:    make([]uint64, 4),
		fired:    make(chan struct{}, 1),
		wake:     make(chan struct{}),
		memLimit: m.memoryLimit,
		gate:     cfg.Gate,
		gateCtx:  ctx,
	}
	if err := i.applyLimits(InstanceLimitsFrom(ctx)); err != nil {
		return nil, err
	}
	i.ctx = context.WithValue(context.WithoutCancel(ctx), instanceKey{}, i)
	i.keyed.init(cfg.State, cfg.Keyed, name)
	i.keyed.now = cfg.Now
	i.log = newGuestLog(i.ctx, logger.With(slog.String("instance", name), slog.String("module", m.name)),
		e.cfg.LogLinesPerSecond, e.cfg.LogBurst)

	// Instantiation runs no guest code: instrumenting turned the start
	// function, if any, into an export called below under a deadline.
	wmod, err := e.runtime.InstantiateModule(withGuestMemory(ctx, i.memLimit), m.compiled, i.moduleConfig())
	if err != nil {
		i.log.close()
		return nil, i.callError("instantiation", err, false)
	}
	flag, ok := wmod.ExportedGlobal(interrupt.ExportName).(api.MutableGlobal)
	if !ok { // cannot happen to an instrumented module
		_ = wmod.Close(context.Background())
		i.log.close()
		return nil, markf([]error{ErrInvalidModule}, "%s: the module has no interrupt flag %q", who, interrupt.ExportName)
	}
	i.wmod, i.flag = wmod, flag
	i.timer = time.AfterFunc(time.Hour, i.expire)
	i.timer.Stop()
	if !e.register(i) {
		i.Close()
		return nil, markf([]error{ErrClosed}, "module %s: engine is closed", m.name)
	}
	if !cfg.noMetrics {
		i.stats = &instanceStats{labels: cfg.Metrics, module: m.name}
		e.metrics.add(i.stats)
	}
	i.mem = wmod.ExportedMemory(abi.ExportMemory)
	i.fnAlloc = wmod.ExportedFunction(abi.ExportAlloc)
	i.fnOpen = wmod.ExportedFunction(abi.ExportOpen)
	i.fnProcess = wmod.ExportedFunction(abi.ExportProcess)
	i.fnProcess2 = wmod.ExportedFunction(abi.ExportProcess2)
	i.fnClose = wmod.ExportedFunction(abi.ExportClose)
	if m.hasStart {
		if err := i.call("instantiation", wmod.ExportedFunction(interrupt.StartExportName), nil); err != nil {
			i.Close()
			return nil, err
		}
	}
	if m.hasInitialize {
		if err := i.call(abi.ExportInitialize, wmod.ExportedFunction(abi.ExportInitialize), nil); err != nil {
			i.Close()
			return nil, err
		}
	}
	return i, nil
}

// Open hands the operator its configuration (the node's config as JSON;
// empty means "{}") through eddy_alloc and eddy_open. It must be called
// once, before Process.
func (i *Instance) Open(config []byte) error {
	if err := i.usable(); err != nil {
		return err
	}
	if i.state != created {
		return fmt.Errorf("%s: Open called twice", i.who)
	}
	if len(config) == 0 {
		config = []byte("{}")
	}
	ptr, err := i.buffer(len(config), "configuration")
	if err != nil {
		return err
	}
	view, _ := i.mem.Read(ptr, uint32(len(config))) // in bounds: buffer checked it
	copy(view, config)
	i.stack[0], i.stack[1] = uint64(ptr), uint64(len(config))
	if err := i.call(abi.ExportOpen, i.fnOpen, nil); err != nil {
		return err
	}
	if err := i.status(abi.ExportOpen); err != nil {
		return err
	}
	i.state = opened
	return nil
}

// Process writes recs into the guest's input buffer as one batch and calls
// eddy_process once. Records the guest emits are passed to emit, which may
// be called any number of times; they alias guest memory and are valid only
// until emit returns, so emit must copy what it keeps. A nil emit discards
// them.
func (i *Instance) Process(recs []abi.Record, emit func([]abi.Record)) error {
	if err := i.ready(abi.ExportProcess); err != nil {
		return err
	}
	if i.fnProcess == nil {
		return fmt.Errorf("%s: module %s is an aggregate module without %s: it folds windows, it does not process records",
			i.who, i.module.name, abi.ExportProcess)
	}
	ptr, size, err := i.writeBatch(recs)
	if err != nil {
		return err
	}
	i.stack[0], i.stack[1] = uint64(ptr), uint64(size)
	if err := i.call(abi.ExportProcess, i.fnProcess, emit); err != nil {
		return err
	}
	return i.status(abi.ExportProcess)
}

// Finish calls eddy_close so the operator flushes what it buffered, passing
// the records it emits to emit as Process does. No Process may follow.
func (i *Instance) Finish(emit func([]abi.Record)) error {
	if err := i.ready(abi.ExportClose); err != nil {
		return err
	}
	i.state = finished
	if err := i.call(abi.ExportClose, i.fnClose, emit); err != nil {
		return err
	}
	return i.status(abi.ExportClose)
}

// Close releases the instance and its memory. It does not call eddy_close
// (that is Finish). It is idempotent and safe after any error.
func (i *Instance) Close() error {
	if i.closed {
		return nil
	}
	i.closed = true
	i.log.close()
	if i.err == nil {
		i.err = markf([]error{ErrClosed}, "%s: instance is closed", i.who)
	}
	return i.release()
}

// release frees the wazero module; the Instance struct stays valid so that
// later calls return the sticky error.
func (i *Instance) release() error {
	if i.wmod == nil {
		return nil
	}
	wmod := i.wmod
	i.wmod, i.mem, i.out = nil, nil, nil
	i.module.engine.unregister(i)
	if i.stats != nil {
		i.module.engine.metrics.retire(i.stats)
	}
	if i.module.engine.closed.Load() {
		return nil // Engine.Close released it already.
	}
	if err := wmod.Close(context.Background()); err != nil {
		return fmt.Errorf("%s: close: %w", i.who, err)
	}
	return nil
}

// usable returns the sticky error of a failed or closed instance.
func (i *Instance) usable() error {
	if i.err != nil {
		return i.err
	}
	if i.module.engine.closed.Load() {
		return markf([]error{ErrClosed}, "%s: engine is closed", i.who)
	}
	return nil
}

// ready checks that export may be called now: the instance is usable, open
// and not finished. A violation is the caller's bug, not the guest's.
func (i *Instance) ready(export string) error {
	if err := i.usable(); err != nil {
		return err
	}
	switch i.state {
	case created:
		return fmt.Errorf("%s: %s before Open succeeded", i.who, export)
	case finished:
		return fmt.Errorf("%s: %s after Finish", i.who, export)
	}
	if i.keyed.keyed && i.keyed.store == nil {
		return fmt.Errorf("%s: %s before BindState", i.who, export)
	}
	return nil
}

// abiVersion calls eddy_abi_version (used by the probe instance).
func (i *Instance) abiVersion() (uint32, error) {
	if err := i.call(abi.ExportABIVersion, i.wmod.ExportedFunction(abi.ExportABIVersion), nil); err != nil {
		return 0, err
	}
	return uint32(i.stack[0]), nil
}

// buffer returns a guest buffer of at least n bytes for the host to write
// into, calling eddy_alloc only when the current one is too small.
func (i *Instance) buffer(n int, what string) (uint32, error) {
	if n <= int(i.bufCap) {
		return i.buf, nil
	}
	limit := i.memLimit
	if uint64(n) > limit || uint64(n) > math.MaxUint32 {
		return 0, markf([]error{ErrMemoryLimit}, "%s: %s of %d bytes cannot fit in the memory limit of %s",
			i.who, what, n, sizeString(limit))
	}
	// Ask for room to grow so that slowly growing batches do not call
	// eddy_alloc every time; settle for n if the guest cannot give more.
	want := max(uint64(n), 2*uint64(i.bufCap), initialBuffer)
	want = min(want, limit/2)
	if want > uint64(n) {
		ptr, err := i.alloc(uint32(want))
		if err != nil || ptr != 0 {
			return ptr, err
		}
	}
	ptr, err := i.alloc(uint32(n))
	if err != nil {
		return 0, err
	}
	if ptr == 0 {
		size := uint64(i.mem.Size())
		if uint64(n) > limit-min(size, limit) || i.nearMemoryLimit() {
			return 0, markf([]error{ErrMemoryLimit}, "%s: eddy_alloc(%d) for the %s returned 0: memory limit of %s reached",
				i.who, n, what, sizeString(limit))
		}
		return 0, markf([]error{ErrOperatorFailed}, "%s: eddy_alloc(%d) for the %s returned 0 (guest memory is %s of %s)",
			i.who, n, what, sizeString(size), sizeString(limit))
	}
	return ptr, nil
}

// alloc calls eddy_alloc(size) and checks the range it returns; 0 means the
// guest could not allocate.
func (i *Instance) alloc(size uint32) (uint32, error) {
	i.buf, i.bufCap = 0, 0 // the call invalidates the previous buffer
	i.stack[0] = uint64(size)
	if err := i.call(abi.ExportAlloc, i.fnAlloc, nil); err != nil {
		return 0, err
	}
	ptr := uint32(i.stack[0])
	if ptr == 0 {
		return 0, nil
	}
	if memSize := uint64(i.mem.Size()); uint64(ptr)+uint64(size) > memSize {
		return 0, i.fail(markf([]error{ErrBadPointer}, "%s: eddy_alloc(%d) returned [%#x, %#x), outside the guest memory of %d bytes",
			i.who, size, ptr, uint64(ptr)+uint64(size), memSize))
	}
	i.buf, i.bufCap = ptr, size
	return ptr, nil
}

// call runs one guest export with the parameters already in i.stack, under
// the per-call deadline. A returned error has made the instance unusable.
func (i *Instance) call(export string, fn api.Function, emit func([]abi.Record)) error {
	e := i.module.engine
	if i.gate != nil {
		// Before enter: a call waiting for its slot must not hold up
		// Engine.Close.
		release, err := i.gate.Acquire(i.gateCtx)
		if err != nil {
			return i.fail(fmt.Errorf("%s: %s: %w", i.who, export, err))
		}
		// Deferred, so that the slot is returned however the call ends,
		// an emit callback's panic included.
		defer release()
	}
	if !e.enter() {
		return i.fail(markf([]error{ErrClosed}, "%s: %s: engine is closed", i.who, export))
	}
	defer e.leave()
	i.phase, i.emit = export, emit
	i.failMsg, i.hostErr = "", nil
	i.emitted = emitted{}
	i.timer.Reset(i.timeout)
	start := time.Now()
	err := fn.CallWithStack(i.ctx, i.stack)
	took := time.Since(start)
	if !i.timer.Stop() {
		// It fired. Wait for its function to finish, so that the flag is
		// set by the time the instance is released.
		<-i.fired
	}
	i.phase, i.emit = "", nil
	if p := i.cbPanic; p != nil {
		// The caller's own emit callback panicked: that is a bug on the
		// caller's side, so it surfaces as the panic it was, after the guest
		// (which did nothing wrong) has been unwound.
		i.cbPanic = nil
		i.fail(markf([]error{ErrClosed}, "%s: emit callback panicked during %s", i.who, export))
		panic(p)
	}
	interrupted := i.isInterrupted()
	if err == nil && interrupted {
		// The guest returned just as its deadline passed (e.g. a sleep cut
		// short by the host, with no loop after it); the flag is set, so
		// any later call would trap at once.
		err = errors.New("interrupted")
	}
	if i.stats != nil {
		i.count(export, took, err != nil, interrupted)
	}
	if err != nil {
		return i.fail(i.callError(export, err, interrupted))
	}
	return nil
}

// count records one guest call in the instance's metrics.
func (i *Instance) count(export string, took time.Duration, trapped, interrupted bool) {
	es := i.stats.forExport(export)
	es.observe(took)
	if trapped {
		es.traps.Add(1)
	}
	if interrupted {
		es.dline.Add(1)
	}
	if i.mem != nil {
		i.stats.memory.Store(uint64(i.mem.Size()))
	}
}

// expire is the timer's function: the call in progress ran out of time.
func (i *Instance) expire() {
	i.interrupt()
	i.fired <- struct{}{}
}

// interrupt sets the guest's interrupt flag, so that it traps at its next
// loop iteration, and ends any sleep it is in. The instance cannot run
// guest code again.
func (i *Instance) interrupt() {
	i.interruptMu.Lock()
	defer i.interruptMu.Unlock()
	if i.interrupted {
		return
	}
	i.interrupted = true
	i.flag.Set(1)
	close(i.wake)
}

func (i *Instance) isInterrupted() bool {
	i.interruptMu.Lock()
	defer i.interruptMu.Unlock()
	return i.interrupted
}

// fail makes the instance unusable with err and releases its memory now,
// rather than when the task gets round to Close.
func (i *Instance) fail(err error) error {
	i.err = err
	_ = i.release()
	return err
}

// callError turns what a guest call returned into one line wrapping the
// right sentinel. interrupted says the interrupt flag was set: the guest's
// trap, if it trapped, was the flag's doing.
func (i *Instance) callError(export string, err error, interrupted bool) error {
	if i.hostErr != nil {
		// A host function trapped the guest and already said why.
		return i.hostErr
	}
	if i.module.engine.closed.Load() {
		return markf([]error{ErrClosed}, "%s: %s: engine is closed", i.who, export)
	}
	if interrupted {
		return markf([]error{ErrDeadline}, "%s: %s exceeded its %s deadline", i.who, export, i.timeout)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return markf([]error{ErrExited}, "%s: %s: module exited with code %d", i.who, export, exit.ExitCode())
	}
	msg := firstLine(err.Error())
	if i.failMsg != "" {
		// The guest said why before it trapped: an SDK's handler of a
		// panic or an abort (AssemblyScript's abort, Rust's panic) calls
		// fail and then traps, since it cannot return a status from deep
		// in the stack. The message is the cause; the trap is how it ended.
		msg = i.failMsg + " (" + msg + ")"
	}
	if i.nearMemoryLimit() {
		// memory.grow failed at the limit and the guest gave up; name the
		// cause rather than the symptom (usually "unreachable").
		return markf([]error{ErrMemoryLimit, ErrTrap}, "%s: %s: memory limit of %s reached (%s)",
			i.who, export, sizeString(i.memLimit), msg)
	}
	if i.module.growableTables {
		// The module can grow its tables to the host's limit and no
		// further: a guest whose table.grow failed usually traps, so say
		// where the limit is.
		return markf([]error{ErrTrap}, "%s: %s trapped: %s (its tables may grow to %d elements in all, limit table_limit=%d)",
			i.who, export, msg, i.module.engine.cfg.TableLimit, i.module.engine.cfg.TableLimit)
	}
	return markf([]error{ErrTrap}, "%s: %s trapped: %s", i.who, export, msg)
}

// nearMemoryLimit reports whether the guest's memory is within 1/16 of its
// limit, so that a failure now is most likely a failed memory.grow: a guest
// cannot tell the host why it trapped, and allocators grow in chunks, so
// "exactly at the limit" would miss most cases.
func (i *Instance) nearMemoryLimit() bool {
	if i.mem == nil {
		return false
	}
	limit := i.memLimit
	return uint64(i.mem.Size())+limit/16 >= limit
}

// status interprets the status an export returned.
func (i *Instance) status(export string) error {
	switch s := int32(uint32(i.stack[0])); s {
	case abi.StatusOK:
		return nil
	case abi.StatusError:
		msg := i.failMsg
		if msg == "" {
			msg = "status 1 (the operator gave no message)"
		}
		return markf([]error{ErrOperatorFailed}, "%s: %s failed: %s", i.who, export, msg)
	default:
		msg := fmt.Sprintf("status %d", s)
		if i.failMsg != "" {
			msg = i.failMsg + " (" + msg + ")"
		}
		return markf([]error{ErrOperatorFailed}, "%s: %s failed: %s", i.who, export, msg)
	}
}
