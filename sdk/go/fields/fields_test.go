//go:build !wasip1

package fields

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// host is a fake host: it decodes the field list as the real host does and
// records what the guest emits and fails with.
type host struct {
	t        *testing.T
	fields   *abi.Fields
	calls    int // of the fields import
	out      []string
	keys     []string // key@timestamp of each record in out
	failures []string
}

func (h *host) Emit(batch []byte) {
	recs, err := abi.DecodeBatch(batch, nil)
	if err != nil {
		h.t.Fatalf("emitted batch does not decode: %v", err)
	}
	for _, r := range recs {
		h.out = append(h.out, string(r.Value))
		h.keys = append(h.keys, fmt.Sprintf("%s@%d", r.Key, r.Timestamp))
	}
}
func (h *host) Log(int32, string) {}
func (h *host) Fail(msg string)   { h.failures = append(h.failures, msg) }

// operator is an operator whose Open and Process are the test's.
type operator struct {
	open    func() error
	process func(r *abi.Record) error
}

func (o *operator) Open([]byte) error           { return o.open() }
func (o *operator) Process(r *abi.Record) error { return o.process(r) }
func (o *operator) Close() error                { return nil }
func (o *operator) OnTimer(r *abi.Record) error { return o.process(r) }
func (h *host) batch(recs []abi.Record) []byte  { return encode(h.fields, recs) }
func encode(f *abi.Fields, recs []abi.Record) []byte {
	b := make([]byte, f.EncodedSize(recs))
	return b[:f.EncodeBatch(b, recs)]
}

func install(t *testing.T, op guest.Operator) *host {
	h := &host{t: t}
	t.Cleanup(guest.SetTestHost(h, op))
	testHost = func(list []byte) {
		h.calls++
		f, err := abi.ParseFieldList(list)
		if err != nil {
			panic(err) // the real host traps
		}
		h.fields = f
	}
	t.Cleanup(func() { testHost = nil })
	return h
}

// row is what Valid and Get give for the current record, as text: the
// status digit, then "|" and each path's span or "-".
func row(n int) string {
	var s strings.Builder
	if Valid() {
		s.WriteByte('1')
	} else {
		s.WriteByte('0')
	}
	for j := range n {
		v, ok := Get(j)
		if !ok {
			v = []byte("-")
		}
		s.WriteByte('|')
		s.Write(v)
	}
	got := s.String()
	// Spans gives what Valid and Get give, for every prefix of the paths.
	for k := 0; k <= n; k++ {
		spans := make([][]byte, k)
		valid := Spans(spans)
		var t strings.Builder
		if valid {
			t.WriteByte('1')
		} else {
			t.WriteByte('0')
		}
		for _, v := range spans {
			if v == nil {
				v = []byte("-")
			}
			t.WriteByte('|')
			t.Write(v)
		}
		if want := got[:prefixLen(got, k)]; t.String() != want {
			return fmt.Sprintf("Spans of %d paths gave %q, Valid and Get %q", k, t.String(), want)
		}
	}
	return got
}

// prefixLen is the length of row's text up to its k-th "|" field (the
// spans never contain "|" in these tests).
func prefixLen(row string, k int) int {
	n := 0
	for i := range len(row) {
		if row[i] == '|' {
			if n == k {
				return i
			}
			n++
		}
	}
	return len(row)
}

func TestVersion(t *testing.T) {
	if v := guest.ABIVersion(); v != abi.PartsVersion {
		t.Fatalf("importing fields makes the module report version %d, want %d", v, abi.PartsVersion)
	}
	defer func(v int32) { guest.Version = v }(guest.Version)
	for _, v := range []int32{2, 4, 5} { // what keyed, schema and co set
		guest.Version = v
		if got := guest.ABIVersion(); got != abi.PartsVersion {
			t.Errorf("with guest.Version %d the module reports %d, want %d", v, got, abi.PartsVersion)
		}
	}
}

// TestGet: the spans are those the host extracted, record by record,
// whatever the batch's size.
func TestGet(t *testing.T) {
	paths := [][]string{{"a"}, {"b", "c"}, {"b"}}
	op := &operator{
		open:    func() error { return Declare(paths...) },
		process: func(r *abi.Record) error { guest.Emit(&abi.Record{Value: []byte(row(len(paths)))}); return nil },
	}
	h := install(t, op)
	if st := guest.Open([]byte("{}")); st != abi.StatusOK {
		t.Fatalf("Open: %v", h.failures)
	}
	in := []struct{ value, want string }{
		{`{"a":1,"b":{"c":"x"}}`, `1|1|"x"|{"c":"x"}`},
		{`{"b":[1],"a":"\u0041"}`, `1|"\u0041"|-|[1]`},
		{` {"a" : {"c":2} , "a":3} `, `1|{"c":2}|-|-`},
		{`{"a":1,"b":{"c":2}`, `0|-|-|-`},
		{`[1,2]`, `0|-|-|-`},
		{`{}`, `1|-|-|-`},
		{``, `0|-|-|-`},
	}
	for _, size := range []int{1, 3, len(in)} {
		h.out = nil
		for start := 0; start < len(in); start += size {
			var recs []abi.Record
			for _, r := range in[start:min(start+size, len(in))] {
				recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(r.value)})
			}
			if st := guest.Process(h.batch(recs)); st != abi.StatusOK {
				t.Fatalf("batches of %d: %v", size, h.failures)
			}
		}
		for k, r := range in {
			if k >= len(h.out) || h.out[k] != r.want {
				t.Fatalf("batches of %d: got %q, want record %d %s to give %q", size, h.out, k, r.value, r.want)
			}
		}
	}
	if h.calls != 1 {
		t.Errorf("the fields import was called %d times, want 1", h.calls)
	}
}

// TestNumbers: Number gives the host's parse of each number path, false
// when there is none; Get and Spans keep to the span paths, Number to the
// number paths.
func TestNumbers(t *testing.T) {
	op := &operator{
		open: func() error { return DeclareWithNumbers([][]string{{"p"}}, [][]string{{"p"}, {"q", "r"}}) },
		process: func(r *abi.Record) error {
			x, xok := Number(1)
			y, yok := Number(2)
			p, _ := Get(0)
			guest.Emit(&abi.Record{Value: fmt.Appendf(nil, "%s|%v %v|%v %v", p, x, xok, y, yok)})
			return nil
		},
	}
	h := install(t, op)
	if st := guest.Open(nil); st != abi.StatusOK {
		t.Fatalf("Open: %v", h.failures)
	}
	in := []struct{ value, want string }{
		{`{"p":1.5,"q":{"r":-2e3}}`, `1.5|1.5 true|-2000 true`},
		{`{"p":"1.5","q":{"r":1e999}}`, `"1.5"|NaN false|+Inf true`},
		{`{"q":[1]}`, `|NaN false|NaN false`},
		{`{"p":1`, `|NaN false|NaN false`},
	}
	var recs []abi.Record
	for _, r := range in {
		recs = append(recs, abi.Record{Value: []byte(r.value)})
	}
	if st := guest.Process(h.batch(recs)); st != abi.StatusOK {
		t.Fatalf("Process: %v", h.failures)
	}
	for k, r := range in {
		if h.out[k] != r.want {
			t.Errorf("record %d %s: %q, want %q", k, r.value, h.out[k], r.want)
		}
	}
	for _, c := range []struct {
		process func()
		want    string
	}{
		{func() { Number(0) }, "Number(0): paths 1 to 2 are number paths"},
		{func() { Number(3) }, "Number(3): paths 1 to 2 are number paths"},
		{func() { Get(1) }, "Get(1) of 1 declared span paths"},
		{func() { Spans(make([][]byte, 2)) }, "Spans of 2 paths, 1 span paths declared"},
	} {
		op.process = func(*abi.Record) error { c.process(); return nil }
		if st := guest.Process(h.batch(recs[:1])); st == abi.StatusOK || !strings.Contains(h.failures[len(h.failures)-1], c.want) {
			t.Errorf("status %d, %q; want a failure with %q", st, h.failures, c.want)
		}
	}
}

// TestEmitParts: outside Wasm, EmitParts emits the gathered value whole,
// with the record's key, timestamp and headers (inside, the host gathers:
// host.TestValuesInParts and the projection module's tests).
func TestEmitParts(t *testing.T) {
	op := &operator{
		open: func() error { return Declare([]string{"a"}) },
		process: func(r *abi.Record) error {
			a, _ := Get(0)
			EmitParts(&abi.Record{Key: r.Key, Value: []byte("ignored")}, []byte("{"), a, nil, []byte("}"))
			return nil
		},
	}
	h := install(t, op)
	if st := guest.Open(nil); st != abi.StatusOK {
		t.Fatalf("Open: %v", h.failures)
	}
	if st := guest.Process(h.batch([]abi.Record{{Value: []byte(`{"a":[1,2]}`)}})); st != abi.StatusOK {
		t.Fatalf("Process: %v", h.failures)
	}
	if len(h.out) != 1 || h.out[0] != `{[1,2]}` {
		t.Fatalf("emitted %q", h.out)
	}
}

func TestDeclareRefused(t *testing.T) {
	var second error
	op := &operator{
		open: func() error {
			if err := Declare([]string{"a"}); err != nil {
				return err
			}
			second = Declare([]string{"b"})
			return nil
		},
		process: func(r *abi.Record) error { return Declare([]string{"c"}) },
	}
	h := install(t, op)
	if err := Declare([]string{"a"}); !errors.Is(err, ErrNotOpening) {
		t.Errorf("Declare before Open: %v", err)
	}
	if st := guest.Open([]byte("{}")); st != abi.StatusOK {
		t.Fatalf("Open: %v", h.failures)
	}
	if !errors.Is(second, ErrTwice) {
		t.Errorf("a second Declare: %v", second)
	}
	if st := guest.Process(h.batch([]abi.Record{{Value: []byte("{}")}})); st == abi.StatusOK || !strings.Contains(h.failures[0], "outside Open") {
		t.Errorf("Declare in Process: status %d, %q", st, h.failures)
	}
	if h.calls != 1 {
		t.Errorf("the fields import was called %d times, want 1", h.calls)
	}
}

// TestNoTable: outside an input batch of a module that declared fields
// (before Declare, in a timer batch) Valid and Get panic, which fails the
// call; a batch too short for its table fails it too.
func TestNoTable(t *testing.T) {
	declare := false
	op := &operator{
		open: func() error {
			if declare {
				return Declare([]string{"a"})
			}
			return nil
		},
		process: func(r *abi.Record) error { Valid(); return nil },
	}
	h := install(t, op)
	guest.Open(nil)
	plain := abi.AppendBatch(nil, []abi.Record{{Value: []byte(`{"a":1}`)}})
	if st := guest.Process(plain); st == abi.StatusOK || !strings.Contains(h.failures[len(h.failures)-1], "no record with fields") {
		t.Fatalf("without Declare: status %d, %q", st, h.failures)
	}
	declare = true
	h = install(t, op)
	guest.Open(nil)
	if st := guest.RunBatch(plain, "timer batch", op.Process); st == abi.StatusOK || !strings.Contains(h.failures[len(h.failures)-1], "no record with fields") {
		t.Fatalf("in a timer batch: status %d, %q", st, h.failures)
	}
	short := abi.AppendBatch(nil, []abi.Record{{Value: []byte(`{}`)}, {Value: []byte(`{}`)}})
	if st := guest.Process(short); st == abi.StatusOK || !strings.Contains(h.failures[len(h.failures)-1], "field table of 2 rows of 12 bytes") {
		t.Fatalf("a batch without its table: status %d, %q", st, h.failures)
	}
	op.process = func(r *abi.Record) error { Spans(make([][]byte, 2)); return nil }
	if st := guest.Process(h.batch([]abi.Record{{Value: []byte(`{}`)}})); st == abi.StatusOK || !strings.Contains(h.failures[len(h.failures)-1], "Spans of 2 paths, 1 span paths declared") {
		t.Fatalf("Spans of too many paths: status %d, %q", st, h.failures)
	}
	op.process = func(r *abi.Record) error { Get(1); return nil }
	if st := guest.Process(h.batch([]abi.Record{{Value: []byte(`{}`)}})); st == abi.StatusOK || !strings.Contains(h.failures[len(h.failures)-1], "Get(1) of 1 declared span paths") {
		t.Fatalf("Get out of range: status %d, %q", st, h.failures)
	}
}

// TestNoAllocations: reading the fields of a batch allocates nothing.
func TestNoAllocations(t *testing.T) {
	var sum int
	var spans [2][]byte
	op := &operator{
		open: func() error { return Declare([]string{"card"}, []string{"amount"}) },
		process: func(r *abi.Record) error {
			if Valid() {
				for j := range 2 {
					v, _ := Get(j)
					sum += len(v)
				}
			}
			if Spans(spans[:]) {
				sum += len(spans[0]) + len(spans[1])
			}
			return nil
		},
	}
	h := install(t, op)
	guest.Open(nil)
	var recs []abi.Record
	for i := range 256 {
		recs = append(recs, abi.Record{Value: []byte(fmt.Sprintf(`{"card":"c%d","amount":%d}`, i, i))})
	}
	batch := h.batch(recs)
	guest.Process(batch) // size the decode slice once
	if n := testing.AllocsPerRun(50, func() { guest.Process(batch) }); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
	if sum == 0 || !bytes.Contains(batch, []byte("c255")) {
		t.Fatal("no field read")
	}
}

// TestSpanPartsEmitPartList: outside Wasm, a list of Parts (spans by
// SpanParts, constants by PartOf in Open, NoPart) goes out as the value
// they name whole, with the record's key and timestamp; SpanParts gives
// the row's validity and NoPart for an absent path, and panics, failing
// the call, with more Parts than span paths.
func TestSpanPartsEmitPartList(t *testing.T) {
	var open, close, comma Part
	spans := make([]Part, 2)
	op := &operator{
		open: func() error {
			open, close, comma = PartOf([]byte("<")), PartOf([]byte(">")), PartOf([]byte(","))
			return Declare([]string{"a"}, []string{"b"})
		},
		process: func(r *abi.Record) error {
			valid := SpanParts(spans)
			list := []Part{open, spans[0], comma, NoPart, spans[1], close}
			if !valid {
				list = list[:1]
			}
			EmitPartList(&abi.Record{Key: r.Key, Timestamp: r.Timestamp, Value: []byte("ignored")}, list)
			list[0] = NoPart // the list is copied: reusing it at once is fine
			return nil
		},
	}
	h := install(t, op)
	if st := guest.Open(nil); st != abi.StatusOK {
		t.Fatalf("Open: %v", h.failures)
	}
	recs := []abi.Record{
		{Key: []byte("k0"), Value: []byte(`{"a":[1,2],"b":"x"}`), Timestamp: 3},
		{Key: []byte("k1"), Value: []byte(`{"b":7}`), Timestamp: 4},
		{Key: []byte("k2"), Value: []byte(`[1]`), Timestamp: 5},
	}
	if st := guest.Process(h.batch(recs)); st != abi.StatusOK {
		t.Fatalf("Process: %v", h.failures)
	}
	if got, want := strings.Join(h.out, " "), `<[1,2],"x"> <,7> <`; got != want {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	for i, k := range h.keys {
		if k != fmt.Sprintf("k%d@%d", i, 3+i) {
			t.Errorf("record %d went out as %q", i, k)
		}
	}
	op.process = func(*abi.Record) error { SpanParts(make([]Part, 3)); return nil }
	if st := guest.Process(h.batch(recs[:1])); st == abi.StatusOK || !strings.Contains(h.failures[len(h.failures)-1], "Spans of 3 paths, 2 span paths declared") {
		t.Errorf("SpanParts of 3 paths: status %d, %q", st, h.failures)
	}
}
