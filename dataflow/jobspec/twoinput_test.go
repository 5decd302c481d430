package jobspec

import (
	"errors"
	"strings"
	"testing"
)

const coGood = `name: co
nodes:
  - name: persons
    source: {file: {path: persons.jsonl}}
  - name: auctions
    source: {file: {path: auctions.jsonl}}
  - name: joined
    input: [persons, auctions]
    key_by: [id, seller]
    wasm: {module: regular-join@1}
  - name: out
    input: joined
    sink: {stdout: {}}
`

// TestParseTwoInput: a key_by list names a key per input (a two-input
// operator), a single key_by keeps a union, and key_by lists that do not
// fit the node are one-line errors with the node's line.
func TestParseTwoInput(t *testing.T) {
	s, err := Parse([]byte(coGood), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := s.Node("joined")
	if !n.Keyed() || !n.KeyBy.PerInput() || n.InputKey(0) != "id" || n.InputKey(1) != "seller" || n.KeyBy.String() != "[id, seller]" {
		t.Fatalf("two-input node: keyed %v, per input %v, keys %s/%s (%s)", n.Keyed(), n.KeyBy.PerInput(), n.InputKey(0), n.InputKey(1), n.KeyBy)
	}
	u, err := Parse([]byte(strings.Replace(coGood, "key_by: [id, seller]", "key_by: id", 1)), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := u.Node("joined"); n.KeyBy.PerInput() || n.InputKey(0) != "id" || n.InputKey(1) != "id" {
		t.Fatalf("union: per input %v, keys %s/%s", n.KeyBy.PerInput(), n.InputKey(0), n.InputKey(1))
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"three keys", "key_by: [id, seller]", "key_by: [id, seller, x]", `job.yaml:7: node "joined": key_by names 3 keys`},
		{"one input", "input: [persons, auctions]", "input: persons", `job.yaml:7: node "joined": key_by [id, seller] names a key per input, so the node needs two inputs`},
		{"typo", "key_by: [id, seller]", "keyby: [id, seller]", `job.yaml:9: unknown field "keyby" in node "joined" (did you mean "key_by"?)`},
		{"not a name", "key_by: [id, seller]", "key_by: [id, {a: b}]", `job.yaml:9: key_by must name key fields, not a mapping`},
		{"window", "    wasm: {module: regular-join@1}", "    window: {tumbling: 1m}\n    aggregate: count", `job.yaml:7: node "joined": a window has one key_by for all its inputs, not a list [id, seller]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(coGood, tc.from, tc.to, 1)), "job.yaml")
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v: want one line starting %q", err, tc.want)
			}
		})
	}
}
