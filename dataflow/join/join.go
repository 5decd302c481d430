package join

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/state"
)

// State names, part of the savepoint format of join nodes: renaming one
// loses the state of running jobs.
var sideState = [2]string{"join_left", "join_right"}

// Session window joins: the open sessions of a key, and its records by
// (timestamp, side).
const (
	stateSessions = "join_sessions"
	stateRecords  = "join_records"
)

// Input indexes of a join: the first input of the node is the left side.
const (
	Left  = 0
	Right = 1
)

type kind uint8

const (
	intervalJoin kind = iota
	windowJoin
	sessionJoin
)

// errStop ends a state iteration early; it never leaves the package.
var errStop = errors.New("join: stop iteration")

// Operator is the join operator of one subtask. It implements
// stream.TwoInputOperator and stream.WatermarkOperator.
type Operator struct {
	node string
	kind kind
	// Interval join: right records within [lower, upper] ms of a left
	// record's timestamp join it (bounds already made inclusive).
	lower, upper int64
	// Window join: windows of size every slide ms; sessions closed after
	// gap ms without records.
	size, slide, gap int64

	store   state.Store
	wm      int64
	dropped int64
	joined  int64

	out *stream.Batch // where timers emit, during ProcessWatermark
	// Scratch reused across records.
	tsKey [8]byte
	ns    [17]byte
	val   []byte
	enc   []byte
	json  []byte
	// window join firing: both sides' values of one window.
	lefts, rights [][]byte
	onTimer       func(state.Timer) error
}

var (
	_ stream.TwoInputOperator  = (*Operator)(nil)
	_ stream.WatermarkOperator = (*Operator)(nil)
)

// New builds the operator of join node n. Its signature matches
// dataflow.Options.JoinOperator.
func New(_ *jobspec.Spec, n *jobspec.Node) (stream.Operator, error) {
	j := n.Join
	if j == nil {
		return nil, fmt.Errorf("node %s: not a join node", n.Name)
	}
	o := &Operator{node: n.Name, wm: math.MinInt64}
	o.onTimer = o.fire
	switch {
	case j.Interval != nil:
		o.kind = intervalJoin
		iv := j.Interval
		o.lower, o.upper = iv.Lower.D().Milliseconds(), iv.Upper.D().Milliseconds()
		if iv.LowerInclusive != nil && !*iv.LowerInclusive {
			o.lower++
		}
		if iv.UpperInclusive != nil && !*iv.UpperInclusive {
			o.upper--
		}
		if o.lower > o.upper {
			return nil, fmt.Errorf("node %s: join interval [%d, %d]ms is empty", n.Name, o.lower, o.upper)
		}
	case j.Window != nil && j.Window.Tumbling != nil:
		o.kind = windowJoin
		o.size = j.Window.Tumbling.D().Milliseconds()
		o.slide = o.size
	case j.Window != nil && j.Window.Sliding != nil:
		o.kind = windowJoin
		o.size, o.slide = j.Window.Sliding.Size.D().Milliseconds(), j.Window.Sliding.Slide.D().Milliseconds()
	case j.Window != nil && j.Window.Session != nil:
		o.kind = sessionJoin
		if o.gap = j.Window.Session.Gap.D().Milliseconds(); o.gap < 1 {
			return nil, fmt.Errorf("node %s: join session gap %s is below 1ms", n.Name, j.Window.Session.Gap.D())
		}
	default:
		return nil, fmt.Errorf("node %s: join needs an interval or a tumbling, sliding or session window", n.Name)
	}
	if o.kind == windowJoin && (o.size < 1 || o.slide < 1 || o.slide > o.size) {
		return nil, fmt.Errorf("node %s: join window of size %dms every %dms is not one (both at least 1ms, slide at most size)", n.Name, o.size, o.slide)
	}
	return o, nil
}

// Open takes the subtask's keyed state, where both sides and the timers
// live.
func (o *Operator) Open(_ context.Context, info stream.TaskInfo) error {
	st, ok := info.State.(state.Store)
	if !ok {
		return fmt.Errorf("node %s: join has no keyed state", o.node)
	}
	o.store = st
	o.wm = math.MinInt64
	return nil
}

// Process refuses a batch that does not say which input it came from: a
// join is only ever driven through ProcessInput.
func (o *Operator) Process(context.Context, *stream.Batch, *stream.Batch) error {
	return fmt.Errorf("node %s: a join needs to know which input a batch came from", o.node)
}

// ProcessInput joins each record of in, from input (Left or Right), with
// the other side's buffered records and buffers it.
func (o *Operator) ProcessInput(_ context.Context, input int, in, out *stream.Batch) error {
	if input != Left && input != Right {
		return fmt.Errorf("node %s: a join has inputs 0 and 1, not %d", o.node, input)
	}
	for i := range in.Records {
		r := &in.Records[i]
		if r.Timestamp == stream.NoTimestamp {
			return fmt.Errorf("node %s: record with key %q has no event time, which joins need (set event_time on the source)", o.node, r.Key)
		}
		var err error
		switch o.kind {
		case intervalJoin:
			err = o.addInterval(input, r, out)
		case sessionJoin:
			err = o.addSession(input, r)
		default:
			err = o.addWindow(input, r)
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", o.node, err)
		}
	}
	return nil
}

// addInterval is Flink's IntervalJoinOperator.processElement: join r with
// every buffered record of the other side in its range, buffer it, and set
// the timer that removes it once nothing can join it any more.
func (o *Operator) addInterval(side int, r *stream.Record, out *stream.Batch) error {
	ts := r.Timestamp
	if ts < o.wm {
		o.dropped++
		return nil
	}
	// The other side's records that join r: [ts+lower, ts+upper] for a
	// left record, [ts-upper, ts-lower] for a right one.
	lo, hi := addSat(ts, o.lower), addSat(ts, o.upper)
	keep := addSat(ts, o.upper) // last watermark at which r can still join
	if side == Right {
		lo, hi = addSat(ts, -o.upper), addSat(ts, -o.lower)
		keep = addSat(ts, -o.lower)
	}
	other := sideState[1-side]
	err := o.store.MapIter(other, r.Key, nil, func(k, v []byte) error {
		t := decodeTS(k)
		if t < lo {
			return nil
		}
		if t > hi {
			return errStop // user keys iterate in timestamp order
		}
		return eachValue(v, func(ov []byte) {
			if side == Left {
				o.emit(out, r.Key, r.Value, ov, max(ts, t))
			} else {
				o.emit(out, r.Key, ov, r.Value, max(ts, t))
			}
		})
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("read %s: %w", other, err)
	}
	if err := o.appendValue(sideState[side], r.Key, nil, encodeTS(o.tsKey[:0], ts), r.Value); err != nil {
		return err
	}
	// Removed once the watermark is past keep: a record at the watermark
	// is not late, so it must still find r (Flink removes r at keep and
	// can miss it).
	return o.store.TimerRegister(state.EventTime, r.Key, o.timerNS(side, ts), addSat(keep, 1))
}

// appendValue adds val to the values kept under userKey in map name.
func (o *Operator) appendValue(name string, key, ns, userKey, val []byte) error {
	var err error
	o.val, _, err = o.store.MapGet(name, key, ns, userKey, o.val[:0])
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	o.val = binary.AppendUvarint(o.val, uint64(len(val)))
	o.val = append(o.val, val...)
	if err := o.store.MapPut(name, key, ns, userKey, o.val, 0); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// addWindow buffers r in each of its windows that has not fired yet.
func (o *Operator) addWindow(side int, r *stream.Record) error {
	ts := r.Timestamp
	kept := false
	last := ts - floorMod(ts, o.slide)
	for start := last; start > ts-o.size; start -= o.slide {
		end := start + o.size
		if end-1 <= o.wm {
			continue // fired already
		}
		kept = true
		ns := o.windowNS(start, end)
		if err := o.store.ListAppend(sideState[side], r.Key, ns, r.Value, 0); err != nil {
			return fmt.Errorf("write %s: %w", sideState[side], err)
		}
		if err := o.store.TimerRegister(state.EventTime, r.Key, ns, end-1); err != nil {
			return fmt.Errorf("set window timer: %w", err)
		}
	}
	if !kept {
		o.dropped++
	}
	return nil
}

// ReleasesInput: a join keeps nothing of an input batch past
// ProcessInput. Buffered records go to the keyed store (map and list
// state, timers), which copies them; joined pairs are built in o.json and
// added to out, which copies.
func (o *Operator) ReleasesInput() bool { return true }

// ProcessWatermark fires the timers due: window joins emit, interval
// joins drop records that can no longer join.
func (o *Operator) ProcessWatermark(_ context.Context, wm int64, out *stream.Batch) error {
	if wm <= o.wm {
		return nil
	}
	o.wm = wm
	o.out = out
	err := o.store.PopTimers(state.EventTime, wm, o.onTimer)
	o.out = nil
	if err != nil {
		return fmt.Errorf("node %s: timers at watermark %d: %w", o.node, wm, err)
	}
	return nil
}

func (o *Operator) fire(t state.Timer) error {
	if o.kind == intervalJoin {
		if len(t.Namespace) != 9 || t.Namespace[0] > Right {
			return fmt.Errorf("%w: join timer namespace of %d bytes", state.ErrCorrupt, len(t.Namespace))
		}
		return o.store.MapDelete(sideState[t.Namespace[0]], t.Key, nil, t.Namespace[1:])
	}
	if o.kind == sessionJoin {
		return o.fireSession(t)
	}
	if len(t.Namespace) != 16 {
		return fmt.Errorf("%w: join window namespace of %d bytes", state.ErrCorrupt, len(t.Namespace))
	}
	o.lefts, o.rights = o.lefts[:0], o.rights[:0]
	collect := func(dst *[][]byte) func(v []byte) error {
		return func(v []byte) error {
			*dst = append(*dst, append([]byte(nil), v...))
			return nil
		}
	}
	if err := o.store.ListGet(sideState[Left], t.Key, t.Namespace, collect(&o.lefts)); err != nil {
		return err
	}
	if err := o.store.ListGet(sideState[Right], t.Key, t.Namespace, collect(&o.rights)); err != nil {
		return err
	}
	ts := t.Timestamp
	for _, l := range o.lefts {
		for _, r := range o.rights {
			o.emit(o.out, t.Key, l, r, ts)
		}
	}
	if err := o.store.ListClear(sideState[Left], t.Key, t.Namespace); err != nil {
		return err
	}
	return o.store.ListClear(sideState[Right], t.Key, t.Namespace)
}

// emit adds {"left": l, "right": r} with key and ts to out.
func (o *Operator) emit(out *stream.Batch, key, l, r []byte, ts int64) {
	b := append(o.json[:0], `{"left":`...)
	b = appendJSON(b, l)
	b = append(b, `,"right":`...)
	b = appendJSON(b, r)
	b = append(b, '}')
	o.json = b
	out.Add(key, b, ts)
	o.joined++
}

func appendJSON(b, v []byte) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}

// Finish emits nothing: the final watermark fired every window and removed
// every buffered record.
func (o *Operator) Finish(context.Context, *stream.Batch) error { return nil }

// Close forgets the store, which the task owns and closes.
func (o *Operator) Close() error {
	o.store = nil
	return nil
}

// Dropped is the number of late records dropped. Like every method, call
// it from the task's goroutine (or after the job).
func (o *Operator) Dropped() int64 { return o.dropped }

// Joined is the number of joined records emitted.
func (o *Operator) Joined() int64 { return o.joined }

// timerNS is the namespace of an interval join's cleanup timer: the side
// and the timestamp (map user key) of the records it removes.
func (o *Operator) timerNS(side int, ts int64) []byte {
	o.ns[0] = byte(side)
	encodeTS(o.ns[1:1], ts)
	return o.ns[:9]
}

// windowNS is a window's namespace: start and end, big-endian.
func (o *Operator) windowNS(start, end int64) []byte {
	encodeTS(o.ns[:0], start)
	encodeTS(o.ns[8:8], end)
	return o.ns[:16]
}

// encodeTS appends ts so that byte order is numeric order.
func encodeTS(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
}

func decodeTS(b []byte) int64 {
	if len(b) != 8 {
		return math.MinInt64
	}
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

// eachValue calls fn for each value of an appendValue encoding.
func eachValue(b []byte, fn func(v []byte)) error {
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return fmt.Errorf("%w: join buffer entry", state.ErrCorrupt)
		}
		fn(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	return nil
}

// addSat is a+b clamped to the int64 range.
func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
