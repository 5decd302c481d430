package window

// Windows aggregated by Wasm modules (abi/ABI.md, "Version 3"): an
// aggregate module, whose accumulators the window keeps in place of the
// built-ins' (udfAggregate), or a window function handed each window whole
// (windowFunction), whose elements the window keeps in list state.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
)

// stateElems holds a window function's elements: a list per pane of
// tumbling and sliding windows (namespace: the pane's start), a list per key
// for session and global windows (no namespace). Part of the savepoint
// format, like the other state names.
const stateElems = "elems"

// wasmModule is a module of a window node with its configuration and, once
// the subtask opened, its instance.
type wasmModule struct {
	module *host.Module
	ref    string
	config []byte
	inst   *host.Instance
}

func newWasmModule(n *jobspec.Node, w *jobspec.WasmSpec, modules map[string]*host.Module) (wasmModule, error) {
	m := modules[w.Module]
	if m == nil {
		return wasmModule{}, fmt.Errorf("node %s: module %s is not loaded", n.Name, w.Module)
	}
	cfg := w.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return wasmModule{}, fmt.Errorf("node %s: config of %s is not representable as JSON: %w", n.Name, w.Module, err)
	}
	return wasmModule{module: m, ref: w.Module, config: b}, nil
}

func (w *wasmModule) open(ctx context.Context, info stream.TaskInfo) error {
	inst, err := w.module.NewInstance(ctx, host.InstanceConfig{
		Name:    fmt.Sprintf("%s/%s[%d]", info.Job, info.Node, info.Subtask),
		Gate:    info.Gate,
		Metrics: host.MetricLabels{Tenant: info.Tenant, Job: info.JobID, Node: info.Node, Subtask: info.Subtask},
	})
	if err != nil {
		return err
	}
	w.inst = inst
	return inst.Open(w.config)
}

func (w *wasmModule) close() error {
	if w.inst == nil {
		return nil
	}
	err := w.inst.Close()
	w.inst = nil
	return err
}

// udfError marks an error of a Wasm module's call, so that the messages of
// the window operator do not present it as a state error.
type udfError struct{ err error }

func (e udfError) Error() string { return e.err.Error() }
func (e udfError) Unwrap() error { return e.err }

// udfAggregate is a Wasm aggregate of one subtask.
type udfAggregate struct {
	wasmModule
	zero  []byte        // the empty accumulator, from eddy_agg_create
	label []byte        // `,"name":`
	one   [1]abi.Record // AggAdd's argument, without allocating
	other [1][]byte

	// The arguments of the one eddy_agg_add call of a batch (addGroups).
	arena  []byte // the accumulators to start from, one after another
	ends   []int  // their ends in arena
	accs   [][]byte
	counts []int
	recs   []abi.Record
}

func (u *udfAggregate) open(ctx context.Context, info stream.TaskInfo) error {
	if err := u.wasmModule.open(ctx, info); err != nil {
		return err
	}
	zero, err := u.inst.AggCreate()
	if err != nil {
		return err
	}
	u.zero = append(u.zero[:0], zero...)
	return nil
}

func (u *udfAggregate) of(a *accum) []byte {
	if a.hasBlob {
		return a.blob
	}
	return u.zero
}

func (u *udfAggregate) add(a *accum, r *stream.Record) error {
	u.one[0] = *r
	res, err := u.inst.AggAdd(u.of(a), u.one[:])
	u.one[0] = abi.Record{}
	if err != nil {
		return udfError{err}
	}
	a.blob, a.hasBlob = append(a.blob[:0], res...), true
	return nil
}

func (u *udfAggregate) merge(a, b *accum) error {
	switch {
	case !b.hasBlob: // the empty accumulator changes nothing
		return nil
	case !a.hasBlob:
		a.blob, a.hasBlob = append(a.blob[:0], b.blob...), true
		return nil
	}
	u.other[0] = b.blob
	res, err := u.inst.AggMerge(a.blob, u.other[:])
	u.other[0] = nil
	if err != nil {
		return udfError{err}
	}
	a.blob = append(a.blob[:0], res...)
	return nil
}

func (u *udfAggregate) appendResult(dst, key []byte, ts int64, a *accum) ([]byte, error) {
	res, err := u.inst.AggResult(key, ts, u.of(a))
	if err != nil {
		return nil, udfError{err}
	}
	dst = append(dst, u.label...)
	return append(dst, res...), nil
}

// windowFunction is a window function of one subtask.
type windowFunction struct {
	wasmModule
	batch []abi.Record // the window handed to the module: descriptor, elements
	desc  [abi.WindowDescriptorLen]byte
	data  []byte // the elements' bytes, which batch aliases
	out   *stream.Batch
	end   int64
	emit  func([]abi.Record)
}

func (f *windowFunction) open(ctx context.Context, info stream.TaskInfo) error {
	f.emit = func(recs []abi.Record) {
		for k := range recs {
			r := recs[k]
			r.Timestamp = f.end - 1
			f.out.AddRecord(&r)
		}
	}
	return f.wasmModule.open(ctx, info)
}

// elem encoding, an element of list stateElems: varint timestamp, uvarint
// key length, key, uvarint header count, per header uvarint key length, key,
// uvarint value length, value; then the value, to the end.

func appendElem(dst []byte, r *stream.Record) []byte {
	dst = binary.AppendVarint(dst, r.Timestamp)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	return append(dst, r.Value...)
}

// decodeElem decodes an element; the record aliases b.
func decodeElem(b []byte) (abi.Record, error) {
	var r abi.Record
	var n int
	if r.Timestamp, n = binary.Varint(b); n <= 0 {
		return r, errCorrupt
	}
	b = b[n:]
	field := func() ([]byte, error) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, errCorrupt
		}
		f := b[n : n+int(l)]
		b = b[n+int(l):]
		return f, nil
	}
	var err error
	if r.Key, err = field(); err != nil {
		return r, err
	}
	nh, n := binary.Uvarint(b)
	if n <= 0 || nh > uint64(len(b)) {
		return r, errCorrupt
	}
	b = b[n:]
	for range nh {
		var h abi.Header
		k, err := field()
		if err != nil {
			return r, err
		}
		if h.Value, err = field(); err != nil {
			return r, err
		}
		h.Key = string(k)
		r.Headers = append(r.Headers, h)
	}
	r.Value = b
	return r, nil
}

// addElem keeps the current record as an element of its window function
// under namespace ns.
func (o *Operator) addElem(key, ns []byte) error {
	o.enc = appendElem(o.enc[:0], o.aggs.cur)
	return o.store.ListAppend(stateElems, key, ns, o.enc, 0)
}

// elemsNS is the namespace of the elements of pane p (fixed windows) or,
// for sessions and global windows, nil.
func (o *Operator) elemsNS(p int64) []byte {
	if o.kind != fixedWindows {
		return nil
	}
	return o.paneKey(p)
}

// applyWindow hands window [start, end) of key to the window function: the
// elements of its panes (fixed windows) or those of the key's list with a
// timestamp inside it (sessions; global windows take all).
func (o *Operator) applyWindow(out *stream.Batch, key []byte, start, end int64) error {
	f := o.aggs.apply
	f.data = f.data[:0]
	var offs []int // element boundaries in data
	collect := func(v []byte) error {
		f.data = append(f.data, v...)
		offs = append(offs, len(f.data))
		return nil
	}
	var err error
	switch o.kind {
	case fixedWindows:
		for p := start; p < end && err == nil; p = o.paneEnd(p) {
			err = o.store.ListGet(stateElems, key, o.paneKey(p), collect)
		}
	default:
		err = o.store.ListGet(stateElems, key, nil, collect)
	}
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(f.desc[:8], uint64(start))
	binary.LittleEndian.PutUint64(f.desc[8:], uint64(end))
	f.batch = append(f.batch[:0], abi.Record{Key: key, Value: f.desc[:], Timestamp: end - 1})
	from := 0
	for _, to := range offs {
		r, err := decodeElem(f.data[from:to:to])
		if err != nil {
			return err
		}
		from = to
		if o.kind == sessionWindows && (r.Timestamp < start || r.Timestamp >= end) {
			continue
		}
		f.batch = append(f.batch, r)
	}
	// Event-time order, arrival order among equal timestamps.
	slices.SortStableFunc(f.batch[1:], func(a, b abi.Record) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	f.out, f.end = out, end
	err = f.inst.Process(f.batch, f.emit)
	f.out = nil
	clear(f.batch)
	if err != nil {
		return udfError{err}
	}
	return nil
}

// dropSessionElems removes the elements of session [start, end) from
// key's list, when the session is cleaned up.
func (o *Operator) dropSessionElems(key []byte, start, end int64) error {
	var keep [][]byte
	err := o.store.ListGet(stateElems, key, nil, func(v []byte) error {
		ts, n := binary.Varint(v)
		if n <= 0 {
			return errCorrupt
		}
		if ts < start || ts >= end {
			keep = append(keep, slices.Clone(v))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := o.store.ListClear(stateElems, key, nil); err != nil {
		return err
	}
	for _, v := range keep {
		if err := o.store.ListAppend(stateElems, key, nil, v, 0); err != nil {
			return err
		}
	}
	return nil
}

// startGroups empties the arguments of the next eddy_agg_add call.
func (u *udfAggregate) startGroups() {
	u.arena, u.ends, u.counts, u.recs = u.arena[:0], u.ends[:0], u.counts[:0], u.recs[:0]
}

// group adds to the next eddy_agg_add call a group that starts from acc
// (copied) and adds the last n records appended to u.recs.
func (u *udfAggregate) group(acc []byte, n int) {
	u.arena = append(u.arena, acc...)
	u.ends = append(u.ends, len(u.arena))
	u.counts = append(u.counts, n)
}

// addGroups makes the eddy_agg_add call of the groups, and returns their
// new accumulators in order, valid until the next call on the instance.
func (u *udfAggregate) addGroups() ([][]byte, error) {
	u.accs = u.accs[:0]
	from := 0
	for _, e := range u.ends {
		u.accs = append(u.accs, u.arena[from:e:e])
		from = e
	}
	res, err := u.inst.AggAddGroups(u.accs, u.counts, u.recs)
	clear(u.recs)
	if err != nil {
		return nil, udfError{err}
	}
	return res, nil
}

// addPanes adds the pending records of batch in, sorted by key and pane,
// with one eddy_agg_add call: a group per (key, pane), starting from the
// pane's accumulator. It returns the new accumulators in that order.
func (o *Operator) addPanes(in *stream.Batch) ([][]byte, error) {
	u := o.aggs.udf
	u.startGroups()
	for i := 0; i < len(o.pending); {
		key := o.pendingKey(in, i)
		if _, err := o.loadFixed(key); err != nil {
			return nil, o.paneErr(key, o.pending[i].pane, err)
		}
		for i < len(o.pending) && bytes.Equal(o.pendingKey(in, i), key) {
			pane, n := o.pending[i].pane, 0
			for ; o.samePane(in, i, key, pane); i++ {
				u.recs = append(u.recs, in.Records[o.pending[i].rec])
				n++
			}
			acc := u.zero
			if k, ok := o.paneIndex(pane); ok {
				acc = u.of(&o.panes[k].acc)
			}
			u.group(acc, n)
		}
	}
	res, err := u.addGroups()
	if err != nil {
		return nil, fmt.Errorf("node %s: add %d records to %d panes: %w", o.node, len(o.pending), len(u.counts), err)
	}
	return res, nil
}
