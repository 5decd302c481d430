package jsonscan

import (
	"strings"
	"testing"
)

// TestPathsFindAgainstLookup: for top-level paths, Find agrees with Lookup
// (the first member of the name, the whole object checked). abi's
// TestExtractAgainstEncodingJSON holds nested paths to encoding/json.
func TestPathsFindAgainstLookup(t *testing.T) {
	names := []string{"a", "b", "é", "", `q"`}
	paths := make([][]string, len(names))
	for j, n := range names {
		paths[j] = []string{n}
	}
	p := NewPaths(paths)
	spans := make([]int, 2*len(paths))
	for _, v := range []string{
		`{}`, `{"a":1,"a":2}`, ` {"b" : [1,{"a":3}] , "\u00e9":"x"} `, `{"":null,"q\"":true}`,
		`{"a":1,}`, `{"a":1} x`, `[{"a":1}]`, `{"a":"\x01"}`, `{"b":{"a":1}`, `{"\u0061":{"b":2},"a":0}`,
	} {
		valid := p.Find([]byte(v), spans)
		for j, n := range names {
			want, st := Lookup([]byte(v), []byte(n))
			if valid != (st != Malformed) {
				t.Fatalf("%s: Find valid %v, Lookup %v", v, valid, st)
			}
			got := ""
			if spans[2*j] >= 0 {
				got = v[spans[2*j] : spans[2*j]+spans[2*j+1]]
			}
			if got != string(want) {
				t.Errorf("%s path %q: Find %q, Lookup %q", v, n, got, want)
			}
		}
	}
}

func TestNewPathsRefuses(t *testing.T) {
	for _, paths := range [][][]string{{{}}, make([][]string, MaxPaths+1)} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "jsonscan:") {
					t.Errorf("NewPaths(%d paths): %v, want a panic", len(paths), r)
				}
			}()
			NewPaths(paths)
		}()
	}
}
