package host

// Aggregate modules (abi/ABI.md, "Version 3: aggregate modules and window
// functions"): the window operator keeps accumulators, the module folds
// records into them, merges them and turns them into results.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
)

// IsAggregate reports whether the module is an aggregate module: it exports
// eddy_agg_create, eddy_agg_add, eddy_agg_merge and eddy_agg_result (and
// validation checked all four), and is driven with the Agg* methods of its
// instances rather than Process.
func (m *Module) IsAggregate() bool { return m.aggregate }

// checkAggregate is the shape rule of version 3, once the probe has read
// the declared version: an aggregate module declares at least version 3
// and imports no keyed state or timers, which it has none of.
func (m *Module) checkAggregate() error {
	if !m.aggregate {
		return nil
	}
	if m.abiVersion < abi.AggregateVersion {
		return markf([]error{ErrInvalidModule}, "module %s exports %s but declares ABI version %d; aggregate modules declare version %d",
			m.name, abi.ExportAggAdd, m.abiVersion, abi.AggregateVersion)
	}
	for _, def := range m.compiled.ImportedFunctions() {
		if mod, name, _ := def.Import(); mod == abi.ImportModule && isKeyedImport(name) {
			return markf([]error{ErrInvalidModule}, "module %s is an aggregate module but imports %s.%s: an aggregate keeps no state or timers of its own (the window operator stores its accumulators)",
				m.name, abi.ImportModule, name)
		}
	}
	return nil
}

// aggCalls are the aggregate exports of an instance and the scratch of
// their calls.
type aggCalls struct {
	create, add, merge, result api.Function
	looked                     bool
	// collectFn is a.collect, bound once: a method value taken per call
	// would allocate on the record path.
	collectFn func([]abi.Record)

	in   []abi.Record // the batch handed to the guest
	hdr  [abi.GroupHeaderKeyLen]byte
	hdrs []byte // the header keys of AggAddGroups, one after another
	// AggAdd's arguments to AggAddGroups, without allocating.
	oneAcc   [1][]byte
	oneCount [1]int
	out      []byte   // the values the guest emitted, concatenated
	end      []int    // end offset in out of each emitted value
	got      [][]byte // views of out, the call's results
}

func (i *Instance) aggFuncs() (*aggCalls, error) {
	if err := i.usable(); err != nil {
		return nil, err
	}
	a := &i.agg
	if !a.looked {
		if !i.module.aggregate {
			return nil, fmt.Errorf("%s: module %s is not an aggregate module", i.who, i.module.name)
		}
		a.create = i.wmod.ExportedFunction(abi.ExportAggCreate)
		a.add = i.wmod.ExportedFunction(abi.ExportAggAdd)
		a.merge = i.wmod.ExportedFunction(abi.ExportAggMerge)
		a.result = i.wmod.ExportedFunction(abi.ExportAggResult)
		a.collectFn = a.collect
		a.looked = true
	}
	return a, nil
}

// collect is the emit callback of the aggregate calls: it keeps the values
// only, as the ABI says.
func (a *aggCalls) collect(recs []abi.Record) {
	for k := range recs {
		a.out = append(a.out, recs[k].Value...)
		a.end = append(a.end, len(a.out))
	}
}

// aggCall writes a.in as a batch, calls export and checks that the guest
// emitted exactly want values; they are returned as views of a.out, valid
// until the next call.
func (i *Instance) aggCall(export string, fn api.Function, a *aggCalls, want int) ([][]byte, error) {
	if err := i.ready(export); err != nil {
		return nil, err
	}
	a.out, a.end = a.out[:0], a.end[:0]
	if fn == nil { // eddy_agg_create takes no batch
		if err := i.call(export, a.create, a.collectFn); err != nil {
			return nil, err
		}
	} else {
		size := abi.EncodedSize(a.in)
		ptr, err := i.buffer(size, "batch")
		if err != nil {
			return nil, err
		}
		view, _ := i.mem.Read(ptr, uint32(size))
		abi.EncodeBatch(view, a.in)
		i.stack[0], i.stack[1] = uint64(ptr), uint64(size)
		if err := i.call(export, fn, a.collectFn); err != nil {
			return nil, err
		}
	}
	if err := i.status(export); err != nil {
		return nil, err
	}
	if len(a.end) != want {
		return nil, markf([]error{ErrOperatorFailed}, "%s: %s emitted %d records, want %d (one per %s)",
			i.who, export, len(a.end), want, map[bool]string{true: "group", false: "window"}[export != abi.ExportAggResult])
	}
	a.got = a.got[:0]
	from := 0
	for _, e := range a.end {
		a.got = append(a.got, a.out[from:e:e])
		from = e
	}
	return a.got, nil
}

func (a *aggCalls) header(acc []byte, n int) abi.Record {
	binary.LittleEndian.PutUint32(a.hdr[:], uint32(n))
	return abi.Record{Key: a.hdr[:], Value: acc, Timestamp: abi.NoTimestamp}
}

// AggCreate calls eddy_agg_create and returns the empty accumulator. The
// result is valid until the next call on the instance; copy it to keep it.
func (i *Instance) AggCreate() ([]byte, error) {
	a, err := i.aggFuncs()
	if err != nil {
		return nil, err
	}
	got, err := i.aggCall(abi.ExportAggCreate, nil, a, 1)
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

// AggAdd folds recs into acc with one eddy_agg_add call (one group) and
// returns the new accumulator, valid until the next call on the instance.
// acc may be the result of the previous call: inputs are copied into the
// guest before results are collected.
func (i *Instance) AggAdd(acc []byte, recs []abi.Record) ([]byte, error) {
	a, err := i.aggFuncs()
	if err != nil {
		return nil, err
	}
	a.oneAcc[0], a.oneCount[0] = acc, len(recs)
	got, err := i.AggAddGroups(a.oneAcc[:], a.oneCount[:], recs)
	a.oneAcc[0] = nil
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

// AggAddGroups folds the records of many groups into their accumulators
// with one eddy_agg_add call: group g starts from accs[g] and adds the next
// counts[g] records of recs, in order. It returns one accumulator per
// group, valid until the next call on the instance. What crosses the Wasm
// boundary once per call is paid once per batch of the window operator
// rather than once per record (DESIGN.md, "The Wasm boundary").
func (i *Instance) AggAddGroups(accs [][]byte, counts []int, recs []abi.Record) ([][]byte, error) {
	a, err := i.aggFuncs()
	if err != nil {
		return nil, err
	}
	if len(accs) != len(counts) {
		return nil, fmt.Errorf("%s: AggAddGroups: %d accumulators for %d groups", i.who, len(accs), len(counts))
	}
	// The header keys first: a.in aliases a.hdrs, which must not move.
	a.hdrs = a.hdrs[:0]
	for _, n := range counts {
		a.hdrs = binary.LittleEndian.AppendUint32(a.hdrs, uint32(n))
	}
	a.in = a.in[:0]
	next := 0
	for g, n := range counts {
		if n < 0 || n > len(recs)-next {
			return nil, fmt.Errorf("%s: AggAddGroups: group %d counts %d records, %d are left", i.who, g, n, len(recs)-next)
		}
		h := a.hdrs[g*abi.GroupHeaderKeyLen : (g+1)*abi.GroupHeaderKeyLen : (g+1)*abi.GroupHeaderKeyLen]
		a.in = append(a.in, abi.Record{Key: h, Value: accs[g], Timestamp: abi.NoTimestamp})
		a.in = append(a.in, recs[next:next+n]...)
		next += n
	}
	got, err := i.aggCall(abi.ExportAggAdd, a.add, a, len(counts))
	clear(a.in) // do not keep the caller's records alive
	if err != nil {
		return nil, err
	}
	return got, nil
}

// AggMerge merges others into acc with one eddy_agg_merge call and returns
// the merged accumulator, valid until the next call on the instance.
func (i *Instance) AggMerge(acc []byte, others [][]byte) ([]byte, error) {
	a, err := i.aggFuncs()
	if err != nil {
		return nil, err
	}
	a.in = append(a.in[:0], a.header(acc, len(others)))
	for _, o := range others {
		a.in = append(a.in, abi.Record{Value: o, Timestamp: abi.NoTimestamp})
	}
	got, err := i.aggCall(abi.ExportAggMerge, a.merge, a, 1)
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

// AggResult calls eddy_agg_result for the window of key whose last
// millisecond is ts and returns its result, one JSON value, valid until the
// next call on the instance. A result that is not valid JSON is an error
// (ErrOperatorFailed).
func (i *Instance) AggResult(key []byte, ts int64, acc []byte) ([]byte, error) {
	a, err := i.aggFuncs()
	if err != nil {
		return nil, err
	}
	a.in = append(a.in[:0], abi.Record{Key: key, Value: acc, Timestamp: ts})
	got, err := i.aggCall(abi.ExportAggResult, a.result, a, 1)
	if err != nil {
		return nil, err
	}
	if !json.Valid(got[0]) {
		return nil, markf([]error{ErrOperatorFailed}, "%s: %s: the result %s is not one JSON value",
			i.who, abi.ExportAggResult, quoteShort(got[0]))
	}
	return got[0], nil
}

// quoteShort quotes b for an error message, cut to a readable length.
func quoteShort(b []byte) string {
	const limit = 64
	if len(b) > limit {
		return fmt.Sprintf("%q…", b[:limit])
	}
	return fmt.Sprintf("%q", b)
}
