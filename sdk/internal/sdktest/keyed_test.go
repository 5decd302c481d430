package sdktest

// The keyed half of the test host (ABI version 2), backed by maps, and the
// test of the keyed guests (keyedguest/ and testdata/ckeyed.c): one script
// of commands, the same expected output from both languages. udfs/ has a
// stricter fake host that also checks the keys a guest uses; this one
// only needs to answer as ABI.md says.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
)

// keyedSuffix names the keyed build of a language's guest ("go-keyed").
const keyedSuffix = "-keyed"

type stateAddr struct {
	id  int32
	key string
}

type timerAddr struct {
	kind int32
	key  string
	ts   int64
}

type keyedState struct {
	names  []string
	values map[stateAddr][]byte
	lists  map[stateAddr][][]byte
	maps   map[stateAddr]map[string][]byte
	timers map[timerAddr]bool
	wm     int64
	now    int64
}

func newKeyedState() keyedState {
	return keyedState{values: map[stateAddr][]byte{}, lists: map[stateAddr][][]byte{},
		maps: map[stateAddr]map[string][]byte{}, timers: map[timerAddr]bool{}, wm: math.MinInt64}
}

func frames(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// answer is the result of a read: the length, after copying b to dst if
// it fits.
func answer(m api.Module, b []byte, ok bool, dst, capacity uint64) uint64 {
	if !ok {
		return api.EncodeI32(-1)
	}
	if uint64(len(b)) <= capacity && !m.Memory().Write(api.DecodeU32(dst), b) {
		panic(fmt.Sprintf("dst [%d, +%d) is outside memory", dst, len(b)))
	}
	return api.EncodeI32(int32(len(b)))
}

type keyedFunc struct {
	params, results []api.ValueType
	fn              func(k *keyedState, m api.Module, s []uint64)
}

// exportKeyed adds the version 2 imports to the host module.
func exportKeyed(b wazero.HostModuleBuilder) wazero.HostModuleBuilder {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	at := func(m api.Module, s []uint64) stateAddr {
		return stateAddr{int32(api.DecodeI32(s[0])), string(read(m, s[1], s[2]))}
	}
	timer := func(m api.Module, s []uint64) timerAddr {
		return timerAddr{int32(api.DecodeI32(s[0])), string(read(m, s[1], s[2])), int64(s[3])}
	}
	funcs := map[string]keyedFunc{
		"state_declare": {[]api.ValueType{i32, i32, i32, i64}, []api.ValueType{i32}, func(k *keyedState, m api.Module, s []uint64) {
			name := string(read(m, s[1], s[2]))
			id := slices.Index(k.names, name)
			if id < 0 {
				k.names = append(k.names, name)
				id = len(k.names) - 1
			}
			s[0] = api.EncodeI32(int32(id))
		}},
		"state_get": {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, func(k *keyedState, m api.Module, s []uint64) {
			v, ok := k.values[at(m, s)]
			s[0] = answer(m, v, ok, s[3], s[4])
		}},
		"state_put": {[]api.ValueType{i32, i32, i32, i32, i32}, nil, func(k *keyedState, m api.Module, s []uint64) {
			k.values[at(m, s)] = bytes.Clone(read(m, s[3], s[4]))
		}},
		"state_clear": {[]api.ValueType{i32, i32, i32}, nil, func(k *keyedState, m api.Module, s []uint64) {
			a := at(m, s)
			delete(k.values, a)
			delete(k.lists, a)
			delete(k.maps, a)
		}},
		"state_append": {[]api.ValueType{i32, i32, i32, i32, i32}, nil, func(k *keyedState, m api.Module, s []uint64) {
			a := at(m, s)
			k.lists[a] = append(k.lists[a], bytes.Clone(read(m, s[3], s[4])))
		}},
		"state_list": {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, func(k *keyedState, m api.Module, s []uint64) {
			l := k.lists[at(m, s)]
			s[0] = answer(m, frames(l...), len(l) > 0, s[3], s[4])
		}},
		"state_map_get": {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}, func(k *keyedState, m api.Module, s []uint64) {
			v, ok := k.maps[at(m, s)][string(read(m, s[3], s[4]))]
			s[0] = answer(m, v, ok, s[5], s[6])
		}},
		"state_map_put": {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32}, nil, func(k *keyedState, m api.Module, s []uint64) {
			a := at(m, s)
			if k.maps[a] == nil {
				k.maps[a] = map[string][]byte{}
			}
			k.maps[a][string(read(m, s[3], s[4]))] = bytes.Clone(read(m, s[5], s[6]))
		}},
		"state_map_delete": {[]api.ValueType{i32, i32, i32, i32, i32}, nil, func(k *keyedState, m api.Module, s []uint64) {
			delete(k.maps[at(m, s)], string(read(m, s[3], s[4])))
		}},
		"state_map_entries": {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, func(k *keyedState, m api.Module, s []uint64) {
			mp := k.maps[at(m, s)]
			var parts [][]byte
			for _, uk := range slices.Sorted(maps.Keys(mp)) {
				parts = append(parts, []byte(uk), mp[uk])
			}
			s[0] = answer(m, frames(parts...), len(mp) > 0, s[3], s[4])
		}},
		"timer_register": {[]api.ValueType{i32, i32, i32, i64}, nil, func(k *keyedState, m api.Module, s []uint64) {
			k.timers[timer(m, s)] = true
		}},
		"timer_delete": {[]api.ValueType{i32, i32, i32, i64}, nil, func(k *keyedState, m api.Module, s []uint64) {
			delete(k.timers, timer(m, s))
		}},
		"current_watermark": {nil, []api.ValueType{i64}, func(k *keyedState, m api.Module, s []uint64) { s[0] = uint64(k.wm) }},
		"processing_time":   {nil, []api.ValueType{i64}, func(k *keyedState, m api.Module, s []uint64) { s[0] = uint64(k.now) }},
	}
	for name, f := range funcs {
		fn := f.fn
		b = b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
			fn(&hostOf(ctx).keyed, m, s)
		}), f.params, f.results).Export(name)
	}
	return b
}

// fire hands the guest the timers of kind due at upTo, in (time, key)
// order, in one batch.
func (in *instance) fire(kind int32, upTo int64) result {
	k := &in.host.keyed
	var due []timerAddr
	for t := range k.timers {
		if t.kind == kind && t.ts <= upTo {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b timerAddr) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), strings.Compare(a.key, b.key))
	})
	var recs []abi.Record
	for _, t := range due {
		delete(k.timers, t)
		recs = append(recs, abi.Record{Key: []byte(t.key), Value: []byte{byte(kind)}, Timestamp: t.ts})
	}
	b := abi.AppendBatch(nil, recs)
	ptr := in.write(b)
	return in.result(in.call("eddy_on_timer", uint64(ptr), uint64(len(b))))
}

func TestKeyedGuests(t *testing.T) {
	big := strings.Repeat("B", 1000) // more than the SDKs' first read buffer
	for _, lang := range build(t) {
		t.Run(lang, func(t *testing.T) {
			in := start(t, lang+keyedSuffix)
			if v := in.call(abi.ExportABIVersion); v != 2 {
				t.Fatalf("ABI version %d, want 2", v)
			}
			if r := in.open(`{}`); r != ok {
				t.Fatal(r)
			}
			if lang == "go" && in.host.keyed.names[0] != "early" {
				t.Errorf("the state declared by init is not declared first: %q", in.host.keyed.names)
			}
			in.host.keyed.now = 1767225600000
			var recs []abi.Record
			add := func(key string, cmds ...string) {
				for _, c := range cmds {
					recs = append(recs, abi.Record{Key: []byte(key), Value: []byte(c)})
				}
			}
			add("a", "vget", "vput 1", "vget")
			add("b", "vget", "vput 2")
			add("a", "ladd x", "ladd "+big, "ladd z", "lget", "lclear", "lget")
			add("a", "mput k2=v2", "mput k1=v1", "mput k3=", "mget k1", "mget nope", "mentries", "mdel k2", "mentries")
			add("a", "time", "key", "timer e 100", "timer e 50", "timer p 70", "timer e 200", "untimer e 200")
			add("b", "timer e 60", "key", "vget")
			if r := in.process(recs...); r != ok {
				t.Fatal(r)
			}
			if r := in.fire(0, 150); r != ok {
				t.Fatal(r)
			}
			if r := in.fire(1, 80); r != ok {
				t.Fatal(r)
			}
			want := []string{
				"a -", "a 1", "b -",
				"a [x," + big + ",z]", "a []",
				"a v1", "a -", "a {k1=v1,k2=v2,k3=}", "a {k1=v1,k3=}",
				"a -9223372036854775808 1767225600000", "a key a early a",
				"b key b early b", "b 2",
				"a fired e a 50 1", "b fired e b 60 2", "a fired e a 100 1",
				"a fired p a 70 1",
			}
			var got []string
			for _, r := range in.host.records {
				got = append(got, string(r.Key)+" "+string(r.Value))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("output\n %q\nwant\n %q", got, want)
			}
			if len(in.host.keyed.timers) != 0 {
				t.Errorf("timers left: %v", in.host.keyed.timers)
			}
			r := in.process(abi.Record{Key: []byte("a"), Value: []byte("declare")})
			wantMsg := map[string]string{
				"go": `panic: keyed: state "late" declared after Open: declare state in Open or in an init function`,
				"c":  "eddy: value state late declared outside eddy_op_open",
			}[lang]
			if r.status != abi.StatusError || r.message != wantMsg {
				t.Errorf("declaring in process: %+v, want %q", r, wantMsg)
			}
		})
	}
}
