package window

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/abi/jsonscan"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// State names, part of the savepoint format of window nodes: renaming one
// loses the state of running jobs. Tumbling and sliding windows kept a
// value per window under "acc", then a map entry per pane under "pane",
// before they kept a key's panes as one value; each layout has a name of
// its own so that an older one is never read as the newer.
const (
	stateAcc      = "acc"      // value per key: global windows
	stateFixed    = "panes"    // value per key, all its panes: tumbling and sliding windows
	stateSessions = "sessions" // value per key: its open sessions
)

// stateFormat is the first byte of every state value this package writes,
// so that a change of the encoding can be detected on restore.
const stateFormat = 1

// errCorrupt marks state this package cannot decode; it matches
// state.ErrCorrupt, as a damaged checkpoint would.
var errCorrupt = fmt.Errorf("window: undecodable accumulator: %w", state.ErrCorrupt)

type assignerKind uint8

const (
	fixedWindows   assignerKind = iota // tumbling, or sliding
	sessionWindows                     // merging
	globalWindows                      // count trigger
)

// Operator is the window operator of one subtask. It implements
// stream.Operator and stream.WatermarkOperator; it is exported for its
// counters, not to be built other than by New.
type Operator struct {
	node     string
	kind     assignerKind
	size     int64  // ms; fixed windows
	slide    int64  // ms; fixed windows (= size when tumbling)
	rem      int64  // size mod slide: where a slide's second pane starts, 0 for none
	gap      int64  // ms; sessions
	lateness int64  // ms
	late     string // late_output port; "" drops late records
	trigger  uint64 // global windows: fire every trigger records
	aggs     *aggregates

	store          state.Store
	maxParallelism int
	wm             int64
	dropped        int64
	idx            firingIndex // fixed windows: when keys are due

	// Scratch reused across records and timers: the per-record path must
	// not allocate.
	acc        accum         // the record's session, or the global window
	win        accum         // a window merged from its panes
	panes      []fixedPane   // the panes of a key of fixed windows, in order
	next       int64         // and the start of its earliest window not fired
	dropped0   []fixedPane   // panes being dropped
	pending    []pendingAdd  // records of the batch grouped by key
	sortIn     *stream.Batch // the batch byKeyPane compares in
	seed       maphash.Seed  // of the pending records' key hashes
	ns         [16]byte
	paneKeyBuf [8]byte
	val        []byte // state read buffer
	enc        []byte // state write buffer
	json       []byte // result buffer
	sessions   []session
	slots      []slot // backing array of the sessions' accumulators

	// Scratch of Wasm aggregates of sessions and global windows (batch.go).
	deferred  []pendingAdd   // records for the next round of sessions
	sim       []simSession   // the sessions of the round's keys
	simKeys   []simKey       // the round's keys
	idStart   []int64        // a planned key's sessions with records, by id: their starts
	fired     []globalFiring // global windows fired by the batch
	firedAccs []byte         // and their accumulators
	// perRecord makes them add record by record, as the other aggregates
	// do: the model the tests compare batches with (export_test.go).
	perRecord bool
	// What the tests check their data exercises: rounds of sessions,
	// records added in a later round, on their own (behind the
	// watermark), and merging stored sessions in a round.
	rounds, deferredAdds, aloneAdds, roundMerges int64

	out *stream.Batch // where timers emit, during ProcessWatermark
	// onTimer is o.fire, bound once: a method value taken at each use
	// would allocate.
	onTimer   func(state.Timer) error
	byKeyPane func(a, b pendingAdd) int
}

// session is one open session of a key with its accumulator.
type session struct {
	start, end int64
	acc        accum
}

var (
	_ stream.Operator          = (*Operator)(nil)
	_ stream.WatermarkOperator = (*Operator)(nil)
)

// New builds the operator of window node n of spec. Its signature is
// dataflow.Options.WindowOperator's; modules holds the node's loaded
// modules by reference, for a Wasm aggregate or window function.
func New(spec *jobspec.Spec, n *jobspec.Node, modules map[string]*host.Module) (stream.Operator, error) {
	w, a := n.Window, n.Aggregate
	if w == nil {
		return nil, fmt.Errorf("node %s: not a window node", n.Name)
	}
	if a == nil {
		return nil, fmt.Errorf("node %s: a window needs an aggregate", n.Name)
	}
	aggs, err := newAggregates(n, modules)
	if err != nil {
		return nil, err
	}
	o := &Operator{node: n.Name, aggs: aggs, wm: math.MinInt64, late: w.LateOutput}
	// Millisecond resolution, like event time: a sub-millisecond duration
	// would round to a window of size 0.
	ms := func(what string, d jobspec.Duration) (int64, error) {
		v := d.D().Milliseconds()
		if v < 1 {
			return 0, fmt.Errorf("node %s: %s %s is below 1ms, the resolution of event time", n.Name, what, d.D())
		}
		return v, nil
	}
	switch {
	case w.Tumbling != nil:
		o.kind = fixedWindows
		if o.size, err = ms("tumbling window size", *w.Tumbling); err != nil {
			return nil, err
		}
		o.slide = o.size
	case w.Sliding != nil:
		o.kind = fixedWindows
		if o.size, err = ms("sliding window size", w.Sliding.Size); err != nil {
			return nil, err
		}
		if o.slide, err = ms("sliding window slide", w.Sliding.Slide); err != nil {
			return nil, err
		}
		if o.slide > o.size {
			return nil, fmt.Errorf("node %s: sliding window slide %s is larger than its size %s", n.Name, w.Sliding.Slide.D(), w.Sliding.Size.D())
		}
	case w.Session != nil:
		o.kind = sessionWindows
		if o.gap, err = ms("session gap", w.Session.Gap); err != nil {
			return nil, err
		}
	case w.Global != nil:
		o.kind = globalWindows
		if w.Global.Trigger.Count <= 0 {
			return nil, fmt.Errorf("node %s: global window needs trigger: {count: N} with N > 0", n.Name)
		}
		o.trigger = uint64(w.Global.Trigger.Count)
		if w.AllowedLateness != 0 || w.LateOutput != "" {
			return nil, fmt.Errorf("node %s: allowed_lateness and late_output do not apply to a global window, which is never late", n.Name)
		}
	default:
		return nil, fmt.Errorf("node %s: window names no kind (tumbling, sliding, session or global)", n.Name)
	}
	if w.AllowedLateness < 0 {
		return nil, fmt.Errorf("node %s: allowed_lateness must not be negative", n.Name)
	}
	o.lateness = w.AllowedLateness.D().Milliseconds()
	if o.kind == fixedWindows {
		o.setPaneLayout()
	}
	k := len(aggs.list)
	slots := make([]slot, 2*k)
	o.acc.slots, o.win.slots = slots[:k:k], slots[k:]
	o.onTimer = o.fire
	o.byKeyPane = o.compareKeyPane
	o.seed = maphash.MakeSeed()
	return o, nil
}

// newAggregates parses the aggregate of window node n: built-ins, or a
// Wasm aggregate or window function.
func newAggregates(n *jobspec.Node, modules map[string]*host.Module) (*aggregates, error) {
	a := n.Aggregate
	switch {
	case a.Wasm != nil:
		w, err := newWasmModule(n, a.Wasm, modules)
		if err != nil {
			return nil, err
		}
		if !w.module.IsAggregate() {
			return nil, fmt.Errorf("node %s: module %s is not an aggregate module (it does not export eddy_agg_add; a window function goes under apply:)", n.Name, a.Wasm.Module)
		}
		name := a.Name
		if name == "" {
			name = jobspec.DefaultAggregateName
		}
		label := append(jsonscan.AppendQuote([]byte{','}, []byte(name)), ':')
		return &aggregates{udf: &udfAggregate{wasmModule: w, label: label}}, nil
	case a.Apply != nil:
		w, err := newWasmModule(n, a.Apply, modules)
		if err != nil {
			return nil, err
		}
		if w.module.IsAggregate() {
			return nil, fmt.Errorf("node %s: module %s is an aggregate module, not a window function (put it under wasm:)", n.Name, a.Apply.Module)
		}
		return &aggregates{apply: &windowFunction{wasmModule: w}}, nil
	case len(a.Builtins) == 0:
		return nil, fmt.Errorf("node %s: aggregate lists no built-ins", n.Name)
	}
	aggs, err := parseAggregates(a.Builtins)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return aggs, nil
}

// Open takes the subtask's keyed state, where accumulators and timers live,
// and starts the instance of a Wasm aggregate or window function.
func (o *Operator) Open(ctx context.Context, info stream.TaskInfo) error {
	st, ok := info.State.(state.Store)
	if !ok {
		return fmt.Errorf("node %s: window has no keyed state (it needs key_by)", o.node)
	}
	o.store = st
	o.maxParallelism = info.MaxParallelism
	o.wm = math.MinInt64
	if o.kind == fixedWindows {
		if err := o.rebuildIndex(); err != nil {
			return err
		}
	}
	switch {
	case o.aggs.udf != nil:
		return o.aggs.udf.open(ctx, info)
	case o.aggs.apply != nil:
		return o.aggs.apply.open(ctx, info)
	}
	return nil
}

// Process adds each record to its windows. Results of windows that
// already fired (late records within allowed lateness) go to out at once.
func (o *Operator) Process(_ context.Context, in, out *stream.Batch) error {
	switch {
	case o.kind == fixedWindows:
		return o.processFixed(in, out)
	case o.perRecord:
	case o.aggs.udf != nil && o.kind == sessionWindows:
		return o.processSessions(in, out)
	case o.aggs.udf != nil:
		return o.processGlobal(in, out)
	}
	for i := range in.Records {
		r := &in.Records[i]
		if r.Timestamp == stream.NoTimestamp {
			return o.noEventTime(r)
		}
		o.aggs.read(r)
		var (
			kept bool
			err  error
		)
		switch o.kind {
		case sessionWindows:
			kept, err = o.addSession(r, out)
		default:
			kept, err = true, o.addGlobal(r, out)
		}
		if err != nil {
			return err
		}
		if !kept {
			o.lateRecord(r, out)
		}
	}
	return nil
}

func (o *Operator) noEventTime(r *stream.Record) error {
	return fmt.Errorf("node %s: record with key %q has no event time, which windows need (set event_time on the source)", o.node, r.Key)
}

// lateRecord sends a record none of whose windows is kept to the late
// output, or drops it.
func (o *Operator) lateRecord(r *stream.Record, out *stream.Batch) {
	if o.late != "" {
		out.Side(o.late).AddRecord(r)
	} else {
		o.dropped++
	}
}

// ReleasesInput: a window keeps nothing of an input batch past Process.
// What it keeps of a record goes to the keyed store, which encodes keys
// and values into its own buffers; results and late records are added to
// out, which copies; a Wasm aggregate gets the records copied into guest
// memory and its accumulators are copied out; the pending lists index the
// batch only during the call (sortIn is cleared), and aggs.cur, left
// pointing at the last record read, is never read outside Process.
func (o *Operator) ReleasesInput() bool { return true }

// ProcessWatermark fires and cleans up the windows whose timers are due, in
// timer order.
func (o *Operator) ProcessWatermark(_ context.Context, wm int64, out *stream.Batch) error {
	if wm <= o.wm {
		return nil
	}
	o.wm = wm
	if o.kind == globalWindows {
		return nil // never fires on time
	}
	o.out = out
	var err error
	if o.kind == fixedWindows {
		err = o.fireFixed()
	} else {
		err = o.store.PopTimers(state.EventTime, wm, o.onTimer)
	}
	o.out = nil
	if err != nil {
		return fmt.Errorf("node %s: fire windows at watermark %d: %w", o.node, wm, err)
	}
	return nil
}

// Finish emits no window: every time window fired at the final watermark,
// and a global window's partial count is not a result (see the package
// doc). A Wasm module's eddy_close runs here; what a window function emits
// then goes out with no timestamp of a window.
func (o *Operator) Finish(_ context.Context, out *stream.Batch) error {
	switch {
	case o.aggs.udf != nil:
		return o.aggs.udf.inst.Finish(nil)
	case o.aggs.apply != nil:
		return o.aggs.apply.inst.Finish(func(recs []abi.Record) { out.AddRecords(recs) })
	}
	return nil
}

// Close forgets the store, which the task owns and closes, and releases
// the instance of a Wasm module.
func (o *Operator) Close() error {
	o.store = nil
	switch {
	case o.aggs.udf != nil:
		return o.aggs.udf.close()
	case o.aggs.apply != nil:
		return o.aggs.apply.close()
	}
	return nil
}

// Dropped is the number of late records dropped because the node has no
// late_output. Like every method, call it from the task's goroutine (or
// after the job).
func (o *Operator) Dropped() int64 { return o.dropped }

// cleanupTime is when a window's state goes: its last millisecond plus
// allowed lateness, saturating rather than wrapping around.
func (o *Operator) cleanupTime(maxTs int64) int64 {
	if maxTs > math.MaxInt64-o.lateness {
		return math.MaxInt64
	}
	return maxTs + o.lateness
}

// isLate reports whether the window ending at maxTs is gone (or would be):
// as Flink's isWindowLate, the window is late once the watermark reached
// its cleanup time.
func (o *Operator) isLate(maxTs int64) bool { return o.cleanupTime(maxTs) <= o.wm }

// registerTimers sets the timers of a new session: firing at maxTs unless
// the watermark is past it already (then the window fires on each record
// instead, as EventTimeTrigger.onElement), and cleanup, which is the same
// timer when there is no allowed lateness.
func (o *Operator) registerTimers(key, ns []byte, maxTs int64) error {
	if maxTs > o.wm {
		if err := o.store.TimerRegister(state.EventTime, key, ns, maxTs); err != nil {
			return err
		}
	}
	if c := o.cleanupTime(maxTs); c != maxTs {
		return o.store.TimerRegister(state.EventTime, key, ns, c)
	}
	return nil
}

func (o *Operator) deleteTimers(key, ns []byte, maxTs int64) error {
	if err := o.store.TimerDelete(state.EventTime, key, ns, maxTs); err != nil {
		return err
	}
	if c := o.cleanupTime(maxTs); c != maxTs {
		return o.store.TimerDelete(state.EventTime, key, ns, c)
	}
	return nil
}

// A namespace is, for fixed-size windows, the start of a window (timers) or
// of a bucket of panes (state, where a pane's user key is its start), and
// for sessions a session's start and end (state and timers); times are
// big-endian with the sign bit flipped so that byte order is time order.

func (o *Operator) fixedNS(start int64) []byte {
	binary.BigEndian.PutUint64(o.ns[:8], uint64(start)^(1<<63))
	return o.ns[:8]
}

func (o *Operator) sessionNS(start, end int64) []byte {
	binary.BigEndian.PutUint64(o.ns[:8], uint64(start)^(1<<63))
	binary.BigEndian.PutUint64(o.ns[8:], uint64(end)^(1<<63))
	return o.ns[:16]
}

func decodeNS(ns []byte) (start, end int64) {
	start = int64(binary.BigEndian.Uint64(ns[:8]) ^ (1 << 63))
	if len(ns) == 16 {
		end = int64(binary.BigEndian.Uint64(ns[8:]) ^ (1 << 63))
	}
	return start, end
}

// floorDiv is ⌊a/b⌋ for b > 0: windows are aligned to the epoch also before
// it.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// addGlobal counts the record into its key's pane, firing and purging the
// pane at the trigger count.
func (o *Operator) addGlobal(r *stream.Record, out *stream.Batch) error {
	if _, err := o.loadAcc(stateAcc, r.Key, nil, &o.acc); err != nil {
		return fmt.Errorf("node %s: key %q: state: %w", o.node, r.Key, err)
	}
	if err := o.acc.add(o.aggs, r.Timestamp); err != nil {
		return fmt.Errorf("node %s: key %q: %w", o.node, r.Key, err)
	}
	if o.aggs.apply != nil {
		if err := o.addElem(r.Key, nil); err != nil {
			return fmt.Errorf("node %s: key %q: state: %w", o.node, r.Key, err)
		}
	}
	if o.acc.count >= o.trigger {
		if err := o.emit(out, r.Key, o.acc.minTs, o.acc.maxTs+1, &o.acc); err != nil {
			return err
		}
		if err := o.store.ValueDelete(stateAcc, r.Key, nil); err != nil {
			return fmt.Errorf("node %s: key %q: state: %w", o.node, r.Key, err)
		}
		if o.aggs.apply != nil {
			if err := o.store.ListClear(stateElems, r.Key, nil); err != nil {
				return fmt.Errorf("node %s: key %q: state: %w", o.node, r.Key, err)
			}
		}
		return nil
	}
	if err := o.storeAcc(stateAcc, r.Key, nil, &o.acc); err != nil {
		return fmt.Errorf("node %s: key %q: state: %w", o.node, r.Key, err)
	}
	return nil
}

// loadAcc reads the accumulator of (name, key, ns) into a, or resets a
// when there is none.
func (o *Operator) loadAcc(name string, key, ns []byte, a *accum) (bool, error) {
	v, found, err := o.store.ValueGet(name, key, ns, o.val[:0])
	o.val = v
	if err != nil {
		return false, err
	}
	return o.decodeAcc(v, found, a)
}

// decodeAcc decodes a stored accumulator into a, or resets a when there is
// none.
func (o *Operator) decodeAcc(v []byte, found bool, a *accum) (bool, error) {
	if !found {
		a.reset()
		return false, nil
	}
	if len(v) == 0 || v[0] != stateFormat {
		return false, errCorrupt
	}
	rest, err := a.decode(v[1:], o.aggs, o.kind == globalWindows)
	if err == nil && len(rest) != 0 {
		err = errCorrupt
	}
	return true, err
}

func (o *Operator) storeAcc(name string, key, ns []byte, a *accum) error {
	o.enc = a.encode(append(o.enc[:0], stateFormat), o.aggs, o.kind == globalWindows)
	return o.store.ValuePut(name, key, ns, o.enc, 0)
}

// emit sends the result of window [start, end) of key, whose accumulator
// is a: its JSON result, or what its window function makes of it.
func (o *Operator) emit(out *stream.Batch, key []byte, start, end int64, a *accum) error {
	if o.aggs.apply != nil {
		if err := o.applyWindow(out, key, start, end); err != nil {
			return fmt.Errorf("node %s: key %q: window [%d,%d): %w", o.node, key, start, end, err)
		}
		return nil
	}
	var err error
	if o.json, err = appendResult(o.json[:0], key, start, end, a, o.aggs); err != nil {
		return fmt.Errorf("node %s: key %q: window [%d,%d): %w", o.node, key, start, end, err)
	}
	out.Add(key, o.json, end-1)
	return nil
}

func (o *Operator) stateErr(key []byte, start, end int64, err error) error {
	if errors.As(err, new(udfError)) {
		return fmt.Errorf("node %s: key %q: window [%d,%d): %w", o.node, key, start, end, err)
	}
	return fmt.Errorf("node %s: key %q: window [%d,%d): state: %w", o.node, key, start, end, err)
}

// fire handles one due timer, of a session (the other kinds set none).
func (o *Operator) fire(t state.Timer) error { return o.fireSession(t) }
