package jobspec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const joinGood = `name: j
nodes:
  - name: bids
    source: {file: {path: bids.jsonl, timestamp_field: ts}}
  - name: auctions
    source: {file: {path: auctions.jsonl, timestamp_field: ts}}
  - name: joined
    input: [bids, auctions]
    join:
      left_key: auction
      right_key: id
      interval: {lower: -5s, upper: 10s, upper_inclusive: false}
  - name: out
    input: joined
    sink: {stdout: {}}
`

func TestParseJoin(t *testing.T) {
	s, err := Parse([]byte(joinGood), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := s.Node("joined")
	if !n.Keyed() || n.Kind() != "join" || n.InputKey(0) != "auction" || n.InputKey(1) != "id" {
		t.Fatalf("join node: keyed %v kind %s keys %s/%s", n.Keyed(), n.Kind(), n.InputKey(0), n.InputKey(1))
	}
	iv := n.Join.Interval
	if iv.Lower.D() != -5*time.Second || iv.Upper.D() != 10*time.Second || iv.LowerInclusive != nil || *iv.UpperInclusive {
		t.Fatalf("interval = %+v", iv)
	}
	w, err := Parse([]byte(strings.Replace(joinGood, "interval: {lower: -5s, upper: 10s, upper_inclusive: false}", "window: {sliding: {size: 10s, slide: 5s}}", 1)), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sl := w.Node("joined").Join.Window.Sliding; sl == nil || sl.Size.D() != 10*time.Second {
		t.Fatalf("window = %+v", w.Node("joined").Join.Window)
	}
}

func TestParseJoinErrors(t *testing.T) {
	const iv = "interval: {lower: -5s, upper: 10s, upper_inclusive: false}"
	tests := []struct{ name, spec, want string }{
		{"one input", strings.Replace(joinGood, "input: [bids, auctions]", "input: [bids]", 1) + "  - {name: o2, input: auctions, sink: {stdout: {}}}\n",
			`job.yaml:7: node "joined": a join needs exactly two inputs, input: [left, right] (it has 1)`},
		{"three inputs", strings.Replace(joinGood, "input: [bids, auctions]", "input: [bids, auctions, bids2]", 1) + "  - {name: bids2, source: {file: {path: x}}}\n",
			`a join needs exactly two inputs, input: [left, right] (it has 3)`},
		{"missing right key", strings.Replace(joinGood, "      right_key: id\n", "", 1), `node "joined": a join needs join.left_key and join.right_key`},
		{"key_by on a join", strings.Replace(joinGood, "    join:\n", "    key_by: auction\n    join:\n", 1), `node "joined": a join is keyed by join.left_key and join.right_key, not key_by`},
		{"lower above upper", strings.Replace(joinGood, iv, "interval: {lower: 10s, upper: -5s}", 1), `node "joined": join.interval lower 10s is above upper -5s`},
		{"empty exclusive", strings.Replace(joinGood, iv, "interval: {lower: 0s, upper: 0s, lower_inclusive: false}", 1), `holds no millisecond`},
		{"both kinds", strings.Replace(joinGood, iv, iv+"\n      window: {tumbling: 1s}", 1), `join must have exactly one of interval or window`},
		{"neither kind", strings.Replace(joinGood, "      "+iv+"\n", "", 1), `join must have exactly one of interval or window`},
		{"global window", strings.Replace(joinGood, iv, "window: {global: {trigger: {count: 2}}}", 1), `a window join takes a tumbling, sliding or session window`},
		{"zero gap", strings.Replace(joinGood, iv, "window: {session: {gap: 0s}}", 1), `join.window session gap must be at least 1ms`},
		{"slide above size", strings.Replace(joinGood, iv, "window: {sliding: {size: 1s, slide: 2s}}", 1), `join.window sliding slide 2s is larger than its size 1s`},
		{"bad bound", strings.Replace(joinGood, "lower: -5s", "lower: -soon", 1), `"-soon" is not a duration`},
		{"typo", strings.Replace(joinGood, "left_key", "left_kye", 1), `unknown field "left_kye" in node "joined".join (did you mean "left_key"?)`},
		{"join and wasm", strings.Replace(joinGood, "    join:\n", "    wasm: {module: x.wasm}\n    join:\n", 1), `must have exactly one of source, wasm, window, join or sink (it has 2)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.spec), "job.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// TestDiffJoin checks that an upgrade refuses a change of a join: its
// bounds, or the order of its inputs (which decides the sides).
func TestDiffJoin(t *testing.T) {
	old, err := Parse([]byte(joinGood), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ edited, want string }{
		"bounds":  {strings.Replace(joinGood, "upper: 10s", "upper: 20s", 1), `node joined: its join changed`},
		"swapped": {strings.Replace(joinGood, "input: [bids, auctions]", "input: [auctions, bids]", 1), `node joined: join inputs changed from bids, auctions to auctions, bids`},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := Parse([]byte(tc.edited), "job.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Diff(old, n); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Diff error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	same, _ := Parse([]byte(joinGood), "job.yaml")
	if _, err := Diff(old, same); err != nil {
		t.Fatalf("Diff of the same spec: %v", err)
	}
}
