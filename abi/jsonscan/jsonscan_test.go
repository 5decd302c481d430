package jsonscan

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"object", `{"a": 1, "b": [true, false, null], "c": {"d": "e"}}`, true},
		{"spaces around", " \t\r\n{} \n", true},
		{"empty array", `[]`, true},
		{"nested empties", `[{}, [], [[]], {"a": {}}]`, true},
		{"string", `"a\"b\\c\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, true},
		{"numbers", `[0, -0, 1.5, -1.5e10, 1E+2, 2e-3, 123456789012345678901234567890]`, true},
		{"utf8 bytes unchecked", "\"\xff\"", true},
		{"empty input", ``, false},
		{"only space", `  `, false},
		{"two values", `1 2`, false},
		{"trailing comma object", `{"a":1,}`, false},
		{"trailing comma array", `[1,]`, false},
		{"leading comma", `[,1]`, false},
		{"missing colon", `{"a" 1}`, false},
		{"missing comma", `{"a":1 "b":2}`, false},
		{"bare key", `{a:1}`, false},
		{"non-string key", `{1:1}`, false},
		{"mismatched close", `{"a":[1}`, false},
		{"mismatched close 2", `[{"a":1]]`, false},
		{"unclosed", `{"a":1`, false},
		{"unclosed string", `"abc`, false},
		{"bad escape", `"\x"`, false},
		{"short unicode escape", `"\u12"`, false},
		{"control char", "\"a\tb\"", false},
		{"leading zero", `01`, false},
		{"bare minus", `-`, false},
		{"dot without digits", `1.`, false},
		{"leading dot", `.5`, false},
		{"bare exponent", `1e`, false},
		{"plus sign", `+1`, false},
		{"bad literal", `tru`, false},
		{"literal prefix", `nulls`, false},
		{"single quotes", `{'a':1}`, false},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), false},
		{"deepest", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Valid([]byte(tc.in)); got != tc.want {
				t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

type member struct{ key, value string }

func collect(it *Iter) ([]member, Step) {
	var ms []member
	for {
		k, v, st := it.Next()
		if st != Field {
			return ms, st
		}
		ms = append(ms, member{string(k), string(v)})
	}
}

func TestObjects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
		want []member
		end  Step
	}{
		{"empty", ` { } `, true, nil, End},
		{"members", `{"a" : 1 ,"b":[1, {"c": "}"}], "c\"d":"x"}`, true,
			[]member{{`"a"`, `1`}, {`"b"`, `[1, {"c": "}"}]`}, {`"c\"d"`, `"x"`}}, End},
		{"not an object", `[1]`, false, nil, Malformed},
		{"empty input", ``, false, nil, Malformed},
		{"bad after first", `{"a":1,"b"}`, true, []member{{`"a"`, `1`}}, Malformed},
		{"trailing garbage", `{"a":1} x`, true, []member{{`"a"`, `1`}}, Malformed},
		{"unclosed", `{"a":1`, true, []member{{`"a"`, `1`}}, Malformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := Objects([]byte(tc.in))
			if ok != tc.ok {
				t.Fatalf("Objects ok = %v, want %v", ok, tc.ok)
			}
			got, end := collect(&it)
			if end != tc.end || len(got) != len(tc.want) {
				t.Fatalf("got %v ending %d, want %v ending %d", got, end, tc.want, tc.end)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("member %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
			if _, _, st := it.Next(); st != end && end != Field {
				// Iteration state sticks once it has ended.
				t.Fatalf("Next after %d = %d", end, st)
			}
		})
	}
}

func TestElements(t *testing.T) {
	it, ok := Elements([]byte(` [1, "a", [2], {"b": 3}] `))
	if !ok {
		t.Fatal("not an array")
	}
	got, end := collect(&it)
	want := []string{`1`, `"a"`, `[2]`, `{"b": 3}`}
	if end != End || len(got) != len(want) {
		t.Fatalf("got %v ending %d", got, end)
	}
	for i := range want {
		if got[i].key != "" || got[i].value != want[i] {
			t.Errorf("element %d = %v, want %s", i, got[i], want[i])
		}
	}
	if _, ok := Elements([]byte(`{}`)); ok {
		t.Error("Elements accepts an object")
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name, in, field string
		want            string
		st              Step
	}{
		{"found", `{"a":1,"b":2}`, "b", `2`, Field},
		{"first of duplicates", `{"a":1,"a":2}`, "a", `1`, Field},
		{"escaped name", `{"c\u0061rd":"x"}`, "card", `"x"`, Field},
		{"absent", `{"a":1}`, "b", ``, End},
		{"empty name", `{"":1}`, "", `1`, Field},
		{"nested not top-level", `{"x":{"b":1}}`, "b", ``, End},
		{"malformed after match", `{"b":1,}`, "b", ``, Malformed},
		{"not an object", `[{"b":1}]`, "b", ``, Malformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, st := Lookup([]byte(tc.in), []byte(tc.field))
			if st != tc.st || string(v) != tc.want {
				t.Errorf("Lookup = %q, %d; want %q, %d", v, st, tc.want, tc.st)
			}
		})
	}
}

func TestUnquoteEqual(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"plain", `"abc"`, "abc"},
		{"empty", `""`, ""},
		{"short escapes", `"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
		{"bmp", `"caf\u00e9 \u20AC"`, "café €"},
		{"surrogate pair", `"\ud83d\ude00"`, "😀"},
		{"lone high", `"\ud83dx"`, "\uFFFDx"},
		{"high then non-low escape", `"\ud83d\u0041"`, "\uFFFDA"},
		{"lone low", `"\ude00"`, "\uFFFD"},
		{"nul", `"a\u0000b"`, "a\x00b"},
		{"raw utf8", `"😀"`, "😀"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(AppendUnquote(nil, []byte(tc.raw))); got != tc.want {
				t.Errorf("AppendUnquote = %q, want %q", got, tc.want)
			}
			if !Equal([]byte(tc.raw), []byte(tc.want)) {
				t.Errorf("Equal(%s, %q) = false", tc.raw, tc.want)
			}
			if Equal([]byte(tc.raw), []byte(tc.want+"x")) {
				t.Errorf("Equal(%s, %q) = true", tc.raw, tc.want+"x")
			}
			if len(tc.want) > 0 && Equal([]byte(tc.raw), []byte(tc.want[:len(tc.want)-1])) {
				t.Errorf("Equal with a prefix = true")
			}
		})
	}
	if Equal([]byte(`abc`), []byte("abc")) || len(AppendUnquote(nil, []byte(`"`))) != 0 {
		t.Error("a span that is not a quoted string must not compare or unquote")
	}
}

func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x1f\b\f\n\r\t", "café 😀", "<&>"} {
		raw := AppendQuote(nil, []byte(s))
		var back string
		if err := json.Unmarshal(raw, &back); err != nil || back != s {
			t.Errorf("AppendQuote(%q) = %s, which decodes to %q (%v)", s, raw, back, err)
		}
		if got := string(AppendUnquote(nil, raw)); got != s {
			t.Errorf("AppendUnquote(AppendQuote(%q)) = %q", s, got)
		}
	}
	if got := string(AppendQuote(nil, []byte("\x01"))); got != `"\u0001"` {
		t.Errorf("control character quoted as %s", got)
	}
}

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{`0`, 0, true},
		{`-0`, math.Copysign(0, -1), true},
		{`150`, 150, true},
		{`1.5e2`, 150, true},
		{`-1.5E-1`, -0.15, true},
		{`9007199254740993`, 9007199254740992, true},
		{`1e400`, math.Inf(1), true},
		{`-1e400`, math.Inf(-1), true},
		{`1e-400`, 0, true},
		{`1` + strings.Repeat("0", 400), math.Inf(1), true},
		{``, 0, false},
		{`1 `, 0, false},
		{`+1`, 0, false},
		{`0x10`, 0, false},
		{`Inf`, 0, false},
		{`"1"`, 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseNumber([]byte(tc.in))
		if ok != tc.ok || got != tc.want || math.Signbit(got) != math.Signbit(tc.want) {
			t.Errorf("ParseNumber(%.20q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestKindOf(t *testing.T) {
	want := map[string]Kind{`{}`: Object, `[]`: Array, `""`: String, `-1`: Number, `7`: Number,
		`true`: True, `false`: False, `null`: Null, ``: Invalid, `x`: Invalid}
	for in, k := range want {
		if got := KindOf([]byte(in)); got != k {
			t.Errorf("KindOf(%q) = %d, want %d", in, got, k)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	value := []byte(`{"card": "4111 \"x\"", "amount": 150.5, "tags": ["a", {"b": [1, 2]}], "text": "caf\u00e9"}`)
	name := []byte("text")
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		v, _ := Lookup(value, name)
		buf = AppendUnquote(buf[:0], v)
		a, _ := Lookup(value, []byte("amount"))
		ParseNumber(a)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per lookup", allocs)
	}
}

// FuzzScan checks the scanner against encoding/json on arbitrary input:
// the same verdict on validity (within MaxDepth), the same strings, and no
// panic anywhere.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{"a": [1, "b", {"c": null}], "d": -1.5e3}`, `"\ud83d\ude00"`, `[]`,
		`{"a":1,}`, `"\u12"`, `{"a":"\"}`, "\"\xff\"", `1e999`, `[[[[]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := Valid(b)
		if depth(b) <= MaxDepth && valid != json.Valid(b) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, valid, !valid)
		}
		if it, ok := Objects(b); ok {
			for {
				k, v, st := it.Next()
				if st != Field {
					break
				}
				if !Valid(k) || KindOf(k) != String || !Valid(v) {
					t.Fatalf("member %q: %q is not a valid value", k, v)
				}
				Equal(k, v)
				AppendUnquote(nil, v)
			}
		}
		if valid && KindOf(trim(b)) == String && utf8.Valid(b) {
			var want string
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if got := AppendUnquote(nil, trim(b)); string(got) != want || !Equal(trim(b), []byte(want)) {
				t.Fatalf("AppendUnquote(%s) = %q, encoding/json says %q", b, got, want)
			}
		}
		if valid && KindOf(trim(b)) == Number {
			if _, ok := ParseNumber(trim(b)); !ok {
				t.Fatalf("ParseNumber(%s) fails on a valid number", b)
			}
		}
		// Walked in place (Enter/Leave), a container rebuilds into
		// encoding/json's Compact form exactly when it is valid.
		if tb := trim(b); depth(b) <= MaxDepth && len(tb) > 0 && (tb[0] == '{' || tb[0] == '[') {
			got, ok := walkInPlace(b)
			var want bytes.Buffer
			if wantOK := json.Compact(&want, b) == nil; ok != wantOK || (ok && string(got) != want.String()) {
				t.Fatalf("walked in place, %q gives %q (valid %v); encoding/json: %q (valid %v)", b, got, ok, want.Bytes(), wantOK)
			}
		}
		// Total on any bytes, valid or not.
		Equal(b, b)
		AppendUnquote(nil, b)
		ParseNumber(b)
		Lookup(b, []byte("a"))
	})
}

// walkInPlace rebuilds the container b compact from the spans of
// NextKey, Value, Enter and Leave, entering every nested container.
func walkInPlace(b []byte) ([]byte, bool) {
	it, ok := Objects(b)
	if !ok {
		if it, ok = Elements(b); !ok {
			return nil, false
		}
	}
	var walk func(it *Iter, out []byte) ([]byte, bool)
	walk = func(it *Iter, out []byte) ([]byte, bool) {
		open, close := byte('['), byte(']')
		if it.object {
			open, close = '{', '}'
		}
		out = append(out, open)
		for n := 0; ; n++ {
			k, st := it.NextKey()
			if st == End {
				return append(out, close), true
			}
			if st == Malformed {
				return out, false
			}
			if n > 0 {
				out = append(out, ',')
			}
			if it.object {
				out = append(append(out, k...), ':')
			}
			if in, ok := it.Enter(); ok {
				if out, ok = walk(&in, out); !ok || !it.Leave(&in) {
					return out, false
				}
				continue
			}
			v, st := it.Value()
			if st != Field {
				return out, false
			}
			out = append(out, v...)
		}
	}
	return walk(&it, nil)
}

// TestEnterLeave: iterating nested containers in place rebuilds the
// input, checks all of it, and Leave finishes an inner iterator left
// early; an early stop leaves the rest unread.
func TestEnterLeave(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"a":{"b":[1,{"c":"d"}]},"e":[]}`, true}, {` [ [ ] , { } ] `, true}, {`{"a":{"b":1}} x`, false},
		{`{"a":{"b":1}`, false}, {`{"a":{"b":1]}`, false}, {`{"a":[1,}`, false}, {`[{"a":1},{"b":2}`, false},
	} {
		got, ok := walkInPlace([]byte(c.in))
		var want bytes.Buffer
		if ok != c.ok || (ok && (json.Compact(&want, []byte(c.in)) != nil || string(got) != want.String())) {
			t.Errorf("%s: walked %q, ok %v; want ok %v", c.in, got, ok, c.ok)
		}
	}
	// Leave without reading the inner object skips it and checks it.
	for in, want := range map[string]bool{`{"a":{"x":[1,2]},"b":3}`: true, `{"a":{"x":[1,2},"b":3}`: false} {
		it, _ := Objects([]byte(in))
		it.NextKey()
		inner, ok := it.Enter()
		if !ok || it.Leave(&inner) != want {
			t.Errorf("%s: Leave = %v, want %v", in, !want, want)
			continue
		}
		if want {
			if k, _ := it.NextKey(); string(k) != `"b"` {
				t.Errorf("%s: after Leave the next key is %s", in, k)
			}
		}
	}
	// Not a container: Enter refuses and the value is still there.
	it, _ := Objects([]byte(`{"a":1}`))
	it.NextKey()
	if _, ok := it.Enter(); ok {
		t.Fatal("Enter on a number")
	}
	if v, st := it.Value(); st != Field || string(v) != "1" {
		t.Fatalf("Value after a refused Enter = %q %v", v, st)
	}
	// Misuse: Next while an inner iterator is open is malformed.
	it, _ = Objects([]byte(`{"a":{},"b":1}`))
	it.NextKey()
	if _, ok := it.Enter(); !ok {
		t.Fatal("Enter on an object")
	}
	if _, _, st := it.Next(); st != Malformed {
		t.Fatalf("Next with an inner iterator open = %v", st)
	}
}

func trim(b []byte) []byte { return []byte(strings.Trim(string(b), " \t\r\n")) }

// depth over-approximates the nesting of b (brackets inside strings count).
func depth(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '[' || c == '{' {
			n++
		}
	}
	return n
}

// TestStringEndEveryOffset puts each byte that ends or breaks a string,
// and some that do not, at every offset of strings around the 8-byte
// steps of stringEnd (8 bytes, and 16 on amd64 after the first 8): its
// verdict and end agree with encoding/json.
func TestStringEndEveryOffset(t *testing.T) {
	for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff, '!', '#', '[', ']', 0x21, 0x5b, 0x5d, 0x3c, 0x9f, 0xa0} {
		for n := 0; n < 72; n++ {
			for at := 0; at < n; at++ {
				s := []byte(strings.Repeat("a", n))
				s[at] = c
				doc := append(append([]byte(`["`), s...), `",1]`...)
				if got, want := Valid(doc), json.Valid(doc); got != want {
					t.Errorf("Valid(%q) = %v, encoding/json says %v", doc, got, want)
				}
			}
		}
	}
}

// refStringEnd is stringEnd one byte at a time, without skipPlain.
func refStringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if hex4(b, i+2) < 0 {
					return -1
				}
				i += 5
			default:
				return -1
			}
		case c < 0x20:
			return -1
		}
	}
	return -1
}

// TestStringEndRandom holds stringEnd to the byte-at-a-time reference on
// long random strings of mostly plain bytes with now and then a quote, an
// escape or a control byte, at every start offset (the word and SSE2 loops
// meet the special bytes at every alignment).
func TestStringEndRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rare := []byte{'"', '\\', 'n', 'u', '0', 0x00, 0x1f, 0x7f, 0xff, 0x80}
	for range 3000 {
		b := make([]byte, 1+r.IntN(120))
		for k := range b {
			if r.IntN(40) == 0 {
				b[k] = rare[r.IntN(len(rare))]
			} else {
				b[k] = byte(0x20 + r.IntN(0x100-0x20))
			}
		}
		for i := range b {
			if got, want := stringEnd(b, i), refStringEnd(b, i); got != want {
				t.Fatalf("stringEnd(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	}
}

// TestParseNumberFastPath: the fast path gives what the general path gives.
func TestParseNumberFastPath(t *testing.T) {
	cases := []string{"0", "-0", "1", "-1", "174.77", "0.1", "-0.000", "123456789012345", "999999999999999.9",
		"1234567890123456", "0.30000000000000004", "100", "100.0", "100.00000000000001", "9007199254740993",
		"1.", ".5", "01", "-", "", "1e2", "1E-2", "--1", "1.2.3", "1x", "00", "-01.5", "0.", "7.000000000000001"}
	rng := rand.New(rand.NewPCG(1, 5))
	for range 20000 {
		digits := 1 + rng.IntN(16)
		s := strconv.FormatUint(rng.Uint64()%uint64(math.Pow10(digits)), 10)
		if k := rng.IntN(len(s) + 1); k > 0 && k < len(s) {
			s = s[:k] + "." + s[k:]
		}
		if rng.IntN(2) == 0 {
			s = "-" + s
		}
		cases = append(cases, s)
	}
	for _, c := range cases {
		x, ok := ParseNumber([]byte(c))
		wx, wok := parseNumber([]byte(c))
		if ok != wok || math.Float64bits(x) != math.Float64bits(wx) {
			t.Fatalf("ParseNumber(%q) = %v, %v; without the fast path: %v, %v", c, x, ok, wx, wok)
		}
	}
}
