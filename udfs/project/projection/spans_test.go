package projection

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// spanConfigs cover every op, a where field that is and is not one of the
// fields, escaped names, and the configurations without paths.
var spanConfigs = []string{
	`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`,
	`{"fields": ["card", "amount", "country"], "where": {"field": "amount", "op": ">", "value": 100}}`,
	`{"fields": ["card"], "where": {"field": "amount", "op": ">=", "value": 10}}`,
	`{"fields": ["amount", "card"], "where": {"field": "c\u0061rd", "op": "==", "value": "4111 \"x\""}}`,
	`{"fields": ["a", "b", "c"]}`,
	`{"fields": ["q\"n", "café", ""]}`,
	`{"fields": []}`,
	`{"fields": [], "where": {"field": "n", "op": "exists"}}`,
	`{"where": {"field": "n", "op": "==", "value": 150}}`,
	`{"where": {"field": "n", "op": "!=", "value": 0}}`,
	`{"where": {"field": "n", "op": "<", "value": -1.5}}`,
	`{"where": {"field": "n", "op": "<=", "value": -1.5}}`,
	`{"where": {"field": "s", "op": "==", "value": "café \"x\""}}`,
	`{"where": {"field": "s", "op": "!=", "value": "a"}}`,
	`{"fields": ["s", "n"], "where": {"field": "s", "op": "exists"}}`,
	`{}`,
}

// spanValues are the values of TestApply and near misses around the
// configurations' names: duplicates, escapes, nesting, other types,
// invalid objects.
var spanValues = []string{
	`{"amount": 150, "x": 1, "card": "4111"}`, `{"amount": 100, "card": "4111"}`, `{"card": "4111"}`,
	`{"amount": "150", "card": "4111"}`, `{"amount": 101}`, `{"amount": 1e400, "country": "DE"}`,
	`{"c": "q\"}{", "b": [1, {"x": [2, "]"]}], "a": {"n": {"m": null}}, "d": 0}`,
	`{"a": 1, "a": 2}`, `{"c\u0061rd": 7, "card": 8, "amount": 1000}`, `{"q\u0022n": 7, "caf\u00e9": [], "": {}}`,
	` {"a" : null} `, `{}`, `{"a": 1}`, `[1, 2]`, `"x"`, ``, ` `, `{"a": 1} x`, `{"a": 1, "b": }`, `{"a": 1`,
	`{"n": 1.5e2}`, `{"n": 150.0001}`, `{"n": -0}`, `{"n": 1e-300}`, `{"m": 1}`, `{"n": "1"}`, `{"n": -2}`,
	`{"n": -1.5}`, `{"n": -15e-1}`, `{"n": 10}`, `{"n": 9.999}`, `{"s": "caf\u00e9 \"x\""}`, `{"s": "cafe"}`,
	`{"s": 1}`, `{"s": "b"}`, `{"s": "\u0061"}`, `{"s": null}`, `{"t": null}`, `{"t": {"s": 1}}`,
	`{"card": "4111 \"x\"", "amount": 5}`, `{"card": "4111 \u0022x\u0022", "card": "y"}`,
	`{"n": 150, "n": 1}`, `{"s": "a", "s": "b"}`, `{"n": 01}`, `{"n": 1, "s": "\ud800"}`, `{"s": "\x01"}`,
	`{"amount": 150, "card": {"nested": [1, 2, {"card": 3}]}}`, "{\"a\":\t1 ,\n\"b\" :2}", `{"a":1}{}`,
}

// spansOf is what a module of version 6 hands ApplySpans: the host's
// extraction of p.Paths from value, turned into slices of value.
func spansOf(t testing.TB, f *abi.Fields, n int, value []byte) (bool, [][]byte) {
	row := make([]byte, abi.FieldRowSize(len(f.Paths())))
	f.Extract(row, value, 0, len(value))
	spans := make([][]byte, n)
	for j := range spans {
		off, l := binary.LittleEndian.Uint32(row[4+8*j:]), binary.LittleEndian.Uint32(row[8+8*j:])
		if off != abi.FieldAbsent {
			if uint64(off)+uint64(l) > uint64(len(value)) {
				t.Fatalf("%s: span %d [%d, +%d) outside the value", value, j, off, l)
			}
			spans[j] = value[off : off+l]
		}
	}
	return binary.LittleEndian.Uint32(row) == 1, spans
}

func fieldsFor(t testing.TB, p *Projector) *abi.Fields {
	paths := p.Paths()
	if len(paths) == 0 {
		return nil
	}
	f, err := abi.ParseFieldList(abi.EncodeFieldList(paths))
	if err != nil {
		t.Fatalf("the host refuses Paths %q: %v", paths, err)
	}
	return f
}

// checkSpans fails unless ApplySpans on what the host extracts from value
// gives what Apply gives.
func checkSpans(t testing.TB, config string, p *Projector, f *abi.Fields, value []byte) {
	want, wantKeep := p.Apply([]byte("prefix:"), value)
	valid, spans := spansOf(t, f, len(p.Paths()), value)
	got, keep := p.ApplySpans([]byte("prefix:"), value, valid, spans)
	if keep != wantKeep || !bytes.Equal(got, want) {
		t.Fatalf("config %s, value %q: ApplySpans = %q, %v; Apply = %q, %v", config, value, got, keep, want, wantKeep)
	}
}

// partsFields is the field list a module of version 7 declares for p
// (Declared), nil when it declares none.
func partsFields(t testing.TB, p *Projector) *abi.Fields {
	spans, numbers := p.Declared()
	if len(spans)+len(numbers) == 0 {
		return nil
	}
	f, err := abi.ParseFieldList(abi.EncodeFields(spans, numbers))
	if err != nil {
		t.Fatalf("the host refuses Declared %q, %q: %v", spans, numbers, err)
	}
	return f
}

// checkParts fails unless ApplyParts on what the host extracts from value
// (spans and the parsed number) gathers to what Apply gives.
func checkParts(t testing.TB, config string, p *Projector, f *abi.Fields, value []byte) {
	want, wantKeep := p.Apply(nil, value)
	spanPaths, numbers := p.Declared()
	row := make([]byte, abi.FieldRowSize(len(spanPaths)+len(numbers)))
	f.Extract(row, value, 0, len(value))
	valid, spans := spansOf(t, f, len(spanPaths), value)
	x := math.NaN()
	if len(numbers) > 0 {
		x = math.Float64frombits(binary.LittleEndian.Uint64(row[4+8*len(spanPaths):]))
	}
	before := [][]byte{[]byte("kept")}
	parts, keep := p.ApplyParts(before, value, valid, spans, x)
	if len(parts) < 1 || string(parts[0]) != "kept" || !keep && len(parts) != 1 {
		t.Fatalf("config %s, value %q: ApplyParts did not append to parts: %q", config, value, parts)
	}
	if got := bytes.Join(parts[1:], nil); keep != wantKeep || keep && !bytes.Equal(got, want) {
		t.Fatalf("config %s, value %q: ApplyParts = %q, %v; Apply = %q, %v", config, value, got, keep, want, wantKeep)
	}
}

func TestDeclared(t *testing.T) {
	for _, c := range []struct {
		config         string
		spans, numbers [][]string
	}{
		{`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`, [][]string{{"card"}, {"amount"}}, [][]string{{"amount"}}},
		{`{"where": {"field": "amount", "op": ">", "value": 100}, "fields": ["card"]}`, [][]string{{"card"}}, [][]string{{"amount"}}},
		{`{"fields": ["a"], "where": {"field": "s", "op": "==", "value": "x"}}`, [][]string{{"a"}, {"s"}}, nil},
		{`{"fields": ["a", "b"], "where": {"field": "\u0061", "op": "exists"}}`, [][]string{{"a"}, {"b"}}, nil},
		{`{"where": {"field": "n", "op": "exists"}}`, [][]string{{"n"}}, nil},
		{`{}`, nil, nil},
	} {
		p, err := Parse([]byte(c.config))
		if err != nil {
			t.Fatal(err)
		}
		spans, numbers := p.Declared()
		if !slices.EqualFunc(spans, c.spans, slices.Equal) || !slices.EqualFunc(numbers, c.numbers, slices.Equal) {
			t.Errorf("Declared of %s = %q, %q; want %q, %q", c.config, spans, numbers, c.spans, c.numbers)
		}
	}
}

func TestPaths(t *testing.T) {
	for _, c := range []struct {
		config string
		want   [][]string
	}{
		{`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`, [][]string{{"card"}, {"amount"}}},
		{`{"where": {"field": "amount", "op": ">", "value": 100}, "fields": ["card", "c\u0061rd2"]}`, [][]string{{"card"}, {"card2"}, {"amount"}}},
		{`{"fields": ["a", "b"], "where": {"field": "\u0061", "op": "exists"}}`, [][]string{{"a"}, {"b"}}},
		{`{"fields": ["q\"n", ""]}`, [][]string{{`q"n`}, {""}}},
		{`{"fields": [], "where": {"field": "n", "op": "exists"}}`, [][]string{{"n"}}},
		{`{"fields": []}`, nil},
		{`{}`, nil},
	} {
		p, err := Parse([]byte(c.config))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Paths(); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("Paths of %s = %q, want %q", c.config, got, c.want)
		}
	}
}

// TestApplySpans: for every configuration with paths, ApplySpans fed by
// the host's extractor (abi.Fields) equals Apply, on the listed values and
// on random objects made of the configurations' names.
func TestApplySpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 16))
	var values [][]byte
	for _, v := range spanValues {
		values = append(values, []byte(v))
	}
	for range 3000 {
		values = append(values, randomObject(rng))
	}
	tested := 0
	for _, config := range spanConfigs {
		p, err := Parse([]byte(config))
		if err != nil {
			t.Fatal(err)
		}
		f := fieldsFor(t, p)
		if f == nil {
			continue
		}
		tested++
		kept := 0
		pf := partsFields(t, p)
		for _, v := range values {
			checkSpans(t, config, p, f, v)
			checkParts(t, config, p, pf, v)
			if _, keep := p.Apply(nil, v); keep {
				kept++
			}
		}
		if kept == 0 || kept == len(values) {
			t.Errorf("config %s keeps %d of %d values: the values do not exercise it", config, kept, len(values))
		}
	}
	if tested < len(spanConfigs)-3 {
		t.Fatalf("only %d configurations have paths", tested)
	}
}

// randomObject is a JSON object, valid or (sometimes) cut or corrupted,
// whose members are mostly the names of spanConfigs, written plainly or
// escaped, repeated, with values of every type.
func randomObject(rng *rand.Rand) []byte {
	names := []string{`card`, `c\u0061rd`, `amount`, `country`, `n`, `s`, `a`, `b`, `c`, `q\"n`, `caf\u00e9`, `café`, ``, `x`, `amounts`}
	values := []string{`150`, `100`, `-2`, `1e400`, `-1.5`, `0`, `"4111 \"x\""`, `"4111 \u0022x\u0022"`, `"café \"x\""`,
		`"a"`, `"b"`, `null`, `true`, `[1, {"n": 150}]`, `{"s": "a", "n": 1}`, `"\u0061"`, `""`, `01`, `"\ud800"`}
	var b strings.Builder
	b.WriteString([]string{"{", " {", "{\n"}[rng.IntN(3)])
	for i := range rng.IntN(6) {
		if i > 0 {
			b.WriteString([]string{",", ", ", " ,\t"}[rng.IntN(3)])
		}
		fmt.Fprintf(&b, `"%s"%s%s`, names[rng.IntN(len(names))], []string{":", " : "}[rng.IntN(2)], values[rng.IntN(len(values))])
	}
	b.WriteString([]string{"}", "} ", "}"}[rng.IntN(3)])
	v := []byte(b.String())
	switch rng.IntN(12) {
	case 0:
		v = v[:rng.IntN(len(v))]
	case 1:
		v[rng.IntN(len(v))] = "{}[]\",: x\\"[rng.IntN(10)]
	}
	return v
}

// FuzzApplySpans holds ApplySpans on the host's extraction to Apply, on
// any bytes.
func FuzzApplySpans(f *testing.F) {
	for i, v := range spanValues {
		f.Add(uint8(i), []byte(v))
	}
	type target struct {
		config string
		p      *Projector
		fields *abi.Fields
	}
	var targets []target
	for _, c := range spanConfigs {
		p, err := Parse([]byte(c))
		if err != nil {
			f.Fatal(err)
		}
		if fl := fieldsFor(f, p); fl != nil {
			targets = append(targets, target{c, p, fl})
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, value []byte) {
		c := targets[int(which)%len(targets)]
		checkSpans(t, c.config, c.p, c.fields, value)
		checkParts(t, c.config, c.p, partsFields(t, c.p), value)
	})
}

func TestApplySpansNoAllocations(t *testing.T) {
	p, err := Parse([]byte(`{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}`))
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(`{"card": "4111", "amount": 150.25}`)
	spans := [][]byte{value[9:15], value[27:33]}
	dst := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { p.ApplySpans(dst[:0], value, true, spans) }); n != 0 {
		t.Errorf("%v allocations per ApplySpans", n)
	}
	if out, keep := p.ApplySpans(nil, value, true, spans); !keep || string(out) != `{"card":"4111","amount":150.25}` {
		t.Fatalf("got %s, %v", out, keep)
	}
	parts := make([][]byte, 0, 8)
	if n := testing.AllocsPerRun(100, func() { p.ApplyParts(parts[:0], value, true, spans, 150.25) }); n != 0 {
		t.Errorf("%v allocations per ApplyParts", n)
	}
}

// TestCompare: ComparesNumbers holds exactly for the where clauses that
// compare numbers, and for those Compare(x) is Filter's verdict, NaN (no
// number) included.
func TestCompare(t *testing.T) {
	xs := []float64{math.NaN(), math.Inf(-1), -1, 0, 99.5, 100, 100.5, math.Inf(1)}
	for _, c := range []struct {
		config   string
		compares bool
		pass     string // the xs that pass, as Compare gives them
	}{
		{`{"where":{"field":"a","op":">","value":100}}`, true, "100.5 +Inf"},
		{`{"where":{"field":"a","op":">=","value":100}}`, true, "100 100.5 +Inf"},
		{`{"where":{"field":"a","op":"<","value":0}}`, true, "-Inf -1"},
		{`{"where":{"field":"a","op":"<=","value":0}}`, true, "-Inf -1 0"},
		{`{"where":{"field":"a","op":"==","value":100}}`, true, "100"},
		{`{"where":{"field":"a","op":"!=","value":100}}`, true, "-Inf -1 0 99.5 100.5 +Inf"},
		{`{"where":{"field":"a","op":"==","value":"x"}}`, false, ""},
		{`{"where":{"field":"a","op":"exists"}}`, false, ""},
		{`{"fields":["a"]}`, false, ""},
	} {
		p, err := Parse([]byte(c.config))
		if err != nil {
			t.Fatalf("%s: %v", c.config, err)
		}
		if p.ComparesNumbers() != c.compares {
			t.Errorf("%s: ComparesNumbers %v, want %v", c.config, p.ComparesNumbers(), c.compares)
			continue
		}
		if !c.compares {
			continue
		}
		var pass []string
		for _, x := range xs {
			got := p.Compare(x)
			if want := p.Filter(nil, x); got != want {
				t.Errorf("%s: Compare(%v) %v, Filter %v", c.config, x, got, want)
			}
			if got {
				pass = append(pass, fmt.Sprint(x))
			}
		}
		if strings.Join(pass, " ") != c.pass {
			t.Errorf("%s: %q pass, want %q", c.config, pass, c.pass)
		}
	}
}
