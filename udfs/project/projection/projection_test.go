package projection

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

func TestApply(t *testing.T) {
	const cards = `{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`
	tests := []struct {
		name   string
		config string
		value  string
		want   string // "" = dropped
	}{
		{"projects in config order", cards, `{"amount": 150, "x": 1, "card": "4111"}`, `{"card":"4111","amount":150}`},
		{"fails predicate", cards, `{"amount": 100, "card": "4111"}`, ``},
		{"missing where field", cards, `{"card": "4111"}`, ``},
		{"where field not a number", cards, `{"amount": "150", "card": "4111"}`, ``},
		{"missing projected field omitted", cards, `{"amount": 101}`, `{"amount":101}`},
		{"raw values copied", `{"fields": ["a", "b", "c"]}`,
			`{"c": "q\"}{", "b": [1, {"x": [2, "]"]}], "a": {"n": {"m": null}}, "d": 0}`,
			`{"a":{"n": {"m": null}},"b":[1, {"x": [2, "]"]}],"c":"q\"}{"}`},
		{"first duplicate wins", `{"fields": ["a"]}`, `{"a": 1, "a": 2}`, `{"a":1}`},
		{"escaped member name", `{"fields": ["card"]}`, `{"c\u0061rd": 7}`, `{"card":7}`},
		{"escaped field name in config", `{"fields": ["q\"n"]}`, `{"q\u0022n": 7}`, `{"q\"n":7}`},
		{"no fields keeps the value", `{"where": {"field": "a", "op": "exists"}}`, ` {"a" : null} `, ` {"a" : null} `},
		{"empty config keeps any object", `{}`, `{}`, `{}`},
		{"empty fields", `{"fields": []}`, `{"a": 1}`, `{}`},
		{"nothing found", `{"fields": ["z"]}`, `{"a": 1}`, `{}`},
		{"not an object", `{}`, `[1, 2]`, ``},
		{"string value", `{}`, `"x"`, ``},
		{"empty value", `{}`, ``, ``},
		{"trailing garbage", `{}`, `{"a": 1} x`, ``},
		{"malformed after fields", `{"fields": ["a"]}`, `{"a": 1, "b": }`, ``},
		{"truncated", `{"fields": ["a"]}`, `{"a": 1`, ``},

		{"== number", `{"where": {"field": "n", "op": "==", "value": 150}}`, `{"n": 1.5e2}`, `{"n": 1.5e2}`},
		{"== number false", `{"where": {"field": "n", "op": "==", "value": 150}}`, `{"n": 150.0001}`, ``},
		{"!= number", `{"where": {"field": "n", "op": "!=", "value": 0}}`, `{"n": -0}`, ``},
		{"!= number true", `{"where": {"field": "n", "op": "!=", "value": 0}}`, `{"n": 1e-300}`, `{"n": 1e-300}`},
		{"!= does not match missing", `{"where": {"field": "n", "op": "!=", "value": 0}}`, `{"m": 1}`, ``},
		{"!= does not match other type", `{"where": {"field": "n", "op": "!=", "value": 0}}`, `{"n": "1"}`, ``},
		{"<", `{"where": {"field": "n", "op": "<", "value": -1.5}}`, `{"n": -2}`, `{"n": -2}`},
		{"< equal", `{"where": {"field": "n", "op": "<", "value": -1.5}}`, `{"n": -1.5}`, ``},
		{"<=", `{"where": {"field": "n", "op": "<=", "value": -1.5}}`, `{"n": -15e-1}`, `{"n": -15e-1}`},
		{">", `{"where": {"field": "n", "op": ">", "value": 1e300}}`, `{"n": 1e400}`, `{"n": 1e400}`},
		{">=", `{"where": {"field": "n", "op": ">=", "value": 10}}`, `{"n": 10}`, `{"n": 10}`},
		{">= false", `{"where": {"field": "n", "op": ">=", "value": 10}}`, `{"n": 9.999}`, ``},
		{"== string", `{"where": {"field": "s", "op": "==", "value": "café \"x\""}}`, `{"s": "caf\u00e9 \"x\""}`, `{"s": "caf\u00e9 \"x\""}`},
		{"== string false", `{"where": {"field": "s", "op": "==", "value": "café"}}`, `{"s": "cafe"}`, ``},
		{"== string vs number", `{"where": {"field": "s", "op": "==", "value": "1"}}`, `{"s": 1}`, ``},
		{"!= string", `{"where": {"field": "s", "op": "!=", "value": "a"}}`, `{"s": "b"}`, `{"s": "b"}`},
		{"!= string equal", `{"where": {"field": "s", "op": "!=", "value": "a"}}`, `{"s": "\u0061"}`, ``},
		{"exists", `{"where": {"field": "s", "op": "exists"}}`, `{"s": null}`, `{"s": null}`},
		{"exists missing", `{"where": {"field": "s", "op": "exists"}}`, `{"t": null}`, ``},
		{"where on nested name is top-level only", `{"where": {"field": "s", "op": "exists"}}`, `{"t": {"s": 1}}`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			out, keep := p.Apply([]byte("prefix:"), []byte(tc.value))
			if tc.want == "" {
				if keep || string(out) != "prefix:" {
					t.Fatalf("kept %q, want dropped (dst untouched)", out)
				}
				return
			}
			if !keep {
				t.Fatalf("dropped, want %s", tc.want)
			}
			got := string(out)
			if p.all {
				got = "prefix:" + got // value itself is returned, not appended
			}
			if got != "prefix:"+tc.want {
				t.Fatalf("got %s, want %s", strings.TrimPrefix(got, "prefix:"), tc.want)
			}
			if !p.all && !json.Valid(bytes.TrimPrefix(out, []byte("prefix:"))) {
				t.Fatalf("output %s is not valid JSON", out)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ config, want string }{
		{`nope`, "project: config is not a JSON object"},
		{`{"fields": [`, "project: config is not valid JSON"},
		{`{"fields": "a"}`, "project: config: fields must be an array of strings"},
		{`{"fields": ["a", 1]}`, "project: config: fields must be an array of strings"},
		{`{"fields": ["a", "\u0061"]}`, `project: config: field "\u0061" is listed twice`},
		{`{"fields": [], "fields": []}`, `project: config: unknown or repeated key "fields"`},
		{`{"Fields": []}`, `project: config: unknown or repeated key "Fields"`},
		{`{"where": 1}`, "project: config: where must be an object"},
		{`{"where": {"field": "a", "op": "==", "value": 1, "x": 2}}`, `project: config: where: unknown or repeated key "x"`},
		{`{"where": {"op": "=="}}`, "project: config: where.field must be a string"},
		{`{"where": {"field": "a"}}`, "project: config: where.op must be a string"},
		{`{"where": {"field": "a", "op": "="}}`, `project: config: where.op "=" is not one of ==, !=, <, <=, >, >=, exists`},
		{`{"where": {"field": "a", "op": ">", "value": "x"}}`, "project: config: strings compare only with == and !="},
		{`{"where": {"field": "a", "op": "==", "value": true}}`, "project: config: where.value must be a number or a string"},
		{`{"where": {"field": "a", "op": "=="}}`, "project: config: where.value must be a number or a string"},
		{`{"where": {"field": "a", "op": "exists", "value": 1}}`, "project: config: where.value is not allowed with exists"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.config))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%s) = %v, want %q", tc.config, err, tc.want)
		}
	}
}

func TestApplyNoAllocations(t *testing.T) {
	p, err := Parse([]byte(`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`))
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(`{"card": "4111", "amount": 150.25, "merchant": {"name": "x", "geo": [1, 2]}}`)
	dst := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { p.Apply(dst[:0], value) }); n != 0 {
		t.Errorf("%v allocations per Apply", n)
	}
}

func BenchmarkApply(b *testing.B) {
	p, err := Parse([]byte(`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`))
	if err != nil {
		b.Fatal(err)
	}
	value := []byte(`{"card": "4111 1111 1111 1111", "amount": 150.25, "currency": "EUR", "merchant": {"name": "Shop", "geo": [52.52, 13.40]}, "ts": 1700000000000}`)
	dst := make([]byte, 0, 256)
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		p.Apply(dst[:0], value)
	}
}

// FuzzApply feeds untrusted values (and configurations) to Apply: it must
// never panic, and whatever it keeps must be a valid JSON object.
func FuzzApply(f *testing.F) {
	configs := []string{
		`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`,
		`{"where": {"field": "s", "op": "==", "value": "caf\u00e9"}}`,
		`{"fields": ["a", "b"]}`,
		`{}`,
	}
	for i, v := range []string{`{"card": "x", "amount": 150}`, `{"s": "café"}`, `{"a": [1, {"b": "}"}], "b": 2}`, `[]`, `{"a":1,}`} {
		f.Add(uint8(i), []byte(v))
	}
	projectors := make([]*Projector, len(configs))
	for i, c := range configs {
		p, err := Parse([]byte(c))
		if err != nil {
			f.Fatal(err)
		}
		projectors[i] = p
	}
	f.Fuzz(func(t *testing.T, which uint8, value []byte) {
		p := projectors[int(which)%len(projectors)]
		out, keep := p.Apply(nil, value)
		if keep && (!jsonscan.Valid(out) || jsonscan.KindOf(bytes.TrimLeft(out, " \t\r\n")) != jsonscan.Object) {
			t.Fatalf("kept %q as %q, which is not a JSON object", value, out)
		}
		if !keep && out != nil {
			t.Fatalf("dropped but appended %q", out)
		}
		// The same bytes as a configuration must not panic either.
		Parse(value)
	})
}
