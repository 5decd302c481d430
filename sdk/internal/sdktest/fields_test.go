package sdktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	eddyhost "github.com/eddy-stream/eddy/host"
)

// buildFieldsGuest builds fieldsguest/ with the flags of udfs/Makefile and
// the given build tags.
func buildFieldsGuest(t *testing.T, tags string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	out := filepath.Join(t.TempDir(), "fieldsguest.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-tags="+tags, "-o", out, "./fieldsguest")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build fieldsguest (tags %q): %v\n%s", tags, err, msg)
	}
	return mustRead(t, out)
}

// TestGoFieldsThroughHost runs the Go SDK's package fields in the real
// host, one-input and two-input (package co): the module declares version
// 7 whatever else it links, its Valid and Get give the rows the host
// extracted, in batches of any size, and a second Declare or one outside
// Open fails with the SDK's line without reaching the host.
func TestGoFieldsThroughHost(t *testing.T) {
	ctx := context.Background()
	e, err := eddyhost.NewEngine(ctx, eddyhost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	for _, variant := range []string{"one", "two"} {
		t.Run(variant, func(t *testing.T) {
			m, err := e.Compile(ctx, "fieldsguest-"+variant, buildFieldsGuest(t, variant))
			if err != nil {
				t.Fatal(err)
			}
			if v := m.ABIVersion(); v != abi.PartsVersion {
				t.Fatalf("ABI version %d, want %d", v, abi.PartsVersion)
			}
			newInstance := func(t *testing.T, config []byte) (*eddyhost.Instance, error) {
				i, err := m.NewInstance(ctx, eddyhost.InstanceConfig{Name: "job/fields[0]"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { i.Close() })
				return i, i.Open(config)
			}
			config := func(mode byte, paths ...[]string) []byte {
				return append([]byte{mode}, abi.EncodeFieldList(paths)...)
			}
			process := func(i *eddyhost.Instance, input int, recs []abi.Record, emit func([]abi.Record)) error {
				if variant == "two" {
					return i.ProcessInput(input, recs, emit)
				}
				return i.Process(recs, emit)
			}

			i, err := newInstance(t, config('F', []string{"a"}, []string{"b", "c"}, []string{"b"}))
			if err != nil {
				t.Fatal(err)
			}
			in := []struct{ value, want string }{
				{`{"a":1,"b":{"c":"x"}}`, `1|1|"x"|{"c":"x"}`},
				{`{"b":[1],"a":"\u0041"}`, `1|"\u0041"|-|[1]`},
				{` {"a" : {"c":2} , "a":3} `, `1|{"c":2}|-|-`},
				{`{"a":1,"b":{"c":2}`, `0|-|-|-`},
				{`[1,2]`, `0|-|-|-`},
				{`{}`, `1|-|-|-`},
			}
			for _, size := range []int{1, 4, len(in)} {
				var got []abi.Record
				emit := func(recs []abi.Record) {
					for _, r := range recs {
						got = append(got, abi.Record{Key: []byte(string(r.Key)), Value: []byte(string(r.Value))})
					}
				}
				for start := 0; start < len(in); start += size {
					var recs []abi.Record
					for _, r := range in[start:min(start+size, len(in))] {
						recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(r.value), Timestamp: 5})
					}
					if err := process(i, (start/size)%2, recs, emit); err != nil {
						t.Fatalf("batches of %d: %v", size, err)
					}
				}
				if len(got) != len(in) {
					t.Fatalf("batches of %d: %d records out, want %d", size, len(got), len(in))
				}
				for k, r := range got {
					if string(r.Value) != in[k].want {
						t.Errorf("batches of %d, record %d %s: got %q, want %q", size, k, in[k].value, r.Value, in[k].want)
					}
					if variant == "two" && ((k/size)%2 == 1) != strings.HasPrefix(string(r.Key), "r:") {
						t.Errorf("batches of %d, record %d: key %q: not from the input it was given to", size, k, r.Key)
					}
				}
			}

			// Version 7: number paths through Number, and the same echo
			// emitted as parts the host gathers.
			for _, c := range []struct {
				mode byte
				list []byte
				in   []string
				want []string
			}{
				{'M', abi.EncodeFields([][]string{{"a"}}, [][]string{{"a"}, {"b", "c"}}),
					[]string{`{"a":1.5,"b":{"c":-2e3}}`, `{"a":"1","b":{"c":1e999}}`, `{"b":[1]}`, `{"a":1`},
					[]string{`1|1.5|1.5|-2000`, `1|"1"|-|+Inf`, `1|-|-|-`, `0|-|-|-`}},
				{'E', abi.EncodeFieldList([][]string{{"a"}, {"b", "c"}, {"b"}}),
					[]string{`{"a":1,"b":{"c":"x"}}`, `{"b":[1],"a":"\u0041"}`, `[1,2]`, `{}`},
					[]string{`1|1|"x"|{"c":"x"}`, `1|"\u0041"|-|[1]`, `0|-|-|-`, `1|-|-|-`}},
				{'L', abi.EncodeFieldList([][]string{{"a"}, {"b", "c"}, {"b"}}),
					[]string{`{"a":1,"b":{"c":"x"}}`, `{"b":[1],"a":"\u0041"}`, `[1,2]`, `{}`},
					[]string{`1|1|"x"|{"c":"x"}`, `1|"\u0041"|-|[1]`, `0|-|-|-`, `1|-|-|-`}},
			} {
				i, err := newInstance(t, append([]byte{c.mode}, c.list...))
				if err != nil {
					t.Fatalf("mode %c: %v", c.mode, err)
				}
				var recs []abi.Record
				for _, v := range c.in {
					recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(v), Timestamp: 5})
				}
				var got []string
				emit := func(recs []abi.Record) {
					for _, r := range recs {
						if string(r.Key) != "k" && string(r.Key) != "r:k" || r.Timestamp != 5 {
							t.Errorf("mode %c: record (%q, %d) lost its key or timestamp", c.mode, r.Key, r.Timestamp)
						}
						got = append(got, string(r.Value))
					}
				}
				if err := process(i, 0, recs, emit); err != nil {
					t.Fatalf("mode %c: %v", c.mode, err)
				}
				if strings.Join(got, " ") != strings.Join(c.want, " ") {
					t.Errorf("mode %c: got %q, want %q", c.mode, got, c.want)
				}
			}

			if _, err := newInstance(t, config('2', []string{"a"})); err == nil || !strings.Contains(err.Error(), "fields: Declare called twice") {
				t.Errorf("Declare twice: %v", err)
			}
			i, err = newInstance(t, config('P', []string{"a"}))
			if err != nil {
				t.Fatal(err)
			}
			if err := process(i, 0, []abi.Record{{Value: []byte(`{}`)}}, nil); err == nil || !strings.Contains(err.Error(), "fields: Declare called outside Open") {
				t.Errorf("Declare in Process: %v", err)
			}
			if i.Fields() != nil {
				t.Errorf("a refused Declare reached the host: %q", i.Fields())
			}
			i, err = newInstance(t, []byte{'N'})
			if err != nil {
				t.Fatal(err)
			}
			var values []string
			emit := func(recs []abi.Record) {
				for _, r := range recs {
					values = append(values, string(r.Value))
				}
			}
			if err := process(i, 0, []abi.Record{{Value: []byte("x")}}, emit); err != nil || len(values) != 1 || values[0] != "x" {
				t.Errorf("without Declare: %v, values %q", err, values)
			}
		})
	}
}
