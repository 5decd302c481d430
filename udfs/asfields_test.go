//go:build !wasip1

package udfs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host"
)

// TestAssemblyScriptFields runs the AssemblyScript SDK's fields
// (fields.ts, ABI versions 6 and 7) in the real host, one-input
// (exports/fields) and two-input (exports/keyedcofields), from
// sdk/assemblyscript/testdata/fieldsguest.ts: both declare version 7, the
// rows the guest reads are the host's (validity, spans of nested paths,
// absent paths) in batches of any size, number paths give the host's
// numbers (NaN for what is not a number), values emitted in parts are
// what the host gathers, and each misuse fails with one line: the SDK's
// for a second declare, one outside open and a list past the limits, the
// host's for a list it refuses.
func TestAssemblyScriptFields(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"fields-as", "fields-co-as"} {
		t.Run(name, func(t *testing.T) {
			co := name == "fields-co-as"
			m := hostModule(t, name)
			if m.ABIVersion() != abi.PartsVersion || m.IsTwoInput() != co {
				t.Fatalf("ABI version %d, two-input %v; want %d, %v", m.ABIVersion(), m.IsTwoInput(), abi.PartsVersion, co)
			}
			open := func(t *testing.T, mode string) (*host.Instance, error) {
				i, err := m.NewInstance(ctx, host.InstanceConfig{Name: "job/fields[0]"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { i.Close() })
				return i, i.Open([]byte(`{"mode":"` + mode + `"}`))
			}
			process := func(i *host.Instance, input int, recs []abi.Record, emit func([]abi.Record)) error {
				if co {
					return i.ProcessInput(input, recs, emit)
				}
				return i.Process(recs, emit)
			}
			run := func(t *testing.T, mode string, in []string, sizes ...int) [][]string {
				i, err := open(t, mode)
				if err != nil {
					t.Fatalf("%s: Open: %v", mode, err)
				}
				var runs [][]string
				for _, size := range sizes {
					var got []string
					emit := func(recs []abi.Record) {
						for _, r := range recs {
							if r.Timestamp != 5 {
								t.Errorf("%s: record %q lost its timestamp: %d", mode, r.Value, r.Timestamp)
							}
							got = append(got, string(r.Key)+" "+string(r.Value))
						}
					}
					for start := 0; start < len(in); start += size {
						var recs []abi.Record
						for _, v := range in[start:min(start+size, len(in))] {
							recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(v), Timestamp: 5})
						}
						if err := process(i, (start/size)%2, recs, emit); err != nil {
							t.Fatalf("%s, batches of %d: %v", mode, size, err)
						}
					}
					if len(got) != len(in) {
						t.Fatalf("%s, batches of %d: %d records out, want %d", mode, size, len(got), len(in))
					}
					for k := range got {
						// The two-input module marks a record of input 1.
						want := "k "
						if co && (k/size)%2 == 1 {
							want = "r:k "
						}
						if !strings.HasPrefix(got[k], want) {
							t.Errorf("%s, batches of %d, record %d: %q is not from the input it was given to", mode, size, k, got[k])
						}
						got[k] = strings.TrimPrefix(strings.TrimPrefix(got[k], "r:"), "k ")
					}
					runs = append(runs, got)
				}
				return runs
			}
			in := []string{
				`{"a":1,"b":{"c":"x"}}`,
				`{"b":[1],"a":"\u0041"}`,
				` {"a" : {"c":2} , "a":3, "b":{"c":1,"c":2}} `,
				`{"a":1,"b":{"c":2}`,
				`[1,2]`,
				`{}`,
				`{"b":{"d":{"c":1}},"\u0061":null}`,
			}
			rows := []string{
				`1|1|"x"|{"c":"x"}`,
				`1|"\u0041"|-|[1]`,
				`1|{"c":2}|1|{"c":1,"c":2}`,
				`0|-|-|-`,
				`0|-|-|-`,
				`1|-|-|-`,
				`1|null|-|{"d":{"c":1}}`,
			}
			for _, mode := range []string{"ok", "spans", "parts"} {
				for k, got := range run(t, mode, in, 1, 3, len(in)) {
					if strings.Join(got, " ") != strings.Join(rows, " ") {
						t.Errorf("%s, run %d: got %q, want %q", mode, k, got, rows)
					}
				}
			}
			numbers := []struct{ in, want string }{
				{`{"a":1.5,"b":{"c":-2e3}}`, `1|1.5|1.5|-2000.0`},
				{`{"a":"1","b":{"c":1e999}}`, `1|"1"|NaN|Infinity`},
				{`{"b":[1]}`, `1|-|NaN|NaN`},
				{`{"a":1`, `0|-|NaN|NaN`},
				{`{"a":0.1,"b":{"c":true}}`, `1|0.1|0.1|NaN`},
			}
			var nin, nwant []string
			for _, n := range numbers {
				nin, nwant = append(nin, n.in), append(nwant, n.want)
			}
			for k, got := range run(t, "numbers", nin, 1, 2, len(nin)) {
				if strings.Join(got, " ") != strings.Join(nwant, " ") {
					t.Errorf("numbers, run %d: got %q, want %q", k, got, nwant)
				}
			}
			// Without a declaration the batches carry no field table: no
			// record is valid, every path absent.
			if got := run(t, "none", []string{`{"a":1}`, `x`}, 2)[0]; strings.Join(got, " ") != "0|-|NaN 0|-|NaN" {
				t.Errorf("none: %q", got)
			}

			for _, c := range []struct{ mode, want string }{
				{"twice", "fields: declareFields called twice: a module declares its fields once, all in one call"},
				{"toomany", "fields: declareFields of 65 paths: a module declares 1 to 64"},
				{"deep", "fields: a path has 1 to 8 keys, not 9"},
				{"repeat", `path 1 (["a"]) repeats path 0`},
			} {
				i, err := open(t, c.mode)
				if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: Open: %v; want one line with %q", c.mode, err, c.want)
				}
				// The SDK refuses before the host sees the list (after the
				// first, accepted, declaration for twice).
				want := map[string]string{"twice": `[["a"]]`, "toomany": "[]", "deep": "[]"}[c.mode]
				if got := fmt.Sprintf("%q", i.Fields()); want != "" && strings.ReplaceAll(got, " ", ",") != want {
					t.Errorf("%s: the host has the paths %s, want %s", c.mode, got, want)
				}
			}
			i, err := open(t, "outside")
			if err != nil {
				t.Fatal(err)
			}
			err = process(i, 0, []abi.Record{{Value: []byte(`{}`)}}, func([]abi.Record) {})
			if err == nil || !strings.Contains(err.Error(), "fields: declareFields called outside open: the host takes a module's fields only during eddy_open") || strings.Contains(err.Error(), "\n") {
				t.Errorf("declareFields in process: %v", err)
			}
			if co {
				if err := i.Process([]abi.Record{{Value: []byte(`{}`)}}, func([]abi.Record) {}); err == nil || !strings.Contains(err.Error(), "two-input operator") {
					t.Errorf("Process on the two-input module: %v", err)
				}
			}
		})
	}
}
