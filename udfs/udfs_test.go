package udfs_test

// These tests run the built modules in build/ under wazero with a minimal
// host of their own (package host is the real one; this harness only needs
// to follow ABI.md; keyedhost_test.go has its keyed state and timers) and
// check that every module, Go, C or AssemblyScript, produces exactly what
// the native Go algorithm produces for the same input.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit/keyedhost"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
	"github.com/eddy-stream/eddy/udfs/project/projection"
	"github.com/eddy-stream/eddy/udfs/split/splitter"
)

// outputBufferSize is the SDKs' output buffer (eddy.OutputBufferSize,
// EDDY_OUTPUT_BUFFER_SIZE); only a record larger than it may come in a
// larger batch.
const outputBufferSize = 64 << 10

var env struct {
	runtime wazero.Runtime
	modules map[string]wazero.CompiledModule
}

func TestMain(m *testing.M) {
	ctx := context.Background()
	// The real host's default memory limit: 64 MiB.
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(1024))
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	i32 := api.ValueTypeI32
	b := r.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostEmit), []api.ValueType{i32, i32}, nil).Export(abi.ImportEmit).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{i32, i32, i32}, nil).Export(abi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostFail), []api.ValueType{i32, i32}, nil).Export(abi.ImportFail).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostFields), []api.ValueType{i32, i32}, nil).Export(abi.ImportFields)
	_, err := keyedhost.Export(b, func(ctx context.Context) *keyedhost.Host { return callsOf(ctx).keyed }).Instantiate(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env.runtime = r
	env.modules = map[string]wazero.CompiledModule{}
	for name := range moduleVersions {
		path := filepath.Join("build", name+".wasm")
		bin, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%v (run make -C udfs)\n", err)
			os.Exit(1)
		}
		cm, err := r.CompileModule(ctx, bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "compile %s: %v\n", path, err)
			os.Exit(1)
		}
		env.modules[name] = cm
	}
	code := m.Run()
	r.Close(ctx)
	os.Exit(code)
}

// moduleVersions are the built modules and the ABI version each must
// declare: the stateful ones 2, the two-input regular-join 5, the
// aggregate 3, the projection modules of all four languages 7 (they
// declare the fields they read; linking the SDKs' fields support, or the
// Rust macros' fields flag, declares 7, whose number paths and values in
// parts the Go, Rust and AssemblyScript ones use too), the others (the
// window function top-n too) 1.
var moduleVersions = map[string]uint64{
	"project-go": abi.PartsVersion, "project-c": abi.PartsVersion,
	"split-go": 1, "split-c": 1,
	"counter-go": 2, "counter-c": 2,
	"country-change-go": 2, "country-change-c": 2,
	"card-stats-go": 3, "card-stats-c": 3,
	"top-n-go": 1, "top-n-c": 1,
	"project-rust": abi.PartsVersion, "split-rust": 1, "counter-rust": 2, "country-change-rust": 2,
	"card-stats-rust": 3, "top-n-rust": 1, "regular-join-rust": abi.TwoInputVersion,
	"project-as": abi.PartsVersion, "split-as": 1, "counter-as": 2, "country-change-as": 2,
	"card-stats-as": 3, "top-n-as": 1,
	"regular-join-as": abi.TwoInputVersion,
}

// calls is what the host saw during the guest calls of one instance.
type calls struct {
	discard  bool         // count records only (benchmarks)
	count    int          // records emitted
	records  []abi.Record // deep copies: guest memory is reused
	batches  []emitted
	failures []string
	logs     []string
	keyed    *keyedhost.Host
	fired    []keyedhost.Timer // timers handed to eddy_on_timer, in order
	fields   *abi.Fields       // what the module declared with the fields import
}

type emitted struct {
	size, records int
}

type callsKey struct{}

func callsOf(ctx context.Context) *calls { return ctx.Value(callsKey{}).(*calls) }

// read returns guest memory [ptr, ptr+n) or panics, which wazero turns into
// a trap of the calling guest, as the real host does.
func read(m api.Module, ptr, n uint32, what string) []byte {
	b, ok := m.Memory().Read(ptr, n)
	if !ok {
		panic(fmt.Sprintf("%s: [%d, %d) is outside memory", what, ptr, uint64(ptr)+uint64(n)))
	}
	return b
}

func hostEmit(ctx context.Context, m api.Module, stack []uint64) {
	c := callsOf(ctx)
	buf := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), "emit")
	// Values may be part lists (version 7), gathered as the host does.
	mem := read(m, 0, m.Memory().Size(), "memory")
	recs, err := new(abi.Gather).Decode(buf, mem, nil, 1<<30)
	if err != nil {
		panic("emit: " + err.Error())
	}
	c.count += len(recs)
	if c.discard {
		return
	}
	for _, r := range recs {
		cp := abi.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			cp.Headers = append(cp.Headers, abi.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
		}
		c.records = append(c.records, cp)
	}
	c.batches = append(c.batches, emitted{size: len(buf), records: len(recs)})
}

func hostLog(ctx context.Context, m api.Module, stack []uint64) {
	c := callsOf(ctx)
	c.logs = append(c.logs, string(read(m, api.DecodeU32(stack[1]), api.DecodeU32(stack[2]), "log")))
}

func hostFail(ctx context.Context, m api.Module, stack []uint64) {
	c := callsOf(ctx)
	c.failures = append(c.failures, string(read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), "fail")))
}

// hostFields is the fields import (version 6) as the host implements it:
// the list is parsed by abi.ParseFieldList and the batches of
// eddy_process then carry the field table (guest.batch).
func hostFields(ctx context.Context, m api.Module, stack []uint64) {
	c := callsOf(ctx)
	if c.fields != nil {
		panic("eddy.fields called twice")
	}
	f, err := abi.ParseFieldList(read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), "fields"))
	if err != nil {
		panic("eddy.fields: " + err.Error())
	}
	c.fields = f
}

// batch encodes recs for eddy_process: with the field table when the
// module declared fields.
func (g *guest) batch(recs []abi.Record) []byte { return g.batchInto(nil, recs) }

// batchInto is batch reusing dst's memory; the field table (the host's
// extraction) is part of the work of every batch.
func (g *guest) batchInto(dst []byte, recs []abi.Record) []byte {
	if f := g.calls.fields; f != nil {
		dst = slices.Grow(dst[:0], f.EncodedSize(recs))[:f.EncodedSize(recs)]
		f.EncodeBatch(dst, recs)
		return dst
	}
	return abi.AppendBatch(dst[:0], recs)
}

// guest is one instance of a module, driven as the host drives a task.
type guest struct {
	t     testing.TB
	ctx   context.Context
	calls *calls
	mod   api.Module
	input uint32 // the eddy_alloc buffer
	cap   uint32 // and its size
	out   bytes.Buffer
}

func newGuest(t testing.TB, name string) *guest {
	t.Helper()
	g := &guest{t: t, calls: &calls{keyed: keyedhost.New()}}
	g.ctx = context.WithValue(context.Background(), callsKey{}, g.calls)
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithSysWalltime().WithSysNanotime().WithStdout(&g.out).WithStderr(&g.out)
	mod, err := env.runtime.InstantiateModule(g.ctx, env.modules[name], cfg)
	if err != nil {
		t.Fatalf("instantiate %s: %v", name, err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	g.mod = mod
	if f := mod.ExportedFunction(abi.ExportInitialize); f != nil {
		g.call(abi.ExportInitialize)
	}
	if v := g.call(abi.ExportABIVersion); len(v) != 1 || v[0] != moduleVersions[name] {
		t.Fatalf("%s: eddy_abi_version = %v, want %d", name, v, moduleVersions[name])
	}
	return g
}

func (g *guest) call(name string, params ...uint64) []uint64 {
	g.t.Helper()
	res, err := g.mod.ExportedFunction(name).Call(g.ctx, params...)
	if err != nil {
		g.t.Fatalf("%s: %v\nguest output: %s", name, err, g.out.String())
	}
	return res
}

// write puts b into the guest's input buffer, asking for a bigger one only
// when it is too small, as the ABI describes.
func (g *guest) write(b []byte) uint32 {
	g.t.Helper()
	if g.input == 0 || uint32(len(b)) > g.cap {
		ptr := uint32(g.call(abi.ExportAlloc, uint64(len(b)))[0])
		if ptr == 0 {
			g.t.Fatalf("eddy_alloc(%d) returned 0", len(b))
		}
		g.input, g.cap = ptr, uint32(len(b))
	}
	if !g.mod.Memory().Write(g.input, b) {
		g.t.Fatalf("eddy_alloc returned %d, but %d bytes do not fit there", g.input, len(b))
	}
	return g.input
}

// status turns a call's status into an error carrying the fail message.
func (g *guest) status(name string, res []uint64) error {
	if st := int32(res[0]); st != abi.StatusOK {
		msg := "(no message)"
		if n := len(g.calls.failures); n > 0 {
			msg = g.calls.failures[n-1]
		}
		return fmt.Errorf("%s: status %d: %s", name, st, msg)
	}
	return nil
}

func (g *guest) open(config []byte) error {
	g.t.Helper()
	ptr := g.write(config)
	defer g.calls.keyed.Open()()
	return g.status(abi.ExportOpen, g.call(abi.ExportOpen, uint64(ptr), uint64(len(config))))
}

func (g *guest) process(recs []abi.Record) error {
	g.t.Helper()
	batch := g.batch(recs)
	ptr := g.write(batch)
	defer g.calls.keyed.Batch(recs)()
	return g.status(abi.ExportProcess, g.call(abi.ExportProcess, uint64(ptr), uint64(len(batch))))
}

func (g *guest) close() error {
	g.t.Helper()
	return g.status(abi.ExportClose, g.call(abi.ExportClose))
}

// run opens the guest with config, processes recs in batches of the given
// sizes (the rest in one last batch) and closes it.
func (g *guest) run(config []byte, recs []abi.Record, sizes ...int) []abi.Record {
	g.t.Helper()
	if err := g.open(config); err != nil {
		g.t.Fatal(err)
	}
	for len(recs) > 0 {
		n := len(recs)
		if len(sizes) > 0 {
			n, sizes = min(sizes[0], n), sizes[1:]
		}
		if err := g.process(recs[:n]); err != nil {
			g.t.Fatal(err)
		}
		recs = recs[n:]
	}
	if err := g.close(); err != nil {
		g.t.Fatal(err)
	}
	for _, b := range g.calls.batches {
		if b.size > outputBufferSize && b.records != 1 {
			g.t.Errorf("an emitted batch of %d bytes holds %d records: only a single record may exceed the output buffer", b.size, b.records)
		}
	}
	return g.calls.records
}

func equalRecords(t *testing.T, inputs, got, want []abi.Record) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		same := bytes.Equal(g.Key, w.Key) && bytes.Equal(g.Value, w.Value) &&
			g.Timestamp == w.Timestamp && len(g.Headers) == len(w.Headers)
		for j := 0; same && j < len(w.Headers); j++ {
			same = g.Headers[j].Key == w.Headers[j].Key && bytes.Equal(g.Headers[j].Value, w.Headers[j].Value)
		}
		if !same {
			t.Fatalf("output %d differs:\n got  key %q value %.200q ts %d headers %v\n want key %q value %.200q ts %d headers %v",
				i, g.Key, g.Value, g.Timestamp, g.Headers, w.Key, w.Value, w.Timestamp, w.Headers)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d output records, want %d (from %d inputs)", len(got), len(want), len(inputs))
	}
}

// nativeProject is what the guests must produce.
func nativeProject(t *testing.T, config []byte, recs []abi.Record) []abi.Record {
	t.Helper()
	p, err := projection.Parse(config)
	if err != nil {
		t.Fatal(err)
	}
	var want []abi.Record
	for _, r := range recs {
		if out, keep := p.Apply(nil, r.Value); keep {
			want = append(want, abi.Record{Key: r.Key, Value: bytes.Clone(out), Timestamp: r.Timestamp, Headers: r.Headers})
		}
	}
	return want
}

func nativeSplit(t *testing.T, config []byte, recs []abi.Record) []abi.Record {
	t.Helper()
	s, err := splitter.Parse(config)
	if err != nil {
		t.Fatal(err)
	}
	var want []abi.Record
	for _, r := range recs {
		s.Split(r.Value, func(key, value []byte) {
			want = append(want, abi.Record{Key: bytes.Clone(key), Value: bytes.Clone(value), Timestamp: r.Timestamp})
		})
	}
	return want
}

var projectConfigs = []string{
	`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`,
	`{}`,
	`{"fields": []}`,
	`{"fields": ["c\u0061rd", "merchant", "tags", "missing"]}`,
	`{"where": {"field": "card", "op": "==", "value": "4111 \"x\""}}`,
	`{"fields": ["amount"], "where": {"field": "card", "op": "!=", "value": "café"}}`,
	`{"fields": ["text", "merchant"], "where": {"field": "merchant", "op": "exists"}}`,
	`{"fields": ["amount", "card"], "where": {"field": "amount", "op": "<=", "value": -1.5e1}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": "<", "value": 0}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": ">=", "value": 1e300}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": "==", "value": 150}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": "!=", "value": 0}}`,
	` { "where" : { "op" : "==" , "field" : "card", "value" : "\ud83d\ude00" } } `,
	`{"fields": ["amount"], "where": {"field": "amount", "op": "==", "value": 9007199254740992}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": ">", "value": 9007199254740992}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": ">=", "value": 1.7976931348623157e308}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": "<", "value": 2.2250738585072014e-308}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": "==", "value": 1.0000000000000002}}`,
	`{"fields": ["amount"], "where": {"field": "amount", "op": "==", "value": 1}}`,
}

var splitConfigs = []string{
	`{"field": "text", "lowercase": true}`,
	`{"field": "text"}`,
	`{"field": "card", "lowercase": false}`,
	`{}`,
	`{"lowercase": true}`,
}

var modules = []string{"go", "c", "rust", "as"}

func TestProject(t *testing.T) {
	recs := genRecords(rand.New(rand.NewPCG(1, 2)), 400)
	for ci, config := range projectConfigs {
		want := nativeProject(t, []byte(config), recs)
		t.Logf("config %d keeps %d of %d records", ci, len(want), len(recs))
		if len(want) == 0 {
			t.Errorf("config %d keeps no record: the data does not exercise it", ci)
		}
		for _, lang := range modules {
			t.Run(fmt.Sprintf("%s/config%d", lang, ci), func(t *testing.T) {
				g := newGuest(t, "project-"+lang)
				got := g.run([]byte(config), recs, 1, 3, 17, 64, 100)
				equalRecords(t, recs, got, want)
			})
		}
	}
}

func TestSplit(t *testing.T) {
	recs := genRecords(rand.New(rand.NewPCG(3, 4)), 400)
	for ci, config := range splitConfigs {
		want := nativeSplit(t, []byte(config), recs)
		t.Logf("config %d makes %d records of %d", ci, len(want), len(recs))
		for _, lang := range modules {
			t.Run(fmt.Sprintf("%s/config%d", lang, ci), func(t *testing.T) {
				g := newGuest(t, "split-"+lang)
				got := g.run([]byte(config), recs, 1, 3, 17, 64, 100)
				equalRecords(t, recs, got, want)
			})
		}
	}
}

// TestLargeOutput forces several flushes of the output buffer within one
// batch, and a record larger than the whole buffer between small ones.
func TestLargeOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := genRecords(rng, 3000)
	huge := `{"text": "` + strings.Repeat("Ab", 50<<10) + ` tail", "amount": 1000}`
	recs = append(recs[:1500:1500], append([]abi.Record{{Key: []byte("huge"), Value: []byte(huge), Timestamp: 9}}, recs[1500:]...)...)
	cases := []struct {
		udf, config string
		native      func(*testing.T, []byte, []abi.Record) []abi.Record
	}{
		{"project", `{}`, nativeProject},
		{"project", `{"fields": ["text", "amount"]}`, nativeProject},
		{"split", `{"field": "text", "lowercase": true}`, nativeSplit},
	}
	for _, tc := range cases {
		want := tc.native(t, []byte(tc.config), recs)
		for _, lang := range modules {
			t.Run(fmt.Sprintf("%s-%s/%s", tc.udf, lang, tc.config), func(t *testing.T) {
				g := newGuest(t, tc.udf+"-"+lang)
				got := g.run([]byte(tc.config), recs) // one batch
				equalRecords(t, recs, got, want)
				var big, full int
				for _, b := range g.calls.batches {
					if b.size > outputBufferSize {
						big++
					} else {
						full++
					}
				}
				t.Logf("%d records in %d emits of the output buffer and %d of a larger record", len(got), full, big)
				// The Go, Rust and AssemblyScript projections with fields
				// emit values in parts (version 7): the huge value is a few
				// parts in the buffer, gathered by the host, not a batch of
				// its own.
				wantBig := 1
				if tc.udf == "project" && lang != "c" && tc.config != `{}` {
					wantBig = 0
				}
				if full < 3 || big != wantBig {
					t.Fatalf("%d emits of the output buffer and %d of a larger record; want at least 3 and exactly %d", full, big, wantBig)
				}
			})
		}
	}
}

// TestFailures checks that configuration errors reach the host as the same
// one-line message from both languages, and that the SDKs refuse bad input.
func TestFailures(t *testing.T) {
	configs := map[string][]string{
		"project": {
			`nope`, `[]`, `{"fields": "card"}`, `{"fields": ["a", 1]}`, `{"fields": ["a", "a"]}`,
			`{"bogus": 1}`, `{"fields": [], "fields": []}`, `{"where": []}`, `{"where": {"field": 1}}`,
			`{"where": {"field": "a", "op": "~"}}`, `{"where": {"field": "a", "op": "<", "value": "x"}}`,
			`{"where": {"field": "a", "op": "exists", "value": 1}}`, `{"where": {"field": "a", "op": "=="}}`,
			`{"where": {"field": "a", "op": "==", "value": null}}`, `{"fields": [}`,
		},
		"split": {`nope`, `{"field": 1}`, `{"lowercase": "yes"}`, `{"x": 1}`, `{"field": "a", "field": "b"}`},
	}
	for udf, list := range configs {
		for _, config := range list {
			var want error
			if udf == "project" {
				_, want = projection.Parse([]byte(config))
			} else {
				_, want = splitter.Parse([]byte(config))
			}
			if want == nil {
				t.Fatalf("%s: native Parse accepts %s", udf, config)
			}
			for _, lang := range modules {
				g := newGuest(t, udf+"-"+lang)
				err := g.open([]byte(config))
				if err == nil || !strings.HasSuffix(err.Error(), ": "+want.Error()) {
					t.Errorf("%s-%s: open(%s) = %v, want the message %q", udf, lang, config, err, want)
				}
			}
		}
	}
	for _, lang := range modules {
		t.Run(lang, func(t *testing.T) {
			g := newGuest(t, "split-"+lang)
			if err := g.open([]byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			bad := abi.AppendBatch(nil, []abi.Record{{Value: []byte("x")}})
			bad[0] ^= 0xff
			ptr := g.write(bad)
			err := g.status(abi.ExportProcess, g.call(abi.ExportProcess, uint64(ptr), uint64(len(bad))))
			if err == nil || !strings.Contains(err.Error(), "malformed") {
				t.Errorf("bad magic: %v", err)
			}
			// A value range past the end of the batch.
			bad = abi.AppendBatch(nil, []abi.Record{{Value: []byte("x")}})
			bad[abi.HeaderSize+20] = 2
			ptr = g.write(bad)
			err = g.status(abi.ExportProcess, g.call(abi.ExportProcess, uint64(ptr), uint64(len(bad))))
			if err == nil || !strings.Contains(err.Error(), "malformed") {
				t.Errorf("bad value range: %v", err)
			}
			// A batch that is not where eddy_alloc said.
			err = g.status(abi.ExportProcess, g.call(abi.ExportProcess, 8, 64))
			if err == nil || !strings.Contains(err.Error(), "not inside the buffer") {
				t.Errorf("batch outside the input buffer: %v", err)
			}
			if len(g.calls.records) != 0 {
				t.Errorf("failed calls emitted %d records", len(g.calls.records))
			}
		})
	}
}

// v2Used are the version 2 imports each stateful module must import:
// exactly those it calls, since both linkers drop the others.
var v2Used = map[string][]string{
	"counter":        {abi.ImportProcessingTime, abi.ImportStateClear, abi.ImportStateDeclare, abi.ImportStateGet, abi.ImportStatePut, abi.ImportTimerDelete, abi.ImportTimerRegister},
	"country-change": {abi.ImportStateClear, abi.ImportStateDeclare, abi.ImportStateGet, abi.ImportStatePut, abi.ImportTimerDelete, abi.ImportTimerRegister},
	"regular-join":   {abi.ImportStateAppend, abi.ImportStateClear, abi.ImportStateDeclare, abi.ImportStateList, abi.ImportTimerRegister},
}

// TestInterface checks the built modules against the ABI's lists of exports
// and imports, as the real host does before running a module, and checks
// that a module imports version 2 functions exactly when it declares
// version 2.
func TestInterface(t *testing.T) {
	for name, cm := range env.modules {
		exports := cm.ExportedFunctions()
		for fn, sig := range abi.RequiredExports {
			def, ok := exports[fn]
			if !ok {
				t.Errorf("%s: missing export %s", name, fn)
				continue
			}
			checkSignature(t, name+" export "+fn, def, sig)
		}
		if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
			t.Errorf("%s: missing memory export", name)
		}
		var v2 []string
		for _, def := range cm.ImportedFunctions() {
			mod, fn, _ := def.Import()
			switch mod {
			case abi.WASIModule:
			case abi.ImportModule:
				sig, ok := abi.HostImports[fn]
				if !ok {
					t.Errorf("%s: imports unknown host function %s", name, fn)
					continue
				}
				if abi.ImportVersion(fn) == 2 {
					v2 = append(v2, fn)
				}
				checkSignature(t, name+" import "+fn, def, sig)
			default:
				t.Errorf("%s: imports %s.%s", name, mod, fn)
			}
		}
		slices.Sort(v2)
		udf := name[:strings.LastIndex(name, "-")]
		if want := v2Used[udf]; !slices.Equal(v2, want) {
			t.Errorf("%s: version 2 imports %v, want %v", name, v2, want)
		}
		// An aggregate module exports all the aggregate functions, and
		// only a module that declares version 3 exports any.
		for fn, sig := range abi.AggregateExports {
			def, ok := exports[fn]
			if ok != (moduleVersions[name] == abi.AggregateVersion) {
				t.Errorf("%s (version %d): exports %s: %v", name, moduleVersions[name], fn, ok)
			}
			if ok {
				checkSignature(t, name+" export "+fn, def, sig)
			}
		}
		def, exported := exports[abi.ExportOnTimer]
		if slices.Contains(v2, abi.ImportTimerRegister) && !exported {
			t.Errorf("%s: imports %s but does not export %s", name, abi.ImportTimerRegister, abi.ExportOnTimer)
		}
		if exported {
			checkSignature(t, name+" export "+abi.ExportOnTimer, def, abi.OptionalExports[abi.ExportOnTimer])
		}
	}
}

func checkSignature(t *testing.T, what string, def api.FunctionDefinition, sig abi.Signature) {
	t.Helper()
	same := func(got []api.ValueType, want []abi.ValType) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != api.ValueType(want[i]) {
				return false
			}
		}
		return true
	}
	if !same(def.ParamTypes(), sig.Params) || !same(def.ResultTypes(), sig.Results) {
		t.Errorf("%s: signature %v -> %v, want %v -> %v", what, def.ParamTypes(), def.ResultTypes(), sig.Params, sig.Results)
	}
}

// BenchmarkUDFs runs each operator natively and as its Go, C and AssemblyScript modules over
// the same batch of typical records, reporting ns per input record. The
// guest figures include the whole boundary: writing the batch into guest
// memory, the calls, and the host decoding the emitted batches.
func BenchmarkUDFs(b *testing.B) {
	var recs []abi.Record
	for i := range 256 {
		v := fmt.Sprintf(`{"card": "4111 1111 1111 %04d", "amount": %d.%02d, "currency": "EUR", `+
			`"merchant": {"name": "Shop %d", "geo": [52.52, 13.40]}, "text": "The quick brown fox %d jumps over the lazy dog"}`,
			i, i%300, i%100, i%17, i)
		recs = append(recs, abi.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(v), Timestamp: int64(i)})
	}
	cases := []struct {
		udf, config string
		native      func(config []byte) func(abi.Record)
	}{
		{"project", `{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`,
			func(config []byte) func(abi.Record) {
				p, _ := projection.Parse(config)
				var dst []byte
				return func(r abi.Record) { dst, _ = p.Apply(dst[:0], r.Value) }
			}},
		{"split", `{"field": "text", "lowercase": true}`,
			func(config []byte) func(abi.Record) {
				s, _ := splitter.Parse(config)
				return func(r abi.Record) { s.Split(r.Value, func(key, value []byte) {}) }
			}},
		// The counter's state lives in a map natively, as in the test host
		// (keyedhost), so both sides pay for a state read and write.
		{"counter", `{}`,
			func(config []byte) func(abi.Record) {
				counts := map[string][]byte{}
				var dst []byte
				return func(r abi.Record) {
					b, ok := counts[string(r.Key)]
					n, _ := counting.Decode(b, ok)
					counts[string(r.Key)] = counting.Append(b[:0], n+1)
					dst = counting.AppendJSON(dst[:0], r.Key, n+1)
				}
			}},
	}
	for _, tc := range cases {
		b.Run(tc.udf+"/native", func(b *testing.B) {
			apply := tc.native([]byte(tc.config))
			for b.Loop() {
				for _, r := range recs {
					apply(r)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
		})
		for _, lang := range modules {
			b.Run(tc.udf+"/"+lang, func(b *testing.B) {
				g := newGuest(b, tc.udf+"-"+lang)
				g.calls.discard = true
				if err := g.open([]byte(tc.config)); err != nil {
					b.Fatal(err)
				}
				process := g.mod.ExportedFunction(abi.ExportProcess)
				var batch []byte
				for b.Loop() {
					batch = g.batchInto(batch, recs)
					ptr := g.write(batch)
					done := g.calls.keyed.Batch(recs) // the counter's state calls need the batch's keys
					res, err := process.Call(g.ctx, uint64(ptr), uint64(len(batch)))
					done()
					if err != nil || res[0] != abi.StatusOK {
						b.Fatal(err, g.calls.failures)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
			})
		}
	}
}

// FuzzGuests feeds arbitrary values to every module and checks it against
// the native algorithm: the Go and C versions must agree on untrusted bytes
// too, not only on the generated records. The seeds run with plain go test.
func FuzzGuests(f *testing.F) {
	for _, r := range genRecords(rand.New(rand.NewPCG(7, 8)), 40) {
		f.Add(uint8(len(r.Value)), r.Value)
	}
	type target struct {
		name, config string
		native       func(*testing.T, []byte, []abi.Record) []abi.Record
		guest        *guest
	}
	var targets []*target
	for _, c := range projectConfigs {
		for _, lang := range modules {
			targets = append(targets, &target{name: "project-" + lang, config: c, native: nativeProject})
		}
	}
	for _, c := range splitConfigs {
		for _, lang := range modules {
			targets = append(targets, &target{name: "split-" + lang, config: c, native: nativeSplit})
		}
	}
	for _, tg := range targets {
		// One long-lived instance per target: instantiating a Go guest per
		// input would dominate the fuzzing time.
		tg.guest = newGuest(f, tg.name)
		if err := tg.guest.open([]byte(tg.config)); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, value []byte) {
		tg := targets[int(which)%len(targets)]
		g := tg.guest
		g.t = t
		g.calls.records, g.calls.batches = nil, nil
		recs := []abi.Record{{Key: []byte("k"), Value: value, Timestamp: 1}}
		want := tg.native(t, []byte(tg.config), recs)
		if err := g.process(recs); err != nil {
			t.Fatalf("%s %s: %v", tg.name, tg.config, err)
		}
		equalRecords(t, recs, g.calls.records, want)
	})
}
