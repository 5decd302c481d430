package host

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// newTestEngine starts an engine whose logs go to the test's handler (or
// nowhere) and closes it when the test ends.
func newTestEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e, err := NewEngine(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("Engine.Close: %v", err)
		}
	})
	return e
}

// loadFixture loads testdata/<name>.wasm (built by testdata/Makefile).
func loadFixture(t testing.TB, e *Engine, name string) *Module {
	t.Helper()
	m, err := e.Load(context.Background(), "testdata/"+name+".wasm")
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return m
}

func newTestInstance(t testing.TB, m *Module, name string) *Instance {
	t.Helper()
	i, err := m.NewInstance(context.Background(), InstanceConfig{Name: name})
	if err != nil {
		t.Fatalf("NewInstance %s: %v", name, err)
	}
	t.Cleanup(func() { _ = i.Close() })
	return i
}

// collector copies emitted records, as a real caller must: they alias guest
// memory only for the duration of the callback.
type collector struct{ recs []abi.Record }

func (c *collector) emit(recs []abi.Record) {
	for _, r := range recs {
		c.recs = append(c.recs, cloneRecord(r))
	}
}

func cloneRecord(r abi.Record) abi.Record {
	out := abi.Record{Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value)}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, abi.Header{Key: h.Key, Value: clone(h.Value)})
	}
	return out
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// checkEchoWorks proves the engine still runs a well-behaved module, e.g.
// after a hostile one failed on it.
func checkEchoWorks(t *testing.T, e *Engine) {
	t.Helper()
	i := newTestInstance(t, loadFixture(t, e, "echo"), "job/echo[0]")
	if err := i.Open(nil); err != nil {
		t.Fatalf("echo Open: %v", err)
	}
	var c collector
	in := []abi.Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1}}
	if err := i.Process(in, c.emit); err != nil {
		t.Fatalf("echo Process: %v", err)
	}
	if len(c.recs) != 1 || string(c.recs[0].Value) != "v" {
		t.Fatalf("echo emitted %+v, want the input record", c.recs)
	}
}

// recorder is a slog.Handler that keeps every record, for tests that check
// what the guest logged.
type recorder struct {
	mu    sync.Mutex
	attrs []slog.Attr
	recs  *[]slog.Record
}

func newRecorder() *recorder { return &recorder{recs: new([]slog.Record)} }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.recs = append(*r.recs, rec)
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{attrs: append(append([]slog.Attr(nil), r.attrs...), as...), recs: r.recs}
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// records returns the records whose attribute key equals value ("" matches all).
func (r *recorder) records(key, value string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range *r.recs {
		if key == "" {
			out = append(out, rec)
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key && a.Value.String() == value {
				out = append(out, rec)
				return false
			}
			return true
		})
	}
	return out
}

func attr(rec slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

func containsAll(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// wasmModule is a hand-assembled Wasm binary, for module shapes clang will
// not produce (no exported memory, imported memory, a start function).
type wasmModule struct {
	funcs        []wasmFunc
	exportMemory bool
	importMemory bool
	start        int    // 1 + index of the start function; 0 = none
	tables       []byte // content of the table section; nil = none
}

type wasmFunc struct {
	export          string // "" = not exported
	params, results []byte // value types: 0x7f i32
	locals          uint32 // of type i32
	body            []byte // instructions, without the final end
}

func (w wasmModule) bytes() []byte {
	vec := func(items ...[]byte) []byte {
		out := []byte{byte(len(items))}
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	section := func(id byte, content []byte) []byte {
		return append([]byte{id, byte(len(content))}, content...)
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	valTypes := func(b []byte) []byte { return append([]byte{byte(len(b))}, b...) }

	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	var types, funcIdx, code, exports [][]byte
	for i, f := range w.funcs {
		types = append(types, append(append([]byte{0x60}, valTypes(f.params)...), valTypes(f.results)...))
		funcIdx = append(funcIdx, []byte{byte(i)})
		locals := []byte{0}
		if f.locals > 0 {
			locals = append(append([]byte{1}, uleb(f.locals)...), 0x7f)
		}
		body := append(append(locals, f.body...), 0x0b)
		code = append(code, append([]byte{byte(len(body))}, body...))
		if f.export != "" {
			exports = append(exports, append(name(f.export), 0x00, byte(i)))
		}
	}
	out = append(out, section(1, vec(types...))...)
	if w.importMemory {
		out = append(out, section(2, vec(append(append(name("env"), name("memory")...), 0x02, 0x00, 0x01)))...)
	}
	out = append(out, section(3, vec(funcIdx...))...)
	if w.tables != nil {
		out = append(out, section(4, w.tables)...)
	}
	if !w.importMemory {
		out = append(out, section(5, vec([]byte{0x00, 0x01}))...)
	}
	if w.exportMemory {
		exports = append(exports, append(name("memory"), 0x02, 0x00))
	}
	out = append(out, section(7, vec(exports...))...)
	if w.start > 0 {
		out = append(out, section(8, []byte{byte(w.start - 1)})...)
	}
	out = append(out, section(10, vec(code...))...)
	return out
}

// uleb is v in the shortest unsigned LEB128 encoding.
func uleb(v uint32) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// rawModule is a binary of the header and the sections, which are
// written out byte by byte: a module that lies about its sizes.
func rawModule(sections ...[]byte) []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

// rawSection is a section of the given content and its true size.
func rawSection(id byte, content ...[]byte) []byte {
	var c []byte
	for _, p := range content {
		c = append(c, p...)
	}
	return append(append([]byte{id}, uleb(uint32(len(c)))...), c...)
}

// withSection inserts a section (id and content) into the binary wasm
// where the binary format wants it: custom sections last, the others
// before the first section that must follow them.
func withSection(wasm []byte, section []byte) []byte {
	order := func(id byte) int {
		switch {
		case id == 0:
			return 100
		case id == 12: // data count: after element, before code
			return 95
		case id >= 10:
			return int(id)*10 + 1
		default:
			return int(id) * 10
		}
	}
	pos := 8
	for pos < len(wasm) {
		id := wasm[pos]
		size, n := uint32(0), 0
		for shift := 0; ; shift += 7 {
			c := wasm[pos+1+n]
			n++
			size |= uint32(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
		if order(id) > order(section[0]) {
			break
		}
		pos += 1 + n + int(size)
	}
	return append(append(append([]byte(nil), wasm[:pos]...), section...), wasm[pos:]...)
}

// Wasm instructions used by the hand-built modules.
var (
	opUnreachable  = []byte{0x00}
	opInfiniteLoop = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b} // loop br 0 end
)

// abiFuncs are the five required exports, doing nothing.
func abiFuncs() []wasmFunc {
	const i32 = 0x7f
	ret := func(v byte) []byte { return []byte{0x41, v} } // i32.const v
	return []wasmFunc{
		{export: abi.ExportABIVersion, results: []byte{i32}, body: ret(1)},
		{export: abi.ExportAlloc, params: []byte{i32}, results: []byte{i32}, body: ret(8)},
		{export: abi.ExportOpen, params: []byte{i32, i32}, results: []byte{i32}, body: ret(0)},
		{export: abi.ExportProcess, params: []byte{i32, i32}, results: []byte{i32}, body: ret(0)},
		{export: abi.ExportClose, results: []byte{i32}, body: ret(0)},
	}
}
