package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRunJoins runs interval and window joins of two file sources with
// `eddy run` (keyed over two subtasks) and compares the joined records
// with a brute-force join of the same files.
func TestRunJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	type rec struct {
		key string
		ts  int64
		id  int
	}
	rng := rand.New(rand.NewPCG(16, 2))
	base := int64(1_767_225_600_000)
	gen := func(n int, idBase int) []rec {
		var rs []rec
		clock := base
		for i := range n {
			clock += int64(rng.IntN(40))
			// Out of order by up to 50ms, within max_out_of_orderness: no
			// record is late, so every pair in range must come out.
			rs = append(rs, rec{key: fmt.Sprintf("k%d", rng.IntN(7)), ts: clock - int64(rng.IntN(50)), id: idBase + i})
		}
		return rs
	}
	left, right := gen(400, 0), gen(300, 10000)
	dir := t.TempDir()
	write := func(name string, rs []rec, keyField string) string {
		var b strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&b, `{"%s":"%s","ts":%d,"id":%d}`+"\n", keyField, r.key, r.ts, r.id)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lp, rp := write("bids.jsonl", left, "auction"), write("auctions.jsonl", right, "id_key")
	val := func(r rec, keyField string) string {
		return fmt.Sprintf(`{"%s":"%s","ts":%d,"id":%d}`, keyField, r.key, r.ts, r.id)
	}
	pair := func(l, r rec) string {
		return fmt.Sprintf(`{"left":%s,"right":%s}`, val(l, "auction"), val(r, "id_key"))
	}

	// sessionOf is the session (its end) a record's timestamp falls in:
	// per key, the timestamps of both sides in order, split where one is
	// beyond the end (last+gap) of the session so far.
	const gap = 100
	sessionEnd := map[string]map[int64]int64{}
	for _, key := range []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6"} {
		var tss []int64
		for _, r := range append(slices.Clone(left), right...) {
			if r.key == key {
				tss = append(tss, r.ts)
			}
		}
		slices.Sort(tss)
		sessionEnd[key] = map[int64]int64{}
		for i := 0; i < len(tss); {
			j, end := i, tss[i]+gap
			for j+1 < len(tss) && tss[j+1] <= end {
				j++
				end = max(end, tss[j]+gap)
			}
			for ; i <= j; i++ {
				sessionEnd[key][tss[i]] = end
			}
		}
	}

	tests := []struct {
		name string
		join string
		want func(l, r rec) bool
	}{
		{"session", fmt.Sprintf("window: {session: {gap: %dms}}", gap), func(l, r rec) bool {
			return sessionEnd[l.key][l.ts] == sessionEnd[r.key][r.ts]
		}},
		{"interval", "interval: {lower: -100ms, upper: 200ms, upper_inclusive: false}", func(l, r rec) bool {
			return l.ts-100 <= r.ts && r.ts < l.ts+200
		}},
		{"tumbling", "window: {tumbling: 500ms}", func(l, r rec) bool {
			return l.ts/500 == r.ts/500 // all timestamps are positive
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, out := inlineSpec(t, fmt.Sprintf(`name: join-%s
parallelism: 2
nodes:
  - name: bids
    parallelism: 1
    source: {file: {path: %s, timestamp_field: ts}}
    event_time: {max_out_of_orderness: 60ms}
  - name: auctions
    parallelism: 1
    source: {file: {path: %s, timestamp_field: ts}}
    event_time: {max_out_of_orderness: 60ms}
  - name: joined
    input: [bids, auctions]
    join:
      left_key: auction
      right_key: id_key
      %s
  - name: out
    parallelism: 1
    input: joined
    sink: {file: {path: $OUT/out.jsonl}}
`, tc.name, lp, rp, tc.join))
			r := eddy(t, "run", spec)
			if r.code != 0 {
				t.Fatalf("eddy run exited %d: %s", r.code, r.stderr)
			}
			var want []string
			for _, l := range left {
				for _, rr := range right {
					if l.key == rr.key && tc.want(l, rr) {
						want = append(want, pair(l, rr))
					}
				}
			}
			slices.Sort(want)
			got := sortedLines(t, filepath.Join(out, "out.jsonl"))
			if len(want) < 50 {
				t.Fatalf("only %d expected pairs: the data does not exercise the join", len(want))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d joined records, want %d\nfirst got  %.300q\nfirst want %.300q", len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
			}
		})
	}
}
