package sdktest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	eddyhost "github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// buildCFields builds testdata/cfields.c, one-input or (co) two-input.
func buildCFields(t *testing.T, co bool) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	if _, err := exec.LookPath("clang"); err != nil {
		t.Skip("clang is not installed: the C SDK is not tested here")
	}
	out := filepath.Join(t.TempDir(), "cfields.wasm")
	args := []string{"--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-flto", "-mbulk-memory", "-msimd128", "-std=c99",
		"-Wall", "-Wextra", "-Werror", "-I", "../../c", "-o", out,
		"testdata/cfields.c", "../../c/eddy.c", "../../c/eddy_json.c", "../../c/eddy_fields.c"}
	if co {
		args = append(args, "-DCO", "../../c/eddy_keyed.c", "../../c/eddy_keyed_co.c")
	}
	if msg, err := exec.Command("clang", args...).CombinedOutput(); err != nil {
		t.Fatalf("build testdata/cfields.c: %v\n%s", err, msg)
	}
	return mustRead(t, out)
}

// TestCFieldsThroughHost runs the C SDK's fields (eddy_fields.h) in the
// real host: linking eddy_fields.c declares version 7 (also over the
// two-input operator's 5), eddy_record_field reads the host's spans on
// both inputs, eddy_record_number the numbers it parsed, eddy_emit_parts
// hands over values the host gathers, and each misuse fails with its one
// line.
func TestCFieldsThroughHost(t *testing.T) {
	ctx := context.Background()
	e, err := eddyhost.NewEngine(ctx, eddyhost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	backend, err := state.NewMemory(state.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	in := []abi.Record{
		{Key: []byte("k"), Value: []byte(`{"a":1,"b":{"c":"x"}}`), Timestamp: 3},
		{Key: []byte("k"), Value: []byte(`{"b":[1],"\u0061":"s"}`)},
		{Key: []byte("k"), Value: []byte(`{"a":1`)},
		{Key: []byte("k"), Value: []byte(`{"a":2.5,"b":{"c":-1e3}}`)},
	}
	for _, co := range []bool{false, true} {
		name := map[bool]string{false: "one input", true: "two inputs"}[co]
		t.Run(name, func(t *testing.T) {
			m, err := e.Compile(ctx, "cfields", buildCFields(t, co))
			if err != nil {
				t.Fatal(err)
			}
			if m.ABIVersion() != abi.PartsVersion || m.IsTwoInput() != co {
				t.Fatalf("ABI version %d, two-input %v; want %d, %v", m.ABIVersion(), m.IsTwoInput(), abi.PartsVersion, co)
			}
			opened := 0
			open := func(t *testing.T, mode string) (*eddyhost.Instance, error) {
				opened++
				st, err := backend.OpenTask(state.Scope{Tenant: "t", Job: t.Name(), Operator: fmt.Sprint("op", opened)}, 128, state.Range{Start: 0, End: 128})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				i, err := m.NewInstance(ctx, eddyhost.InstanceConfig{Name: "job/cfields[0]", State: st})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { i.Close() })
				return i, i.Open([]byte(`{"mode":"` + mode + `"}`))
			}
			process := func(i *eddyhost.Instance, input int) ([]string, error) {
				var got []string
				emit := func(recs []abi.Record) {
					for _, r := range recs {
						got = append(got, string(r.Value))
					}
				}
				if co {
					return got, i.ProcessInput(input, in, emit)
				}
				return got, i.Process(in, emit)
			}
			for _, c := range []struct {
				mode string
				want []string
			}{
				{"ok", []string{`1|1|"x"|{"c":"x"}`, `1|"s"|-|[1]`, `0|-|-|-`, `1|2.5|-1e3|{"c":-1e3}`}},
				{"none", []string{`0|-`, `0|-`, `0|-`, `0|-`}},
				{"numbers", []string{`1|1|1|-`, `1|"s"|-|-`, `0|-|-|-`, `1|2.5|2.5|-1000`}},
				{"parts", []string{`1|1|"x"|{"c":"x"}`, `1|"s"|-|[1]`, `0|-|-|-`, `1|2.5|-1e3|{"c":-1e3}`}},
			} {
				i, err := open(t, c.mode)
				if err != nil {
					t.Fatalf("%s: Open: %v", c.mode, err)
				}
				for input := range 2 {
					got, err := process(i, input)
					if err != nil {
						t.Fatalf("%s: %v", c.mode, err)
					}
					if strings.Join(got, " ") != strings.Join(c.want, " ") {
						t.Errorf("%s, input %d: got %q, want %q", c.mode, input, got, c.want)
					}
				}
			}
			for _, c := range []struct{ mode, want string }{
				{"toomany", "eddy_field: more than 64 fields"},
				{"deep", "eddy_field: a path has 1 to 8 keys, not 9"},
				{"twice", "eddy.fields: path 1 ([\"a\"]) repeats path 0"},
			} {
				if _, err := open(t, c.mode); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: Open: %v; want one line with %q", c.mode, err, c.want)
				}
			}
			i, err := open(t, "outside")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := process(i, 0); err == nil || !strings.Contains(err.Error(), "eddy_field: fields are declared in eddy_op_open") {
				t.Errorf("eddy_field during eddy_op_process: %v", err)
			}
		})
	}
}
