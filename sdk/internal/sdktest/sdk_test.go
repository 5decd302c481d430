package sdktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit/keyedhost"
)

// build builds both test guests and compiles them into the shared runtime,
// returning the languages built.
func build(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	mods := buildWasm(t)
	r, err := newRuntime()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	runtime.r, runtime.modules = r, map[string]wazero.CompiledModule{}
	var langs []string
	for name, wasm := range mods {
		cm, err := r.CompileModule(context.Background(), wasm)
		if err != nil {
			t.Fatalf("compile the %s guest: %v", name, err)
		}
		runtime.modules[name] = cm
		// The variants (go-keyed, c-agg, …) have tests of their own.
		if !strings.Contains(name, "-") {
			langs = append(langs, name)
		}
	}
	return langs
}

func buildWasm(t *testing.T) map[string][]byte {
	dir := t.TempDir()
	mods := map[string][]byte{}
	for name, pkg := range map[string]string{"go": "./goguest", "go" + keyedSuffix: "./keyedguest",
		"go" + aggSuffix: "./aggguest", "go" + windowSuffix: "./windowguest"} {
		out := filepath.Join(dir, name+".wasm")
		// The same flags as udfs/Makefile, so that stripping is covered too.
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the Go guest %s: %v\n%s", pkg, err, msg)
		}
		mods[name] = mustRead(t, out)
	}
	if _, err := exec.LookPath("clang"); err != nil {
		t.Log("clang is not installed: the C SDK is not tested here")
		return mods
	}
	for name, srcs := range map[string][]string{
		"c":                {"testdata/cguest.c", "../../c/eddy.c"},
		"c" + keyedSuffix:  {"testdata/ckeyed.c", "../../c/eddy.c", "../../c/eddy_keyed.c"},
		"c" + aggSuffix:    {"testdata/cagg.c", "../../c/eddy.c", "../../c/eddy_aggregate.c", "../../c/eddy_json.c"},
		"c" + windowSuffix: {"testdata/cwindow.c", "../../c/eddy.c", "../../c/eddy_window.c"},
		"c" + walkSuffix:   {"testdata/cjsonwalk.c", "../../c/eddy.c", "../../c/eddy_json.c"},
	} {
		out := filepath.Join(dir, name+".wasm")
		args := append([]string{"--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-flto", "-mbulk-memory", "-msimd128", "-std=c99",
			"-Wall", "-Wextra", "-Werror", "-I", "../../c", "-o", out}, srcs...)
		if msg, err := exec.Command("clang", args...).CombinedOutput(); err != nil {
			t.Fatalf("build the C guest %s: %v\n%s", srcs[0], err, msg)
		}
		mods[name] = mustRead(t, out)
	}
	return mods
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// host is a minimal Eddy host for one instance: it records what the guest
// hands over.
type host struct {
	records  []abi.Record
	sizes    []int
	failures []string
	logs     []string
	keyed    *keyedhost.Host
}

func read(m api.Module, ptr, n uint64) []byte {
	b, ok := m.Memory().Read(api.DecodeU32(ptr), api.DecodeU32(n))
	if !ok {
		panic(fmt.Sprintf("[%d, +%d) is outside memory", ptr, n))
	}
	return b
}

type instance struct {
	t    *testing.T
	ctx  context.Context
	host *host
	mod  api.Module
	ptr  uint32
	cap  uint32
}

type hostKey struct{}

func hostOf(ctx context.Context) *host { return ctx.Value(hostKey{}).(*host) }

// runtime is shared by every instance so that each module compiles once
// (~1.5 s for a Go guest); the host functions find the calling instance's
// host in the call's context.
var runtime struct {
	r       wazero.Runtime
	modules map[string]wazero.CompiledModule
}

func newRuntime() (wazero.Runtime, error) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(1024))
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	i32 := api.ValueTypeI32
	b := r.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
		h := hostOf(ctx)
		buf := read(m, s[0], s[1])
		recs, err := abi.DecodeBatch(buf, nil)
		if err != nil {
			panic(err)
		}
		for _, r := range recs {
			cp := abi.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp}
			for _, hd := range r.Headers { // they alias guest memory too
				cp.Headers = append(cp.Headers, abi.Header{Key: hd.Key, Value: bytes.Clone(hd.Value)})
			}
			h.records = append(h.records, cp)
		}
		h.sizes = append(h.sizes, len(buf))
	}), []api.ValueType{i32, i32}, nil).Export(abi.ImportEmit).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
		h := hostOf(ctx)
		h.logs = append(h.logs, string(read(m, s[1], s[2])))
	}), []api.ValueType{i32, i32, i32}, nil).Export(abi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
		h := hostOf(ctx)
		h.failures = append(h.failures, string(read(m, s[0], s[1])))
	}), []api.ValueType{i32, i32}, nil).Export(abi.ImportFail)
	_, err := keyedhost.Export(b, func(ctx context.Context) *keyedhost.Host { return hostOf(ctx).keyed }).Instantiate(ctx)
	return r, err
}

// start instantiates the guest built for lang.
func start(t *testing.T, lang string) *instance {
	t.Helper()
	h := &host{keyed: keyedhost.New()}
	ctx := context.WithValue(context.Background(), hostKey{}, h)
	mod, err := runtime.r.InstantiateModule(ctx, runtime.modules[lang], wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	in := &instance{t: t, ctx: ctx, host: h, mod: mod}
	if mod.ExportedFunction(abi.ExportInitialize) != nil {
		in.call(abi.ExportInitialize)
	}
	return in
}

func (in *instance) call(name string, params ...uint64) uint64 {
	in.t.Helper()
	res, err := in.mod.ExportedFunction(name).Call(in.ctx, params...)
	if err != nil {
		in.t.Fatalf("%s: %v", name, err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

func (in *instance) write(b []byte) uint32 {
	in.t.Helper()
	if in.ptr == 0 || uint32(len(b)) > in.cap {
		in.ptr, in.cap = uint32(in.call(abi.ExportAlloc, uint64(len(b)))), uint32(len(b))
	}
	if in.ptr == 0 || !in.mod.Memory().Write(in.ptr, b) {
		in.t.Fatalf("cannot write %d bytes at %d", len(b), in.ptr)
	}
	return in.ptr
}

// result is a call's status and the fail message it set, if any.
type result struct {
	status  int32
	message string
}

func (in *instance) result(status uint64) result {
	r := result{status: int32(status)}
	if n := len(in.host.failures); n > 0 {
		r.message = in.host.failures[n-1]
		in.host.failures = nil
	}
	return r
}

func (in *instance) open(config string) result {
	ptr := in.write([]byte(config))
	defer in.host.keyed.Open()()
	return in.result(in.call(abi.ExportOpen, uint64(ptr), uint64(len(config))))
}

func (in *instance) process(recs ...abi.Record) result {
	b := abi.AppendBatch(nil, recs)
	ptr := in.write(b)
	defer in.host.keyed.Batch(recs)()
	return in.result(in.call(abi.ExportProcess, uint64(ptr), uint64(len(b))))
}

func (in *instance) close() result { return in.result(in.call(abi.ExportClose)) }

var ok = result{}

func TestGuests(t *testing.T) {
	for _, lang := range build(t) {
		t.Run(lang, func(t *testing.T) {
			t.Run("echo", func(t *testing.T) {
				in := start(t, lang)
				// Not abi.Version: that is the newest version the host
				// knows; a module without keyed state must stay at 1.
				if v := in.call(abi.ExportABIVersion); v != 1 {
					t.Fatalf("ABI version %d", v)
				}
				if r := in.open(`{"x": 1}`); r != ok {
					t.Fatal(r)
				}
				if len(in.host.logs) != 1 || in.host.logs[0] != `opened with {"x": 1}` {
					t.Errorf("logs %q", in.host.logs)
				}
				hs := []abi.Header{{Key: "trace", Value: []byte("abc")}, {Key: "e"}}
				if r := in.process(abi.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 5, Headers: hs}, abi.Record{Timestamp: abi.NoTimestamp}); r != ok {
					t.Fatal(r)
				}
				if r := in.close(); r != ok {
					t.Fatal(r)
				}
				got := in.host.records
				if len(got) != 3 || string(got[0].Key) != "k" || string(got[0].Value) != "v" || got[0].Timestamp != 5 ||
					len(got[0].Headers) != 2 || got[0].Headers[0].Key != "trace" || string(got[0].Headers[0].Value) != "abc" ||
					got[1].Timestamp != abi.NoTimestamp || len(got[1].Key) != 0 || string(got[2].Value) != "closed" {
					t.Fatalf("records %+v", got)
				}
			})
			t.Run("many emits", func(t *testing.T) {
				in := start(t, lang)
				in.open(`{}`)
				if r := in.process(abi.Record{Key: []byte("key"), Value: []byte("emit 20000")}); r != ok {
					t.Fatal(r)
				}
				if len(in.host.records) != 20000 || string(in.host.records[19999].Value) != "19999" || len(in.host.sizes) < 5 {
					t.Fatalf("%d records in %d emits", len(in.host.records), len(in.host.sizes))
				}
			})
			t.Run("alloc", func(t *testing.T) {
				in := start(t, lang)
				a := in.call(abi.ExportAlloc, 0)
				b := in.call(abi.ExportAlloc, 10)
				c := in.call(abi.ExportAlloc, 1<<20)
				if a == 0 || b == 0 || c == 0 {
					t.Fatalf("eddy_alloc returned %d, %d, %d", a, b, c)
				}
				if huge := in.call(abi.ExportAlloc, 1<<31); huge != 0 {
					t.Errorf("eddy_alloc(2 GiB) = %d, want 0", huge)
				}
			})
			failures := []struct {
				name string
				run  func(in *instance) result
				want string
			}{
				{"process error", func(in *instance) result { return in.process(abi.Record{Value: []byte("error")}) }, "bad record"},
				{"open error", func(in *instance) result { return in.open(`"error"`) }, "open refused"},
				{"emit in open", func(in *instance) result { return in.open(`"emit"`) }, map[string]string{
					"go": "panic: eddy: Emit called outside Process and Close",
					"c":  "eddy: eddy_emit called outside eddy_op_process and eddy_op_close"}[lang]},
				{"panic", func(in *instance) result { return in.process(abi.Record{Value: []byte("panic")}) }, "panic: boom"},
				{"silent", func(in *instance) result { return in.process(abi.Record{Value: []byte("silent")}) },
					"operator returned 7 without calling eddy_fail"},
				{"truncated batch", func(in *instance) result {
					ptr := in.write([]byte("EDB1\x01\x00\x00\x00"))
					return in.result(in.call(abi.ExportProcess, uint64(ptr), 8))
				}, map[string]string{
					"go": "eddy: input batch: abi: malformed batch: 1 records do not fit in 8 bytes",
					"c":  "eddy: input batch: malformed: 1 records do not fit in 8 bytes"}[lang]},
				{"outside the input buffer", func(in *instance) result {
					in.write([]byte("{}"))
					return in.result(in.call(abi.ExportProcess, uint64(in.ptr)+1<<20, 8))
				}, "not inside the buffer returned by eddy_alloc"},
			}
			for _, tc := range failures {
				t.Run(tc.name, func(t *testing.T) {
					// Go has no status without an error; C has no panics.
					if lang == "go" && tc.name == "silent" || lang == "c" && tc.name == "panic" {
						t.Skip("not applicable to " + lang)
					}
					in := start(t, lang)
					if !strings.Contains(tc.name, "open") {
						if r := in.open(`{}`); r != ok {
							t.Fatal(r)
						}
					}
					r := tc.run(in)
					if r.status != abi.StatusError || !strings.Contains(r.message, tc.want) {
						t.Fatalf("got %+v, want status 1 with %q", r, tc.want)
					}
					if len(in.host.records) != 0 {
						t.Fatalf("a failed call emitted %d records", len(in.host.records))
					}
					if tc.name == "panic" {
						// The stack goes to the log; with -s -w it still names
						// functions, because Go keeps its pclntab.
						if len(in.host.logs) == 0 || !strings.Contains(in.host.logs[len(in.host.logs)-1], "main.guest.Process") {
							t.Fatalf("no stack trace in the log: %q", in.host.logs)
						}
					}
				})
			}
		})
	}
}
