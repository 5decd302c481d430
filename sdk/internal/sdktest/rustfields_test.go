package sdktest

import (
	"context"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	eddyhost "github.com/eddy-stream/eddy/host"
)

// TestRustFieldsThroughHost runs the Rust SDK's fields (eddy::fields, ABI
// versions 6 and 7) in the real host, one-input (operator!(T, fields))
// and two-input (keyed_co_operator!(T, fields)), through
// testdata/rustfields.rs, which speaks fieldsguest's protocol: the module
// declares version 7 over the two-input 5, Record::valid and field give
// the rows the host extracted (nested paths, absent paths, invalid
// values) in batches of any size and on both inputs, number gives the
// numbers the host parsed (None for what is not a number), emit_parts and
// emit_part_list hand over values the host gathers, and a second declare
// or one outside open fails with the SDK's line without reaching the host.
func TestRustFieldsThroughHost(t *testing.T) {
	ctx := context.Background()
	e, err := eddyhost.NewEngine(ctx, eddyhost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	for _, variant := range []string{"one", "two"} {
		t.Run(variant, func(t *testing.T) {
			var extra []string
			if variant == "two" {
				extra = []string{"--cfg", "co"}
			}
			m, err := e.Compile(ctx, "rustfields-"+variant, buildRustGuest(t, "rustfields", extra...))
			if err != nil {
				t.Fatal(err)
			}
			if v := m.ABIVersion(); v != abi.PartsVersion || m.IsTwoInput() != (variant == "two") {
				t.Fatalf("ABI version %d, two-input %v; want %d, %v", v, m.IsTwoInput(), abi.PartsVersion, variant == "two")
			}
			newInstance := func(t *testing.T, config []byte) (*eddyhost.Instance, error) {
				i, err := m.NewInstance(ctx, eddyhost.InstanceConfig{Name: "job/rustfields[0]"})
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

			// Spans, through field, spans, emit_parts and emit_part_list.
			in := []struct{ value, want string }{
				{`{"a":1,"b":{"c":"x"}}`, `1|1|"x"|{"c":"x"}`},
				{`{"b":[1],"a":"\u0041"}`, `1|"\u0041"|-|[1]`},
				{` {"a" : {"c":2} , "a":3} `, `1|{"c":2}|-|-`},
				{`{"a":1,"b":{"c":2}`, `0|-|-|-`},
				{`[1,2]`, `0|-|-|-`},
				{`{}`, `1|-|-|-`},
				{`{"b":{"d":1,"c":[{"x":1}]},"a":null}`, `1|null|[{"x":1}]|{"d":1,"c":[{"x":1}]}`},
			}
			for _, mode := range []byte{'F', 'E', 'L'} {
				i, err := newInstance(t, config(mode, []string{"a"}, []string{"b", "c"}, []string{"b"}))
				if err != nil {
					t.Fatalf("mode %c: %v", mode, err)
				}
				for _, size := range []int{1, 3, len(in)} {
					var got []abi.Record
					emit := func(recs []abi.Record) {
						for _, r := range recs {
							got = append(got, abi.Record{Key: []byte(string(r.Key)), Value: []byte(string(r.Value)), Timestamp: r.Timestamp})
						}
					}
					for start := 0; start < len(in); start += size {
						var recs []abi.Record
						for _, r := range in[start:min(start+size, len(in))] {
							recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(r.value), Timestamp: 5})
						}
						if err := process(i, (start/size)%2, recs, emit); err != nil {
							t.Fatalf("mode %c, batches of %d: %v", mode, size, err)
						}
					}
					if len(got) != len(in) {
						t.Fatalf("mode %c, batches of %d: %d records out, want %d", mode, size, len(got), len(in))
					}
					for k, r := range got {
						if string(r.Value) != in[k].want {
							t.Errorf("mode %c, batches of %d, record %d %s: got %q, want %q", mode, size, k, in[k].value, r.Value, in[k].want)
						}
						wantKey := "k"
						if variant == "two" && (k/size)%2 == 1 {
							wantKey = "r:k"
						}
						if string(r.Key) != wantKey || r.Timestamp != 5 {
							t.Errorf("mode %c, batches of %d, record %d: key %q, timestamp %d; want %q, 5", mode, size, k, r.Key, r.Timestamp, wantKey)
						}
					}
				}
			}

			// Number paths: the host's parse, None (echoed "-") for a
			// string, an object, an absent path, an invalid value.
			i, err := newInstance(t, append([]byte{'M'}, abi.EncodeFields([][]string{{"a"}}, [][]string{{"a"}, {"b", "c"}})...))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			emit := func(recs []abi.Record) {
				for _, r := range recs {
					got = append(got, string(r.Value))
				}
			}
			var recs []abi.Record
			for _, v := range []string{`{"a":1.5,"b":{"c":-2e3}}`, `{"a":"1","b":{"c":1e999}}`, `{"b":[1]}`, `{"a":{"x":1},"b":{"c":true}}`, `{"a":1`} {
				recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(v), Timestamp: 5})
			}
			if err := process(i, 1, recs, emit); err != nil {
				t.Fatal(err)
			}
			want := []string{`1|1.5|1.5|-2000`, `1|"1"|-|+Inf`, `1|-|-|-`, `1|{"x":1}|-|-`, `0|-|-|-`}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("numbers: got %q, want %q", got, want)
			}

			// Misuse: the SDK's own lines, nothing handed to the host.
			if _, err := newInstance(t, config('2', []string{"a"})); err == nil || !strings.Contains(err.Error(), "fields: declare called twice") || strings.Contains(err.Error(), "\n") {
				t.Errorf("declare twice: %v", err)
			}
			i, err = newInstance(t, config('P', []string{"a"}))
			if err != nil {
				t.Fatal(err)
			}
			if err := process(i, 0, []abi.Record{{Value: []byte(`{}`)}}, nil); err == nil || !strings.Contains(err.Error(), "fields: declare called outside open") || strings.Contains(err.Error(), "\n") {
				t.Errorf("declare in process: %v", err)
			}
			if i.Fields() != nil {
				t.Errorf("a refused declare reached the host: %q", i.Fields())
			}
			// A list the host refuses fails open with the host's line.
			if _, err := newInstance(t, config('F', []string{"a"}, []string{"a"})); err == nil || !strings.Contains(err.Error(), "repeats path 0") {
				t.Errorf("a path twice: %v", err)
			}
			// Nothing declared: batches without a field table, values as
			// they are.
			i, err = newInstance(t, []byte{'N'})
			if err != nil {
				t.Fatal(err)
			}
			got = nil
			if err := process(i, 0, []abi.Record{{Value: []byte("x")}, {Value: []byte("yz")}}, emit); err != nil || strings.Join(got, " ") != "x yz" {
				t.Errorf("without declare: %v, values %q", err, got)
			}
		})
	}
}
