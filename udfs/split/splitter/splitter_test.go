package splitter

import (
	"encoding/json"
	"strings"
	"testing"
)

func split(t *testing.T, config, value string) []string {
	t.Helper()
	s, err := Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	s.Split([]byte(value), func(key, value []byte) {
		var v struct{ Word string }
		if err := json.Unmarshal(value, &v); err != nil || v.Word != string(key) {
			t.Fatalf("value %s does not carry the key %q (%v)", value, key, err)
		}
		words = append(words, string(key))
	})
	return words
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name, config, value string
		want                []string
	}{
		{"field", `{"field": "text"}`, `{"text": "Hello, World! 42"}`, []string{"Hello", "World", "42"}},
		{"lowercase", `{"field": "text", "lowercase": true}`, `{"text": "Hello WORLD k8S"}`, []string{"hello", "world", "k8s"}},
		{"lowercase false", `{"field": "text", "lowercase": false}`, `{"text": "Hi"}`, []string{"Hi"}},
		{"escapes decoded", `{"field": "text"}`, `{"text": "don\u0027t\nstop \u0041BC"}`, []string{"don", "t", "stop", "ABC"}},
		{"escaped separators", `{"field": "text"}`, `{"text": "a\tb\\c\"d"}`, []string{"a", "b", "c", "d"}},
		{"non-ascii separates", `{"field": "text"}`, `{"text": "café über😀x"}`, []string{"caf", "ber", "x"}},
		{"leading and trailing separators", `{"field": "text"}`, `{"text": "  --a--  "}`, []string{"a"}},
		{"empty text", `{"field": "text"}`, `{"text": ""}`, nil},
		{"only separators", `{"field": "text"}`, `{"text": " ,.;"}`, nil},
		{"first duplicate wins", `{"field": "text"}`, `{"text": "one", "text": "two"}`, []string{"one"}},
		{"escaped member name", `{"field": "text"}`, `{"t\u0065xt": "yes"}`, []string{"yes"}},
		{"missing field", `{"field": "text"}`, `{"body": "a b"}`, nil},
		{"field not a string", `{"field": "text"}`, `{"text": ["a", "b"]}`, nil},
		{"not an object", `{"field": "text"}`, `"a b"`, nil},
		{"malformed object", `{"field": "text"}`, `{"text": "a b",}`, nil},
		{"whole value", `{}`, `{"text": "Hi there"}`, []string{"text", "Hi", "there"}},
		{"whole value lowercase", `{"lowercase": true}`, "ABC\xffdef", []string{"abc", "def"}},
		{"empty field name", `{"field": ""}`, `{"": "x y"}`, []string{"x", "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := split(t, tc.config, tc.value)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ config, want string }{
		{`[]`, "split: config is not a JSON object"},
		{`{"field": "text",}`, "split: config is not valid JSON"},
		{`{"field": 1}`, "split: config: field must be a string"},
		{`{"lowercase": 1}`, "split: config: lowercase must be true or false"},
		{`{"field": "a", "field": "b"}`, `split: config: unknown or repeated key "field"`},
		{`{"lower": true}`, `split: config: unknown or repeated key "lower"`},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.config))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%s) = %v, want %q", tc.config, err, tc.want)
		}
	}
}

func TestSplitNoAllocations(t *testing.T) {
	s, err := Parse([]byte(`{"field": "text", "lowercase": true}`))
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(`{"id": 7, "text": "The quick brown fox jumps over the lazy dog, caf\u00e9!"}`)
	n := 0
	emit := func(key, value []byte) { n++ }
	s.Split(value, emit) // grow the scratch buffers once
	if a := testing.AllocsPerRun(100, func() { s.Split(value, emit) }); a != 0 {
		t.Errorf("%v allocations per Split", a)
	}
}

// FuzzSplit: untrusted values never panic, and every word is a non-empty
// run of ASCII letters and digits.
func FuzzSplit(f *testing.F) {
	f.Add(true, []byte(`{"text": "Hello, World"}`))
	f.Add(false, []byte("a\xffb"))
	s, err := Parse([]byte(`{"field": "text", "lowercase": true}`))
	if err != nil {
		f.Fatal(err)
	}
	whole, err := Parse([]byte(`{}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, field bool, value []byte) {
		op := whole
		if field {
			op = s
		}
		op.Split(value, func(key, _ []byte) {
			if len(key) == 0 {
				t.Fatal("empty word")
			}
			for _, c := range key {
				if !isWordByte(c) || field && c >= 'A' && c <= 'Z' {
					t.Fatalf("word %q", key)
				}
			}
		})
	})
}
