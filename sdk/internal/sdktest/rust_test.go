package sdktest

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	eddyhost "github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// rustc is Debian's rustc, the one with the wasm32-wasi standard library
// (a rustup toolchain first on PATH may lack the target).
const rustc = "/usr/bin/rustc"

// buildRust builds testdata/rustguest.rs with sdk/rust, with the flags of
// udfs/Makefile, and returns the module.
func buildRust(t *testing.T) []byte { return buildRustGuest(t, "rustguest") }

// buildRustGuest builds testdata/<name>.rs with sdk/rust and the given
// extra rustc flags (--cfg ...).
func buildRustGuest(t *testing.T, name string, extra ...string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	if _, err := exec.LookPath(rustc); err != nil {
		t.Skip("Debian's rustc is not installed: the Rust SDK is not tested here")
	}
	dir := t.TempDir()
	flags := []string{"--edition", "2021", "--target", "wasm32-wasi", "-C", "opt-level=3", "-D", "warnings"}
	rlib := filepath.Join(dir, "libeddy.rlib")
	steps := [][]string{
		append(append([]string{}, flags...), "--crate-type", "rlib", "--crate-name", "eddy", "-o", rlib, "../../rust/src/lib.rs"),
		append(append(append([]string{}, flags...), extra...), "--crate-type", "cdylib", "--crate-name", name,
			"--extern", "eddy="+rlib, "-o", filepath.Join(dir, name+".wasm"), "testdata/"+name+".rs"),
	}
	for _, args := range steps {
		if msg, err := exec.Command(rustc, args...).CombinedOutput(); err != nil {
			t.Fatalf("rustc %s: %v\n%s", strings.Join(args, " "), err, msg)
		}
	}
	return mustRead(t, filepath.Join(dir, name+".wasm"))
}

// TestRustGuestThroughHost runs the Rust guest in the real host with keyed
// state: list, map and schema-versioned value state, the watermark,
// processing-time timers handed back through eddy_on_timer, close, an
// Err, and panics, which must fail the task with the panic's message on
// one line.
func TestRustGuestThroughHost(t *testing.T) {
	wasm := buildRust(t)
	ctx := context.Background()
	e, err := eddyhost.NewEngine(ctx, eddyhost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	m, err := e.Compile(ctx, "rustguest", wasm)
	if err != nil {
		t.Fatal(err)
	}
	if v := m.ABIVersion(); v != 4 {
		t.Fatalf("ABI version %d, want 4 (keyed_operator!(T, schema))", v)
	}
	const maxP = 128
	backend, err := state.NewMemory(state.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	newInstance := func(t *testing.T) *eddyhost.Instance {
		st, err := backend.OpenTask(state.Scope{Tenant: "t", Job: t.Name(), Operator: "op"}, maxP, state.Range{Start: 0, End: maxP})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		i, err := m.NewInstance(ctx, eddyhost.InstanceConfig{Name: "job/rust[0]", State: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { i.Close() })
		if err := i.Open([]byte(`{}`)); err != nil {
			t.Fatalf("open: %v", err)
		}
		return i
	}

	t.Run("state", func(t *testing.T) {
		i := newInstance(t)
		i.SetWatermark(42)
		var got []string
		emit := func(recs []abi.Record) {
			for _, r := range recs {
				got = append(got, string(r.Key)+"="+string(r.Value))
			}
		}
		recs := []abi.Record{
			{Key: []byte("a"), Value: []byte("x"), Timestamp: 1},
			{Key: []byte("a"), Value: []byte("y"), Timestamp: 2},
			{Key: []byte("b"), Value: []byte("x"), Timestamp: 3},
			{Key: []byte("a"), Value: []byte("x"), Timestamp: 4},
		}
		if err := i.Process(recs, emit); err != nil {
			t.Fatal(err)
		}
		// list length, map entries, schema of the previous value (-1:
		// none), watermark.
		want := []string{"a=1,1,-1,42", "a=2,2,1,42", "b=1,1,-1,42", "a=3,2,1,42"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("got %q, want %q", got, want)
		}
		i.SetWatermark(math.MinInt64)

		// The timers the guest set come back through eddy_on_timer with
		// their key, and see that key's state.
		got = nil
		timers := []abi.Record{
			{Key: []byte("a"), Value: []byte{abi.TimerProcessingTime}, Timestamp: 4},
			{Key: []byte("b"), Value: []byte{abi.TimerProcessingTime}, Timestamp: 3},
		}
		if err := i.OnTimers(timers, emit); err != nil {
			t.Fatal(err)
		}
		want = []string{"a=timer:ProcessingTime:4:x", "b=timer:ProcessingTime:3:x"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("timers: got %q, want %q", got, want)
		}
		got = nil
		if err := i.Finish(emit); err != nil {
			t.Fatal(err)
		}
		if want := "=closed:4"; len(got) != 1 || got[0] != want {
			t.Errorf("close: got %q, want %q", got, want)
		}
	})

	for _, tc := range []struct{ value, want string }{
		{"fail", `rustguest: refusing the record "fail"`},
		{"panic", "panic: rustguest: the record asked for a panic (at "},
		{"unwrap", "panic: called `Option::unwrap()` on a `None` value (at "},
		// Without the macros' fields flag the module declares 4: no parts.
		// (No fields either: a module that calls fields::declare imports
		// eddy.fields, and the host refuses to load it below version 6.)
		{"parts", "eddy: emit_parts needs ABI version 7, and the module declares 4: export it with the fields flag"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			i := newInstance(t)
			err := i.Process([]abi.Record{{Key: []byte("k"), Value: []byte(tc.value)}}, func([]abi.Record) {})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line containing %q", msg, tc.want)
			}
			if strings.Contains(msg, "/work/") || strings.Contains(msg, "/home/") {
				t.Errorf("error %q leaks a build path", msg)
			}
			t.Log(msg)
		})
	}
}
