package udfs_test

// The version 2 half of the test host: keyed state, timers and time,
// backed by maps, following ABI.md ("Version 2: keyed state, timers,
// time"). It is not the real host (package host and package state are
// tested elsewhere); it checks the rules a guest SDK must follow and traps
// the guest, as the real host does, when one is broken:
//
//   - state is declared only during eddy_open, and a name keeps its kind;
//   - state and timers are used only during eddy_process and eddy_on_timer,
//     with a key of the batch being handled (the SDKs' current key), and
//     each state with the imports of its kind;
//   - every pointer and length lies inside memory.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
)

// The ABI version 2 names (ABI.md); package abi does not list them yet.
const (
	exportOnTimer = "eddy_on_timer"

	importStateDeclare    = "state_declare"
	importStateGet        = "state_get"
	importStatePut        = "state_put"
	importStateClear      = "state_clear"
	importStateAppend     = "state_append"
	importStateList       = "state_list"
	importStateMapGet     = "state_map_get"
	importStateMapPut     = "state_map_put"
	importStateMapDelete  = "state_map_delete"
	importStateMapEntries = "state_map_entries"
	importTimerRegister   = "timer_register"
	importTimerDelete     = "timer_delete"
	importWatermark       = "current_watermark"
	importProcessingTime  = "processing_time"
)

var (
	i32 = abi.I32
	i64 = abi.I64
	// v2Imports are the version 2 imports with their signatures.
	v2Imports = map[string]abi.Signature{
		importStateDeclare:    {Params: []abi.ValType{i32, i32, i32, i64}, Results: []abi.ValType{i32}},
		importStateGet:        {Params: []abi.ValType{i32, i32, i32, i32, i32}, Results: []abi.ValType{i32}},
		importStatePut:        {Params: []abi.ValType{i32, i32, i32, i32, i32}},
		importStateClear:      {Params: []abi.ValType{i32, i32, i32}},
		importStateAppend:     {Params: []abi.ValType{i32, i32, i32, i32, i32}},
		importStateList:       {Params: []abi.ValType{i32, i32, i32, i32, i32}, Results: []abi.ValType{i32}},
		importStateMapGet:     {Params: []abi.ValType{i32, i32, i32, i32, i32, i32, i32}, Results: []abi.ValType{i32}},
		importStateMapPut:     {Params: []abi.ValType{i32, i32, i32, i32, i32, i32, i32}},
		importStateMapDelete:  {Params: []abi.ValType{i32, i32, i32, i32, i32}},
		importStateMapEntries: {Params: []abi.ValType{i32, i32, i32, i32, i32}, Results: []abi.ValType{i32}},
		importTimerRegister:   {Params: []abi.ValType{i32, i32, i32, i64}},
		importTimerDelete:     {Params: []abi.ValType{i32, i32, i32, i64}},
		importWatermark:       {Results: []abi.ValType{i64}},
		importProcessingTime:  {Results: []abi.ValType{i64}},
	}
	onTimerSignature = abi.Signature{Params: []abi.ValType{i32, i32}, Results: []abi.ValType{i32}}
)

const (
	kindValue = 0
	kindList  = 1
	kindMap   = 2

	eventTime      = 0
	processingTime = 1
)

type stateAddr struct {
	id  int32
	key string
}

type timerAddr struct {
	kind int32
	key  string
	ts   int64
}

type declaration struct {
	name  string
	kind  int32
	ttlMs int64
}

// keyedHost is the keyed state and timers of one guest instance.
type keyedHost struct {
	decls  []declaration
	values map[stateAddr][]byte
	lists  map[stateAddr][][]byte
	maps   map[stateAddr]map[string][]byte
	timers map[timerAddr]bool

	watermark int64
	now       int64

	// What the current guest call may do.
	opening bool            // during eddy_open
	keys    map[string]bool // the keys of the batch of eddy_process or eddy_on_timer; nil otherwise

	retries int // reads answered "call again with a larger buffer"
}

func newKeyedHost() *keyedHost {
	return &keyedHost{
		values:    map[stateAddr][]byte{},
		lists:     map[stateAddr][][]byte{},
		maps:      map[stateAddr]map[string][]byte{},
		timers:    map[timerAddr]bool{},
		watermark: math.MinInt64,
	}
}

// values returns the value state called name by key, for comparisons.
func (h *keyedHost) valuesOf(name string) map[string][]byte {
	out := map[string][]byte{}
	for a, v := range h.values {
		if h.decls[a.id].name == name {
			out[a.key] = v
		}
	}
	return out
}

// pendingTimers returns the timers still set, in firing order.
func (h *keyedHost) pendingTimers() []timerAddr {
	return sortTimers(slices.Collect(maps.Keys(h.timers)))
}

// sortTimers orders timers as the host fires them: by time, then key.
func sortTimers(ts []timerAddr) []timerAddr {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].ts != ts[j].ts {
			return ts[i].ts < ts[j].ts
		}
		if ts[i].key != ts[j].key {
			return ts[i].key < ts[j].key
		}
		return ts[i].kind < ts[j].kind
	})
	return ts
}

func keyedOf(ctx context.Context) *keyedHost { return callsOf(ctx).keyed }

// trap fails the calling guest, as a bad call into the real host does.
func trap(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// keyAt reads the key argument of a state or timer import and checks that
// the guest may use it now.
func (h *keyedHost) keyAt(m api.Module, ptr, n uint64, what string) string {
	if h.keys == nil {
		trap("%s outside eddy_process and eddy_on_timer", what)
	}
	k := string(read(m, api.DecodeU32(ptr), api.DecodeU32(n), what+" key"))
	if !h.keys[k] {
		trap("%s: key %q is not a key of the batch being handled", what, k)
	}
	return k
}

// state checks a state id and its kind.
func (h *keyedHost) state(id uint64, kind int32, what string) int32 {
	i := int32(api.DecodeI32(id))
	if i < 0 || int(i) >= len(h.decls) {
		trap("%s: no state %d", what, i)
	}
	if kind >= 0 && h.decls[i].kind != kind {
		trap("%s on %s, a state of kind %d", what, h.decls[i].name, h.decls[i].kind)
	}
	return i
}

// answer writes b to dst if it fits and returns the length to report, as
// state_get and the other reads do.
func (h *keyedHost) answer(m api.Module, b []byte, dst, capacity uint64, what string) uint64 {
	n := uint32(len(b))
	if n > api.DecodeU32(capacity) {
		h.retries++
		return api.EncodeI32(int32(n))
	}
	read(m, api.DecodeU32(dst), api.DecodeU32(capacity), what+" dst") // in memory?
	m.Memory().Write(api.DecodeU32(dst), b)
	return api.EncodeI32(int32(n))
}

func frames(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// hostFunctions are the version 2 imports.
func hostFunctions() map[string]api.GoModuleFunc {
	return map[string]api.GoModuleFunc{
		importStateDeclare: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			kind, ttl := int32(api.DecodeI32(s[0])), int64(s[3])
			name := string(read(m, api.DecodeU32(s[1]), api.DecodeU32(s[2]), "state_declare name"))
			if !h.opening {
				trap("state_declare(%q) outside eddy_open", name)
			}
			if kind < kindValue || kind > kindMap {
				trap("state_declare(%q): bad kind %d", name, kind)
			}
			for id, d := range h.decls {
				if d.name == name {
					if d.kind != kind {
						trap("state_declare(%q): declared before with kind %d, now %d", name, d.kind, kind)
					}
					s[0] = api.EncodeI32(int32(id))
					return
				}
			}
			h.decls = append(h.decls, declaration{name: name, kind: kind, ttlMs: ttl})
			s[0] = api.EncodeI32(int32(len(h.decls) - 1))
		},
		importStateGet: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindValue, "state_get"), h.keyAt(m, s[1], s[2], "state_get")}
			v, ok := h.values[a]
			if !ok {
				s[0] = api.EncodeI32(-1)
				return
			}
			s[0] = h.answer(m, v, s[3], s[4], "state_get")
		},
		importStatePut: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindValue, "state_put"), h.keyAt(m, s[1], s[2], "state_put")}
			h.values[a] = bytes.Clone(read(m, api.DecodeU32(s[3]), api.DecodeU32(s[4]), "state_put value"))
		},
		importStateClear: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], -1, "state_clear"), h.keyAt(m, s[1], s[2], "state_clear")}
			delete(h.values, a)
			delete(h.lists, a)
			delete(h.maps, a)
		},
		importStateAppend: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindList, "state_append"), h.keyAt(m, s[1], s[2], "state_append")}
			h.lists[a] = append(h.lists[a], bytes.Clone(read(m, api.DecodeU32(s[3]), api.DecodeU32(s[4]), "state_append value")))
		},
		importStateList: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindList, "state_list"), h.keyAt(m, s[1], s[2], "state_list")}
			l := h.lists[a]
			if len(l) == 0 {
				s[0] = api.EncodeI32(-1)
				return
			}
			s[0] = h.answer(m, frames(l...), s[3], s[4], "state_list")
		},
		importStateMapGet: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindMap, "state_map_get"), h.keyAt(m, s[1], s[2], "state_map_get")}
			uk := string(read(m, api.DecodeU32(s[3]), api.DecodeU32(s[4]), "state_map_get user key"))
			v, ok := h.maps[a][uk]
			if !ok {
				s[0] = api.EncodeI32(-1)
				return
			}
			s[0] = h.answer(m, v, s[5], s[6], "state_map_get")
		},
		importStateMapPut: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindMap, "state_map_put"), h.keyAt(m, s[1], s[2], "state_map_put")}
			uk := string(read(m, api.DecodeU32(s[3]), api.DecodeU32(s[4]), "state_map_put user key"))
			if h.maps[a] == nil {
				h.maps[a] = map[string][]byte{}
			}
			h.maps[a][uk] = bytes.Clone(read(m, api.DecodeU32(s[5]), api.DecodeU32(s[6]), "state_map_put value"))
		},
		importStateMapDelete: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindMap, "state_map_delete"), h.keyAt(m, s[1], s[2], "state_map_delete")}
			delete(h.maps[a], string(read(m, api.DecodeU32(s[3]), api.DecodeU32(s[4]), "state_map_delete user key")))
			if len(h.maps[a]) == 0 {
				delete(h.maps, a)
			}
		},
		importStateMapEntries: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			a := stateAddr{h.state(s[0], kindMap, "state_map_entries"), h.keyAt(m, s[1], s[2], "state_map_entries")}
			mp := h.maps[a]
			if len(mp) == 0 {
				s[0] = api.EncodeI32(-1)
				return
			}
			var parts [][]byte
			for _, uk := range slices.Sorted(maps.Keys(mp)) {
				parts = append(parts, []byte(uk), mp[uk])
			}
			s[0] = h.answer(m, frames(parts...), s[3], s[4], "state_map_entries")
		},
		importTimerRegister: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			t := timerAddr{timerKind(s[0], "timer_register"), h.keyAt(m, s[1], s[2], "timer_register"), int64(s[3])}
			h.timers[t] = true
		},
		importTimerDelete: func(ctx context.Context, m api.Module, s []uint64) {
			h := keyedOf(ctx)
			t := timerAddr{timerKind(s[0], "timer_delete"), h.keyAt(m, s[1], s[2], "timer_delete"), int64(s[3])}
			delete(h.timers, t)
		},
		importWatermark: func(ctx context.Context, m api.Module, s []uint64) {
			s[0] = uint64(keyedOf(ctx).watermark)
		},
		importProcessingTime: func(ctx context.Context, m api.Module, s []uint64) {
			s[0] = uint64(keyedOf(ctx).now)
		},
	}
}

func timerKind(v uint64, what string) int32 {
	k := int32(api.DecodeI32(v))
	if k != eventTime && k != processingTime {
		trap("%s: bad timer kind %d", what, k)
	}
	return k
}

// exportV2 adds the version 2 imports to the host module.
func exportV2(b wazero.HostModuleBuilder) wazero.HostModuleBuilder {
	for name, fn := range hostFunctions() {
		sig := v2Imports[name]
		b = b.NewFunctionBuilder().WithGoModuleFunction(fn, valueTypes(sig.Params), valueTypes(sig.Results)).Export(name)
	}
	return b
}

func valueTypes(ts []abi.ValType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

// timerBatchSize is how many fired timers one eddy_on_timer call gets at
// most, so that advancing far spreads timers over several calls.
const timerBatchSize = 16

// fire hands the guest every timer of kind due at upTo, in (time, key)
// order, in batches, and then any that the guest set meanwhile and that are
// due too, as a watermark or the clock moving to upTo does.
func (g *guest) fire(kind int32, upTo int64) error {
	g.t.Helper()
	h := g.calls.keyed
	for {
		var due []timerAddr
		for t := range h.timers {
			if t.kind == kind && t.ts <= upTo {
				due = append(due, t)
			}
		}
		if len(due) == 0 {
			return nil
		}
		due = sortTimers(due)[:min(len(due), timerBatchSize)]
		recs := make([]abi.Record, len(due))
		for i, t := range due {
			delete(h.timers, t)
			recs[i] = abi.Record{Key: []byte(t.key), Value: []byte{byte(kind)}, Timestamp: t.ts}
			g.calls.fired = append(g.calls.fired, t)
		}
		batch := abi.AppendBatch(nil, recs)
		ptr := g.write(batch)
		h.keys = keysOf(recs)
		res := g.call(exportOnTimer, uint64(ptr), uint64(len(batch)))
		h.keys = nil
		if err := g.status(exportOnTimer, res); err != nil {
			return err
		}
	}
}

// advanceWatermark moves the event-time watermark to wm and fires the
// event-time timers due.
func (g *guest) advanceWatermark(wm int64) error {
	g.t.Helper()
	g.calls.keyed.watermark = wm
	return g.fire(eventTime, wm)
}

// advanceClock moves processing time to now and fires the processing-time
// timers due.
func (g *guest) advanceClock(now int64) error {
	g.t.Helper()
	g.calls.keyed.now = now
	return g.fire(processingTime, now)
}

func keysOf(recs []abi.Record) map[string]bool {
	keys := make(map[string]bool, len(recs))
	for _, r := range recs {
		keys[string(r.Key)] = true
	}
	return keys
}
