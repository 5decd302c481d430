package ranking

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/abi/jsonscan"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, config string
		n            int
		field, err   string
	}{
		{"defaults", `{}`, 3, "amount", ""},
		{"documented", `{"n": 3, "field": "amount"}`, 3, "amount", ""},
		{"escaped", `{"\u006e": 5e0, "field": "a\"b"}`, 5, `a"b`, ""},
		{"largest", `{"n": 10000}`, 10000, "amount", ""},
		{"not an object", `[]`, 0, "", "top-n: config is not a JSON object"},
		{"malformed", `{"n": 1,}`, 0, "", "top-n: config is not valid JSON"},
		{"zero", `{"n": 0}`, 0, "", "top-n: config: n must be a whole number from 1 to 10000"},
		{"fraction", `{"n": 2.5}`, 0, "", "top-n: config: n must be a whole number from 1 to 10000"},
		{"too many", `{"n": 10001}`, 0, "", "top-n: config: n must be a whole number from 1 to 10000"},
		{"field a number", `{"field": 1}`, 0, "", "top-n: config: field must be a string"},
		{"repeated", `{"n": 1, "n": 1}`, 0, "", `top-n: config: unknown or repeated key "n"`},
		{"unknown", `{"top": 1}`, 0, "", `top-n: config: unknown or repeated key "top"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.config))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || c.N != tc.n || string(c.Field) != tc.field {
				t.Fatalf("%d %q, %v; want %d %q", c.N, c.Field, err, tc.n, tc.field)
			}
		})
	}
}

func elemsOf(values ...string) []abi.Record {
	var elems []abi.Record
	for _, v := range values {
		elems = append(elems, abi.Record{Value: []byte(v)})
	}
	return elems
}

func TestTop(t *testing.T) {
	elems := elemsOf(`{"amount": 1}`, `{"amount": 3}`, `{"x": 9}`, `{"amount": 3}`, `{"amount": "9"}`,
		`{"amount": -1e400}`, `not json`, `{"amount": 2}`, `{"amount": 1e400}`, `{"amount": -1e400}`)
	tests := []struct {
		n    int
		want []int
	}{
		{1, []int{8}},
		{3, []int{8, 1, 3}},
		{5, []int{8, 1, 3, 7, 0}},
		{100, []int{8, 1, 3, 7, 0, 5, 9}},
	}
	for _, tc := range tests {
		r := New(Config{N: tc.n, Field: []byte("amount")})
		if got := r.Top(elems); !slices.Equal(got, tc.want) {
			t.Errorf("n %d: %v, want %v", tc.n, got, tc.want)
		}
	}
	if got := New(Config{N: 3, Field: []byte("amount")}).Top(nil); len(got) != 0 {
		t.Errorf("no elements: %v", got)
	}
}

// TestTopAgainstSort checks the heap against sorting every element.
func TestTopAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		var values []string
		for range rng.IntN(200) {
			values = append(values, fmt.Sprintf(`{"amount": %d}`, rng.IntN(20)-5))
		}
		elems := elemsOf(values...)
		n := 1 + rng.IntN(30)
		var all []candidate
		for i, e := range elems {
			f, _ := jsonscan.Lookup(e.Value, []byte("amount"))
			v, _ := jsonscan.ParseNumber(f)
			all = append(all, candidate{v, i})
		}
		slices.SortStableFunc(all, func(a, b candidate) int {
			switch {
			case a.v > b.v:
				return -1
			case a.v < b.v:
				return 1
			}
			return 0
		})
		var want []int
		for _, c := range all[:min(n, len(all))] {
			want = append(want, c.i)
		}
		if got := New(Config{N: n, Field: []byte("amount")}).Top(elems); !slices.Equal(got, want) {
			t.Fatalf("n %d of %d: %v, want %v", n, len(elems), got, want)
		}
	}
}

func TestAppendOutput(t *testing.T) {
	got := AppendOutput(nil, []byte("a\"b"), -5, 60000, 2, []byte(" \n{\"amount\": 1}\t"))
	want := `{"key":"a\"b","window_start":-5,"window_end":60000,"rank":2,"value":{"amount": 1}}`
	if string(got) != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

func TestTopNoAllocations(t *testing.T) {
	var values []string
	for i := range 100 {
		values = append(values, fmt.Sprintf(`{"card": "c%d", "amount": %d}`, i, i*7%31))
	}
	elems := elemsOf(values...)
	r := New(Config{N: 5, Field: []byte("amount")})
	r.Top(elems)
	out := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(50, func() {
		for rank, i := range r.Top(elems) {
			out = AppendOutput(out[:0], []byte("k"), 0, 1, rank+1, elems[i].Value)
		}
	}); n != 0 {
		t.Errorf("%v allocations per window", n)
	}
}
