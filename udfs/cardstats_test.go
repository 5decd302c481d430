package udfs_test

// The card-stats aggregate (ABI version 3): its Go and C modules, driven
// through this package's harness (several groups per batch, as ABI.md
// allows) and through the real host (cardstatshost_test.go), must produce
// the same bytes as package stats, for every accumulator and result.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/udfs/cardstats/stats"
)

// addGroup and mergeGroup are the groups of eddy_agg_add and
// eddy_agg_merge: an accumulator to start from and what to fold into it.
type addGroup struct {
	acc  []byte
	recs []abi.Record
}

type mergeGroup struct {
	acc    []byte
	others [][]byte
}

// aggregator is one implementation of an aggregate: native, or a module
// driven by the harness or by the host. Every method fails the test on an
// error; the results are the implementation's to keep (copies).
type aggregator interface {
	create(t testing.TB) []byte
	add(t testing.TB, groups []addGroup) [][]byte
	merge(t testing.TB, groups []mergeGroup) [][]byte
	result(t testing.TB, accs [][]byte) [][]byte
}

// nativeStats is package stats.
type nativeStats struct{ scratch []byte }

func (n *nativeStats) create(testing.TB) []byte { return stats.AppendEmpty(nil) }

func (n *nativeStats) add(t testing.TB, groups []addGroup) [][]byte {
	var out [][]byte
	for _, g := range groups {
		acc := g.acc
		for _, r := range g.recs {
			next, scratch, err := stats.AddValue(nil, acc, r.Value, n.scratch)
			if err != nil {
				t.Fatal(err)
			}
			acc, n.scratch = next, scratch
		}
		out = append(out, bytes.Clone(acc))
	}
	return out
}

func (n *nativeStats) merge(t testing.TB, groups []mergeGroup) [][]byte {
	var out [][]byte
	for _, g := range groups {
		acc := g.acc
		for _, o := range g.others {
			next, err := stats.Merge(nil, acc, o)
			if err != nil {
				t.Fatal(err)
			}
			acc = next
		}
		out = append(out, bytes.Clone(acc))
	}
	return out
}

func (n *nativeStats) result(t testing.TB, accs [][]byte) [][]byte {
	var out [][]byte
	for _, a := range accs {
		r, err := stats.AppendResult(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// harnessAgg is a module under this package's harness: one call per step,
// with all of the step's groups in one batch.
type harnessAgg struct{ g *guest }

func groupHeader(acc []byte, n int) abi.Record {
	return abi.Record{Key: binary.LittleEndian.AppendUint32(nil, uint32(n)), Value: acc, Timestamp: abi.NoTimestamp}
}

// aggCall writes recs as one batch (none for eddy_agg_create), calls
// export and returns the values the guest emitted, or the call's failure.
func (g *guest) aggCall(export string, recs []abi.Record) ([][]byte, error) {
	g.t.Helper()
	g.calls.records = nil
	var res []uint64
	if export == abi.ExportAggCreate {
		res = g.call(export)
	} else {
		batch := abi.AppendBatch(nil, recs)
		ptr := g.write(batch)
		res = g.call(export, uint64(ptr), uint64(len(batch)))
	}
	if err := g.status(export, res); err != nil {
		return nil, err
	}
	var out [][]byte
	for _, r := range g.calls.records {
		out = append(out, r.Value)
	}
	return out, nil
}

func (h harnessAgg) must(t testing.TB, export string, recs []abi.Record, want int) [][]byte {
	t.Helper()
	out, err := h.g.aggCall(export, recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != want {
		t.Fatalf("%s emitted %d records, want %d", export, len(out), want)
	}
	return out
}

func (h harnessAgg) create(t testing.TB) []byte {
	return h.must(t, abi.ExportAggCreate, nil, 1)[0]
}

func (h harnessAgg) add(t testing.TB, groups []addGroup) [][]byte {
	var recs []abi.Record
	for _, g := range groups {
		recs = append(append(recs, groupHeader(g.acc, len(g.recs))), g.recs...)
	}
	return h.must(t, abi.ExportAggAdd, recs, len(groups))
}

func (h harnessAgg) merge(t testing.TB, groups []mergeGroup) [][]byte {
	var recs []abi.Record
	for _, g := range groups {
		recs = append(recs, groupHeader(g.acc, len(g.others)))
		for _, o := range g.others {
			recs = append(recs, abi.Record{Value: o, Timestamp: abi.NoTimestamp})
		}
	}
	return h.must(t, abi.ExportAggMerge, recs, len(groups))
}

func (h harnessAgg) result(t testing.TB, accs [][]byte) [][]byte {
	var recs []abi.Record
	for i, a := range accs {
		recs = append(recs, abi.Record{Key: []byte(fmt.Sprint("card-", i)), Value: a, Timestamp: int64(i)*60_000 - 1})
	}
	return h.must(t, abi.ExportAggResult, recs, len(accs))
}

// cardCountries are the countries of the generated transactions: the
// generator's, one spelled with an escape (the same as "DE" once
// unescaped), the empty one, and the longest that counts.
var cardCountries = []string{`"DE"`, `"FR"`, `"NL"`, `"US"`, `"GB"`, `"D\u0045"`, `""`, `"é"`, `"` + strings.Repeat("x", stats.MaxCountryLen) + `"`}

// cardAmounts are amounts as the generator writes them, and the awkward
// ones: rounding to cents, negative, not numbers; hugeAmounts are at and
// beyond the largest that counts.
var (
	cardAmounts = []string{
		"12.34", "0.01", "199.99", "4999.99", "1000.00", "5", "-5.00", "-0.01", "0", "-0",
		"12.345", "0.005", "-0.005", "1.005", "0.125", "2.675", "1e2", "1E-2", "9.99e-1", `"12.34"`, "null",
	}
	hugeAmounts = []string{"90071992547409.92", "90071992547409.93", "-90071992547409.92", "1e20", "1e400", "-1e400"}
)

// genCardTxns makes transactions in the generator's shape (see
// connectors/generator.go) with the awkward cases mixed in.
func genCardTxns(rng *rand.Rand, n int) []abi.Record {
	recs := make([]abi.Record, n)
	ts := int64(1767225600000)
	for i := range recs {
		ts += rng.Int64N(1000)
		card := fmt.Sprintf("card-%04d", rng.IntN(20))
		amount := fmt.Sprintf("%d.%02d", rng.IntN(5000), rng.IntN(100))
		switch rng.IntN(100) {
		case 0:
			amount = pick(rng, hugeAmounts)
		case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10:
			amount = pick(rng, cardAmounts)
		}
		country := pick(rng, cardCountries[:5])
		if rng.IntN(4) == 0 {
			country = pick(rng, cardCountries)
		}
		value := fmt.Sprintf(`{"card":"%s","amount":%s,"country":%s,"merchant":"m-%03d","ts":%d}`, card, amount, country, rng.IntN(1000), ts)
		switch rng.IntN(30) {
		case 0:
			value = fmt.Sprintf(`{"card":"%s","amount":%s}`, card, amount) // no country
		case 1:
			value = fmt.Sprintf(`{"card":"%s","amount":%s,"country":49}`, card, amount)
		case 2:
			value = fmt.Sprintf(`{"card":"%s","amount":1,"country":"%s"}`, card, strings.Repeat("y", stats.MaxCountryLen+1))
		case 3:
			value = pick(rng, malformed)
		case 4:
			value = fmt.Sprintf(` { "country" : %s , "amount" : %s, "amount": "dup" } `, country, amount)
		}
		recs[i] = abi.Record{Key: []byte(card), Value: []byte(value), Timestamp: ts}
	}
	return recs
}

// checkSame fails the test unless every implementation gave the same
// values as the first (native) one.
func checkSame(t testing.TB, step string, names []string, outs [][][]byte) {
	t.Helper()
	for k := 1; k < len(outs); k++ {
		if len(outs[k]) != len(outs[0]) {
			t.Fatalf("%s: %s gave %d values, %s %d", step, names[k], len(outs[k]), names[0], len(outs[0]))
		}
		for i := range outs[0] {
			if !bytes.Equal(outs[k][i], outs[0][i]) {
				t.Fatalf("%s: value %d of %s differs from %s:\n got  %q\n want %q", step, i, names[k], names[0], outs[k][i], outs[0][i])
			}
		}
	}
}

// runAggScenario drives every implementation through the same random
// sequence of calls (decided by rng alone) and checks at each step that
// they agree to the byte. The windows' records are split into panes, each
// folded from the empty accumulator in random chunks, several panes per
// call; the panes are then merged in random trees, with empty
// accumulators mixed in, and each tree must give the same accumulator as
// folding all the records in one group: merging is associative and the
// empty accumulator its identity.
func runAggScenario(t testing.TB, rng *rand.Rand, recs []abi.Record, names []string, impls []aggregator) {
	t.Helper()
	step := func(name string, f func(a aggregator) [][]byte) [][]byte {
		t.Helper()
		outs := make([][][]byte, len(impls))
		for k, a := range impls {
			outs[k] = f(a)
		}
		checkSame(t, name, names, outs)
		return outs[0]
	}
	empty := step("create", func(a aggregator) [][]byte { return [][]byte{a.create(t)} })[0]
	if !bytes.Equal(empty, stats.AppendEmpty(nil)) {
		t.Fatalf("create = %x", empty)
	}

	// Panes: contiguous runs of the records, some empty.
	var panes [][]abi.Record
	for rest := recs; len(rest) > 0; {
		n := min(rng.IntN(40), len(rest))
		panes = append(panes, rest[:n])
		rest = rest[n:]
	}
	accs := make([][]byte, len(panes))
	left := make([][]abi.Record, len(panes))
	for i := range panes {
		accs[i], left[i] = empty, panes[i]
	}
	for round := 0; ; round++ {
		var groups []addGroup
		var which []int
		for i := range panes {
			if len(left[i]) == 0 && rng.IntN(8) > 0 {
				continue
			}
			n := min(rng.IntN(12), len(left[i]))
			groups = append(groups, addGroup{acc: accs[i], recs: left[i][:n]})
			which = append(which, i)
			left[i] = left[i][n:]
		}
		if len(groups) == 0 {
			break
		}
		out := step(fmt.Sprintf("add round %d", round), func(a aggregator) [][]byte { return a.add(t, groups) })
		for k, i := range which {
			accs[i] = out[k]
		}
		done := true
		for i := range left {
			done = done && len(left[i]) == 0
		}
		if done {
			break
		}
	}
	whole := step("add all", func(a aggregator) [][]byte { return a.add(t, []addGroup{{acc: empty, recs: recs}}) })[0]

	// Merge trees: a left fold in one group, pairs round by round, and a
	// random mix, each with empty accumulators inserted at random.
	withEmpties := func(list [][]byte) [][]byte {
		var out [][]byte
		for _, a := range list {
			if rng.IntN(5) == 0 {
				out = append(out, empty)
			}
			out = append(out, a)
		}
		return out
	}
	fold := withEmpties(accs)
	oneGroup := step("merge in one group", func(a aggregator) [][]byte {
		return a.merge(t, []mergeGroup{{acc: fold[0], others: fold[1:]}})
	})[0]
	level := withEmpties(accs)
	for round := 0; len(level) > 1; round++ {
		var groups []mergeGroup
		for i := 0; i < len(level); {
			n := 1 + rng.IntN(min(3, len(level)-i))
			groups = append(groups, mergeGroup{acc: level[i], others: level[i+1 : i+n]})
			i += n
		}
		level = step(fmt.Sprintf("merge round %d", round), func(a aggregator) [][]byte { return a.merge(t, groups) })
	}
	if !bytes.Equal(oneGroup, whole) || !bytes.Equal(level[0], whole) {
		t.Fatalf("merging is not associative: one group %x, a tree %x, all records in one group %x", oneGroup, level[0], whole)
	}
	for _, acc := range [][]byte{whole, accs[rng.IntN(len(accs))]} {
		ident := step("merge with empty", func(a aggregator) [][]byte {
			return a.merge(t, []mergeGroup{{acc: empty, others: [][]byte{acc}}, {acc: acc, others: [][]byte{empty, empty}}})
		})
		if !bytes.Equal(ident[0], acc) || !bytes.Equal(ident[1], acc) {
			t.Fatalf("the empty accumulator is not the identity of merge: %x and %x from %x", ident[0], ident[1], acc)
		}
	}
	res := step("result", func(a aggregator) [][]byte { return a.result(t, append([][]byte{empty, whole}, accs...)) })
	t.Logf("%d records in %d panes: %s", len(recs), len(panes), res[1])
}

func TestCardStats(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			recs := genCardTxns(rng, 50+rng.IntN(400))
			names := []string{"native"}
			impls := []aggregator{&nativeStats{}}
			for _, lang := range modules {
				g := newGuest(t, "card-stats-"+lang)
				if err := g.open([]byte(`{}`)); err != nil {
					t.Fatal(err)
				}
				names = append(names, "card-stats-"+lang)
				impls = append(impls, harnessAgg{g})
			}
			runAggScenario(t, rng, recs, names, impls)
		})
	}
}

// TestCardStatsResults pins a few results, so that the three
// implementations cannot agree on something wrong.
func TestCardStatsResults(t *testing.T) {
	txn := func(amount, country string) abi.Record {
		return abi.Record{Value: []byte(`{"card":"card-1","amount":` + amount + `,"country":"` + country + `"}`)}
	}
	cases := []struct {
		recs []abi.Record
		want string
	}{
		{nil, `{"n":0,"total":"0.00","max":null,"countries":0}`},
		{[]abi.Record{txn("12.34", "DE")}, `{"n":1,"total":"12.34","max":"12.34","countries":1}`},
		{[]abi.Record{txn("12.34", "DE"), txn("40", "FR"), txn("6.15", "DE")}, `{"n":3,"total":"58.49","max":"40.00","countries":2}`},
		{[]abi.Record{txn("-5", "DE"), txn("-0.5", "D\\u0045")}, `{"n":2,"total":"-5.50","max":"-0.50","countries":1}`},
		{[]abi.Record{txn("0.005", "DE"), txn("0.004", "DE"), txn("1.005", "US")}, `{"n":3,"total":"1.01","max":"1.00","countries":2}`},
		{[]abi.Record{txn("1e20", "DE"), {Value: []byte(`{"amount":1}`)}, txn("0.07", "")}, `{"n":1,"total":"0.07","max":"0.07","countries":1}`},
	}
	for _, lang := range modules {
		g := newGuest(t, "card-stats-"+lang)
		if err := g.open([]byte(" { } ")); err != nil {
			t.Fatal(err)
		}
		h := harnessAgg{g}
		empty := h.create(t)
		for i, tc := range cases {
			acc := h.add(t, []addGroup{{acc: empty, recs: tc.recs}})[0]
			if got := h.result(t, [][]byte{acc})[0]; string(got) != tc.want {
				t.Errorf("%s case %d: %s, want %s", lang, i, got, tc.want)
			}
		}
	}
}

// TestCardStatsWrap merges accumulators whose sum leaves the int64 range:
// it wraps around the same way in both languages.
func TestCardStatsWrap(t *testing.T) {
	acc := func(n uint64, sum, top int64) []byte {
		b := binary.AppendUvarint([]byte{stats.Format}, n)
		b = binary.AppendVarint(b, sum)
		return append(binary.AppendVarint(b, top), 2, 'D', 'E')
	}
	const maxInt64 = 1<<63 - 1
	a, b := acc(1, maxInt64, maxInt64), acc(2, 1, -5)
	for _, lang := range modules {
		g := newGuest(t, "card-stats-"+lang)
		if err := g.open([]byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		h := harnessAgg{g}
		m := h.merge(t, []mergeGroup{{acc: a, others: [][]byte{b}}})[0]
		if want := acc(3, -1<<63, maxInt64); !bytes.Equal(m, want) {
			t.Errorf("%s: merge = %x, want %x", lang, m, want)
		}
		want := `{"n":3,"total":"-92233720368547758.08","max":"92233720368547758.07","countries":1}`
		if got := h.result(t, [][]byte{m})[0]; string(got) != want {
			t.Errorf("%s: result %s, want %s", lang, got, want)
		}
	}
}

// badAccumulators do not decode; the message is package stats's.
var badAccumulators = [][]byte{
	{},
	{2, 0, 0, 0},
	{1, 0x80},
	{1, 0, 0},
	{1, 0x80, 0, 0, 0}, // a varint longer than necessary
	{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0}, // overflows 64 bits
	{1, 0, 2, 0},                           // a sum without records
	{1, 1, 2, 2},                           // a record without a country
	{1, 1, 2, 2, 2, 'D', 'E', 2, 'F', 'R'}, // more countries than records
	{1, 2, 2, 2, 2, 'F', 'R', 2, 'D', 'E'}, // out of order
	{1, 2, 2, 2, 2, 'D', 'E', 2, 'D', 'E'}, // a duplicate
	{1, 1, 2, 2, 3, 'D', 'E'},              // truncated
}

func TestCardStatsBadAccumulators(t *testing.T) {
	good := stats.AppendEmpty(nil)
	txn := abi.Record{Value: []byte(`{"amount":1.5,"country":"DE"}`)}
	for _, lang := range modules {
		g := newGuest(t, "card-stats-"+lang)
		if err := g.open([]byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		for _, bad := range badAccumulators {
			_, want := stats.Decode(bad)
			if want == nil {
				t.Fatalf("stats.Decode accepts %x", bad)
			}
			calls := map[string][]abi.Record{
				"add":          {groupHeader(bad, 1), txn},
				"add ignored":  {groupHeader(bad, 1), {Value: []byte("not a transaction")}},
				"merge":        {groupHeader(good, 1), {Value: bad}},
				"merge header": {groupHeader(bad, 2), {Value: good}, {Value: good}},
				"result":       {{Key: []byte("k"), Value: bad}},
			}
			for what, recs := range calls {
				export := map[string]string{"add": abi.ExportAggAdd, "add ignored": abi.ExportAggAdd, "merge": abi.ExportAggMerge,
					"merge header": abi.ExportAggMerge, "result": abi.ExportAggResult}[what]
				out, err := g.aggCall(export, recs)
				if err == nil || !strings.HasSuffix(err.Error(), ": "+want.Error()) {
					t.Errorf("%s: %s of %x: %v (emitted %q), want the message %q", lang, what, bad, err, out, want)
				}
				if len(g.calls.records) != 0 {
					t.Errorf("%s: %s of %x: a failed call emitted %d records", lang, what, bad, len(g.calls.records))
				}
			}
		}
		// The instance is still usable.
		if acc := (harnessAgg{g}).add(t, []addGroup{{acc: good, recs: []abi.Record{txn}}})[0]; len(acc) == 0 {
			t.Fatalf("%s: add after the failures: %x", lang, acc)
		}
	}
}

// TestAggregateSDKs checks what the SDKs do around the aggregate: config
// errors, groups that do not add up, and eddy_process, which an aggregate
// module refuses.
func TestAggregateSDKs(t *testing.T) {
	for _, config := range []string{`nope`, `[]`, `{"n": 1}`, `{`, `{"x":}`} {
		want := stats.Parse([]byte(config))
		if want == nil {
			t.Fatalf("stats.Parse accepts %s", config)
		}
		for _, lang := range modules {
			g := newGuest(t, "card-stats-"+lang)
			if err := g.open([]byte(config)); err == nil || !strings.HasSuffix(err.Error(), ": "+want.Error()) {
				t.Errorf("%s: open(%s) = %v, want %q", lang, config, err, want)
			}
		}
	}
	empty := stats.AppendEmpty(nil)
	txn := abi.Record{Key: []byte("card"), Value: []byte(`{"amount":1,"country":"DE"}`), Timestamp: 5}
	cases := []struct {
		name, export string
		recs         []abi.Record
		want         string
	}{
		{"header key", abi.ExportAggAdd, []abi.Record{{Key: []byte("abc"), Value: empty}, txn},
			"aggregate: eddy_agg_add: record 0 should be a group header, with a 4-byte key, but its key has 3 bytes"},
		{"second header key", abi.ExportAggMerge, []abi.Record{groupHeader(empty, 1), {Value: empty}, {Value: empty}},
			"aggregate: eddy_agg_merge: record 2 should be a group header, with a 4-byte key, but its key has 0 bytes"},
		{"too many members", abi.ExportAggAdd, []abi.Record{groupHeader(empty, 0), groupHeader(empty, 3), txn, txn},
			"aggregate: eddy_agg_add: the group header at record 1 announces 3 records, but only 2 follow"},
		{"count overflow", abi.ExportAggMerge, []abi.Record{groupHeader(empty, 1<<32-1), {Value: empty}},
			"aggregate: eddy_agg_merge: the group header at record 0 announces 4294967295 records, but only 1 follow"},
	}
	for _, lang := range modules {
		t.Run(lang, func(t *testing.T) {
			g := newGuest(t, "card-stats-"+lang)
			if err := g.open([]byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			for _, tc := range cases {
				out, err := g.aggCall(tc.export, tc.recs)
				if err == nil || !strings.HasSuffix(err.Error(), ": "+tc.want) {
					t.Errorf("%s: %v (emitted %q), want %q", tc.name, err, out, tc.want)
				}
			}
			// An empty batch owes nothing; a group of no members gives its
			// accumulator back, whatever it is.
			if out, err := g.aggCall(abi.ExportAggAdd, nil); err != nil || len(out) != 0 {
				t.Errorf("empty batch: %q, %v", out, err)
			}
			if out, err := g.aggCall(abi.ExportAggMerge, []abi.Record{groupHeader([]byte("any"), 0), groupHeader(nil, 0)}); err != nil ||
				len(out) != 2 || string(out[0]) != "any" || len(out[1]) != 0 {
				t.Errorf("groups without members: %q, %v", out, err)
			}
			bad := abi.AppendBatch(nil, []abi.Record{groupHeader(empty, 0)})
			bad[0] ^= 0xff
			ptr := g.write(bad)
			if err := g.status(abi.ExportAggAdd, g.call(abi.ExportAggAdd, uint64(ptr), uint64(len(bad)))); err == nil || !strings.Contains(err.Error(), "malformed") {
				t.Errorf("bad magic: %v", err)
			}
			if err := g.status(abi.ExportAggResult, g.call(abi.ExportAggResult, uint64(ptr)+1<<20, 8)); err == nil || !strings.Contains(err.Error(), "not inside the buffer") {
				t.Errorf("batch outside the input buffer: %v", err)
			}
			for _, recs := range [][]abi.Record{{txn}, nil} {
				if err := g.process(recs); err == nil || !strings.Contains(err.Error(), "is an aggregate module") {
					t.Errorf("eddy_process of %d records: %v", len(recs), err)
				}
			}
			if err := g.close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
}

// FuzzCardStats hands arbitrary accumulators and values to the Go and C
// modules: each call must succeed with the bytes of package stats, or
// fail with its message, never trap. The seeds run with plain go test.
func FuzzCardStats(f *testing.F) {
	good := stats.AppendEmpty(nil)
	for _, r := range genCardTxns(rand.New(rand.NewPCG(5, 5)), 20) {
		f.Add(good, good, r.Value)
	}
	for _, bad := range badAccumulators {
		f.Add(bad, good, []byte(`{"amount":1,"country":"DE"}`))
	}
	var guests []*guest
	for _, lang := range modules {
		g := newGuest(f, "card-stats-"+lang)
		if err := g.open([]byte(`{}`)); err != nil {
			f.Fatal(err)
		}
		guests = append(guests, g)
	}
	f.Fuzz(func(t *testing.T, a, b, value []byte) {
		added, _, addErr := stats.AddValue(nil, a, value, nil)
		merged, mergeErr := stats.Merge(nil, a, b)
		result, resultErr := stats.AppendResult(nil, a)
		calls := []struct {
			export string
			recs   []abi.Record
			want   []byte
			err    error
		}{
			{abi.ExportAggAdd, []abi.Record{groupHeader(a, 1), {Value: value}}, added, addErr},
			{abi.ExportAggMerge, []abi.Record{groupHeader(a, 1), {Value: b}}, merged, mergeErr},
			{abi.ExportAggResult, []abi.Record{{Value: a}}, result, resultErr},
		}
		for _, g := range guests {
			g.t = t
			for _, c := range calls {
				out, err := g.aggCall(c.export, c.recs)
				switch {
				case c.err != nil:
					if err == nil || !strings.HasSuffix(err.Error(), ": "+c.err.Error()) {
						t.Fatalf("%s(%x, %x, %q) = %q, %v; want the error %v", c.export, a, b, value, out, err, c.err)
					}
				case err != nil || len(out) != 1 || !bytes.Equal(out[0], c.want):
					t.Fatalf("%s(%x, %x, %q) = %q, %v; want %q", c.export, a, b, value, out, err, c.want)
				}
			}
		}
	})
}

// BenchmarkCardStats folds one batch of 256 generator transactions into an
// accumulator, natively and through the Go and C modules, reporting ns per
// record (for the modules including the boundary: writing the batch into
// guest memory, the call, decoding the emitted accumulator).
func BenchmarkCardStats(b *testing.B) {
	var recs []abi.Record
	for i := range 256 {
		v := fmt.Sprintf(`{"card":"card-%04d","amount":%d.%02d,"country":"%s","merchant":"m-%03d","ts":%d}`,
			i%50, 1+i*37%500, i%100, []string{"DE", "FR", "NL", "US", "GB"}[i*7%5], i%1000, 1767225600000+int64(i)*100)
		recs = append(recs, abi.Record{Key: []byte(fmt.Sprintf("card-%04d", i%50)), Value: []byte(v), Timestamp: 1767225600000 + int64(i)*100})
	}
	empty := stats.AppendEmpty(nil)
	b.Run("native", func(b *testing.B) {
		var bufs [2][]byte
		var scratch []byte
		for b.Loop() {
			acc := empty
			for i, r := range recs {
				out, s, err := stats.AddValue(bufs[i%2][:0], acc, r.Value, scratch)
				if err != nil {
					b.Fatal(err)
				}
				bufs[i%2], scratch, acc = out, s, out
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
	batch := abi.AppendBatch(nil, append([]abi.Record{groupHeader(empty, len(recs))}, recs...))
	for _, lang := range modules {
		b.Run(lang, func(b *testing.B) {
			g := newGuest(b, "card-stats-"+lang)
			g.calls.discard = true
			if err := g.open([]byte(`{}`)); err != nil {
				b.Fatal(err)
			}
			add := g.mod.ExportedFunction(abi.ExportAggAdd)
			for b.Loop() {
				ptr := g.write(batch)
				res, err := add.Call(g.ctx, uint64(ptr), uint64(len(batch)))
				if err != nil || res[0] != abi.StatusOK {
					b.Fatal(err, g.calls.failures)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
		})
	}
}
