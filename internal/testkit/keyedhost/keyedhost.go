// Package keyedhost is a fake of the host's keyed state, timers and time
// (ABI version 2, abi/ABI.md), backed by maps, for the tests that run
// guests under wazero with a host of their own: the SDKs' (sdk/internal/
// sdktest) and the example operators' (udfs). Export adds its functions,
// under abi's names and signatures, to the host module those tests build.
//
// It is not the real host (package host and package state are tested on
// their own) and not for anything but tests. It checks the rules a guest
// SDK must follow and traps the guest, as the real host does, when one is
// broken:
//
//   - state is declared only during eddy_open (see Host.Open), and a name
//     keeps its kind;
//   - state and timers are used only while a batch is handled, in
//     eddy_process and eddy_on_timer (see Host.Batch), with a key of that
//     batch (the SDKs' current key), and each state with the imports of
//     its kind;
//   - every pointer and length lies inside memory.
//
// The real host also allows state and timers during eddy_close; no guest
// under test uses that.
package keyedhost

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// Host is the keyed state, the timers and the time of one guest instance.
type Host struct {
	// Decls are the declared states; a state's id is its index.
	Decls []Declaration
	// Watermark is what current_watermark answers: abi.NoWatermark until a
	// test moves it.
	Watermark int64
	// Now is what processing_time answers, in ms since the epoch.
	Now int64
	// Retries counts the reads answered "call again with a larger buffer".
	Retries int

	values map[addr][]byte
	lists  map[addr][][]byte
	maps   map[addr]map[string][]byte
	timers map[Timer]bool

	// What the current guest call may do.
	opening bool            // during eddy_open
	keys    map[string]bool // the keys of the batch being handled; nil otherwise
}

// Declaration is a state as the guest declared it.
type Declaration struct {
	Name  string
	Kind  int32 // abi.StateValue, abi.StateList or abi.StateMap
	TTLMs int64
}

// Timer is a timer the guest set: one per kind, key and time.
type Timer struct {
	Kind int32 // abi.TimerEventTime or abi.TimerProcessingTime
	Key  string
	Time int64
}

type addr struct {
	id  int32
	key string
}

// New returns a Host with no state, no timers and no watermark yet.
func New() *Host {
	return &Host{
		Watermark: abi.NoWatermark,
		values:    map[addr][]byte{},
		lists:     map[addr][][]byte{},
		maps:      map[addr]map[string][]byte{},
		timers:    map[Timer]bool{},
	}
}

// Open lets the guest declare state until the returned function is called:
// wrap the guest's eddy_open in it.
func (h *Host) Open() (end func()) {
	h.opening = true
	return func() { h.opening = false }
}

// Batch lets the guest use the state and timers of the keys of recs until
// the returned function is called: wrap the guest's eddy_process or
// eddy_on_timer of recs in it.
func (h *Host) Batch(recs []abi.Record) (end func()) {
	h.keys = make(map[string]bool, len(recs))
	for _, r := range recs {
		h.keys[string(r.Key)] = true
	}
	return func() { h.keys = nil }
}

// ValuesOf returns the value state called name, by key.
func (h *Host) ValuesOf(name string) map[string][]byte {
	out := map[string][]byte{}
	for a, v := range h.values {
		if h.Decls[a.id].Name == name {
			out[a.key] = v
		}
	}
	return out
}

// PendingTimers returns the timers still set, in firing order.
func (h *Host) PendingTimers() []Timer {
	return SortTimers(slices.Collect(maps.Keys(h.timers)))
}

// Due removes the timers of kind due at upTo (their time ≤ upTo) and
// returns them in firing order, at most max of them (all when max is 0):
// what the host hands to one eddy_on_timer call (see TimerRecords).
func (h *Host) Due(kind int32, upTo int64, max int) []Timer {
	var due []Timer
	for t := range h.timers {
		if t.Kind == kind && t.Time <= upTo {
			due = append(due, t)
		}
	}
	due = SortTimers(due)
	if max > 0 {
		due = due[:min(len(due), max)]
	}
	for _, t := range due {
		delete(h.timers, t)
	}
	return due
}

// SortTimers orders timers as the host fires them: by time, then key.
func SortTimers(ts []Timer) []Timer {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Time != ts[j].Time {
			return ts[i].Time < ts[j].Time
		}
		if ts[i].Key != ts[j].Key {
			return ts[i].Key < ts[j].Key
		}
		return ts[i].Kind < ts[j].Kind
	})
	return ts
}

// TimerRecords are the records of the batch that hands ts to
// eddy_on_timer: the key, the time as timestamp, the kind as the value's
// one byte.
func TimerRecords(ts []Timer) []abi.Record {
	recs := make([]abi.Record, len(ts))
	for i, t := range ts {
		recs[i] = abi.Record{Key: []byte(t.Key), Value: []byte{byte(t.Kind)}, Timestamp: t.Time}
	}
	return recs
}

// Export adds the version 2 imports to b, the host module abi.ImportModule;
// of returns the Host of the instance a call comes from, which the test
// puts in the context it calls the guest with.
func Export(b wazero.HostModuleBuilder, of func(context.Context) *Host) wazero.HostModuleBuilder {
	fns := functions()
	for name, sig := range abi.HostImports {
		if abi.ImportVersion(name) != 2 {
			continue
		}
		fn, ok := fns[name]
		if !ok {
			panic("keyedhost: no function for the version 2 import " + name)
		}
		g := api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) { fn(of(ctx), m, s) })
		b = b.NewFunctionBuilder().WithGoModuleFunction(g, valueTypes(sig.Params), valueTypes(sig.Results)).Export(name)
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

// trap fails the calling guest, as a bad call into the real host does:
// wazero turns the panic into an error of the guest's call.
func trap(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// read returns guest memory [ptr, ptr+n) or traps.
func read(m api.Module, ptr, n uint64, what string) []byte {
	b, ok := m.Memory().Read(api.DecodeU32(ptr), api.DecodeU32(n))
	if !ok {
		trap("%s: [%d, %d) is outside memory", what, api.DecodeU32(ptr), uint64(api.DecodeU32(ptr))+uint64(api.DecodeU32(n)))
	}
	return b
}

// keyAt reads the key argument of a state or timer import and checks that
// the guest may use it now.
func (h *Host) keyAt(m api.Module, ptr, n uint64, what string) string {
	if h.keys == nil {
		trap("%s outside eddy_process and eddy_on_timer", what)
	}
	k := string(read(m, ptr, n, what+" key"))
	if !h.keys[k] {
		trap("%s: key %q is not a key of the batch being handled", what, k)
	}
	return k
}

// state checks a state id and, unless kind is -1, its kind.
func (h *Host) state(id uint64, kind int32, what string) int32 {
	i := api.DecodeI32(id)
	if i < 0 || int(i) >= len(h.Decls) {
		trap("%s: no state %d", what, i)
	}
	if kind >= 0 && h.Decls[i].Kind != kind {
		trap("%s on %s, a state of kind %d", what, h.Decls[i].Name, h.Decls[i].Kind)
	}
	return i
}

// at reads the (id, key_ptr, key_len) arguments of a state import.
func (h *Host) at(m api.Module, s []uint64, kind int32, what string) addr {
	return addr{h.state(s[0], kind, what), h.keyAt(m, s[1], s[2], what)}
}

// answer is the result of a read, as state_get and the other reads
// return it: abi.StateAbsent unless ok, else the length of b, after writing
// b to dst if it fits.
func (h *Host) answer(m api.Module, b []byte, ok bool, dst, capacity uint64, what string) uint64 {
	if !ok {
		return api.EncodeI32(abi.StateAbsent)
	}
	n := uint32(len(b))
	if n > api.DecodeU32(capacity) {
		h.Retries++
		return api.EncodeI32(int32(n))
	}
	read(m, dst, capacity, what+" dst") // in memory?
	m.Memory().Write(api.DecodeU32(dst), b)
	return api.EncodeI32(int32(n))
}

func timerKind(v uint64, what string) int32 {
	k := api.DecodeI32(v)
	if k != abi.TimerEventTime && k != abi.TimerProcessingTime {
		trap("%s: bad timer kind %d", what, k)
	}
	return k
}

// functions are the version 2 imports, by name.
func functions() map[string]func(h *Host, m api.Module, s []uint64) {
	return map[string]func(h *Host, m api.Module, s []uint64){
		abi.ImportStateDeclare: func(h *Host, m api.Module, s []uint64) {
			kind, ttl := api.DecodeI32(s[0]), int64(s[3])
			name := string(read(m, s[1], s[2], "state_declare name"))
			if !h.opening {
				trap("state_declare(%q) outside eddy_open", name)
			}
			if kind < abi.StateValue || kind > abi.StateMap {
				trap("state_declare(%q): bad kind %d", name, kind)
			}
			for id, d := range h.Decls {
				if d.Name == name {
					if d.Kind != kind {
						trap("state_declare(%q): declared before with kind %d, now %d", name, d.Kind, kind)
					}
					s[0] = api.EncodeI32(int32(id))
					return
				}
			}
			h.Decls = append(h.Decls, Declaration{Name: name, Kind: kind, TTLMs: ttl})
			s[0] = api.EncodeI32(int32(len(h.Decls) - 1))
		},
		abi.ImportStateGet: func(h *Host, m api.Module, s []uint64) {
			v, ok := h.values[h.at(m, s, abi.StateValue, "state_get")]
			s[0] = h.answer(m, v, ok, s[3], s[4], "state_get")
		},
		abi.ImportStatePut: func(h *Host, m api.Module, s []uint64) {
			a := h.at(m, s, abi.StateValue, "state_put")
			h.values[a] = bytes.Clone(read(m, s[3], s[4], "state_put value"))
		},
		abi.ImportStateClear: func(h *Host, m api.Module, s []uint64) {
			a := h.at(m, s, -1, "state_clear")
			delete(h.values, a)
			delete(h.lists, a)
			delete(h.maps, a)
		},
		abi.ImportStateAppend: func(h *Host, m api.Module, s []uint64) {
			a := h.at(m, s, abi.StateList, "state_append")
			h.lists[a] = append(h.lists[a], bytes.Clone(read(m, s[3], s[4], "state_append value")))
		},
		abi.ImportStateList: func(h *Host, m api.Module, s []uint64) {
			l := h.lists[h.at(m, s, abi.StateList, "state_list")]
			s[0] = h.answer(m, testkit.Frames(l...), len(l) > 0, s[3], s[4], "state_list")
		},
		abi.ImportStateMapGet: func(h *Host, m api.Module, s []uint64) {
			a := h.at(m, s, abi.StateMap, "state_map_get")
			v, ok := h.maps[a][string(read(m, s[3], s[4], "state_map_get user key"))]
			s[0] = h.answer(m, v, ok, s[5], s[6], "state_map_get")
		},
		abi.ImportStateMapPut: func(h *Host, m api.Module, s []uint64) {
			a := h.at(m, s, abi.StateMap, "state_map_put")
			uk := string(read(m, s[3], s[4], "state_map_put user key"))
			if h.maps[a] == nil {
				h.maps[a] = map[string][]byte{}
			}
			h.maps[a][uk] = bytes.Clone(read(m, s[5], s[6], "state_map_put value"))
		},
		abi.ImportStateMapDelete: func(h *Host, m api.Module, s []uint64) {
			a := h.at(m, s, abi.StateMap, "state_map_delete")
			delete(h.maps[a], string(read(m, s[3], s[4], "state_map_delete user key")))
			if len(h.maps[a]) == 0 {
				delete(h.maps, a)
			}
		},
		abi.ImportStateMapEntries: func(h *Host, m api.Module, s []uint64) {
			mp := h.maps[h.at(m, s, abi.StateMap, "state_map_entries")]
			var parts [][]byte
			for _, uk := range slices.Sorted(maps.Keys(mp)) {
				parts = append(parts, []byte(uk), mp[uk])
			}
			s[0] = h.answer(m, testkit.Frames(parts...), len(mp) > 0, s[3], s[4], "state_map_entries")
		},
		abi.ImportTimerRegister: func(h *Host, m api.Module, s []uint64) {
			h.timers[Timer{timerKind(s[0], "timer_register"), h.keyAt(m, s[1], s[2], "timer_register"), int64(s[3])}] = true
		},
		abi.ImportTimerDelete: func(h *Host, m api.Module, s []uint64) {
			delete(h.timers, Timer{timerKind(s[0], "timer_delete"), h.keyAt(m, s[1], s[2], "timer_delete"), int64(s[3])})
		},
		abi.ImportWatermark: func(h *Host, m api.Module, s []uint64) {
			s[0] = uint64(h.Watermark)
		},
		abi.ImportProcessingTime: func(h *Host, m api.Module, s []uint64) {
			s[0] = uint64(h.Now)
		},
	}
}
