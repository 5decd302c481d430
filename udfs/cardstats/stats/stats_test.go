package stats

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct{ name, config, err string }{
		{"empty", `{}`, ""},
		{"whitespace", " {\n} ", ""},
		{"a key", `{"n": 1}`, `card-stats: config: unknown key "n" (card-stats takes no configuration)`},
		{"not an object", `[]`, "card-stats: config is not a JSON object"},
		{"malformed", `{`, "card-stats: config is not valid JSON"},
		{"trailing", `{} x`, "card-stats: config is not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Parse([]byte(tc.config))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestParseTxn(t *testing.T) {
	tests := []struct {
		name, value string
		cents       int64
		country     string
		ok          bool
	}{
		{"generator", `{"card":"card-0042","amount":12.34,"country":"DE","merchant":"m-017","ts":1767225600000}`, 1234, "DE", true},
		{"whole", `{"amount":5,"country":"FR"}`, 500, "FR", true},
		{"negative", `{"amount":-0.01,"country":"FR"}`, -1, "FR", true},
		{"half a cent rounds away from zero", `{"amount":0.005,"country":"FR"}`, 1, "FR", true},
		{"negative half a cent", `{"amount":-0.005,"country":"FR"}`, -1, "FR", true},
		{"below half a cent", `{"amount":0.004,"country":"FR"}`, 0, "FR", true},
		{"1.005 is 1.00499… in binary", `{"amount":1.005,"country":"FR"}`, 100, "FR", true},
		{"exponent", `{"amount":1e2,"country":"FR"}`, 10000, "FR", true},
		{"largest", `{"amount":90071992547409.92,"country":"FR"}`, 1 << 53, "FR", true},
		{"too large", `{"amount":90071992547409.94,"country":"FR"}`, 0, "", false},
		{"infinite", `{"amount":1e400,"country":"FR"}`, 0, "", false},
		{"escaped country", `{"amount":1,"country":"D\u0045"}`, 100, "DE", true},
		{"empty country", `{"amount":1,"country":""}`, 100, "", true},
		{"longest country", `{"amount":1,"country":"` + strings.Repeat("x", MaxCountryLen) + `"}`, 100, strings.Repeat("x", MaxCountryLen), true},
		{"too long a country", `{"amount":1,"country":"` + strings.Repeat("x", MaxCountryLen+1) + `"}`, 0, "", false},
		{"first duplicate", `{"amount":1,"amount":"x","country":"DE"}`, 100, "DE", true},
		{"amount a string", `{"amount":"1","country":"DE"}`, 0, "", false},
		{"no amount", `{"country":"DE"}`, 0, "", false},
		{"country a number", `{"amount":1,"country":49}`, 0, "", false},
		{"malformed", `{"amount":1,"country":"DE",}`, 0, "", false},
		{"not an object", `12.34`, 0, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cents, country, _, ok := ParseTxn([]byte(tc.value), nil)
			if ok != tc.ok || ok && (cents != tc.cents || string(country) != tc.country) {
				t.Fatalf("ParseTxn = %d, %q, %v; want %d, %q, %v", cents, country, ok, tc.cents, tc.country, tc.ok)
			}
		})
	}
}

// fold adds values to the empty accumulator.
func fold(t testing.TB, values ...string) []byte {
	t.Helper()
	acc := AppendEmpty(nil)
	var scratch []byte
	for _, v := range values {
		next, s, err := AddValue(nil, acc, []byte(v), scratch)
		if err != nil {
			t.Fatal(err)
		}
		acc, scratch = next, s
	}
	return acc
}

func txn(amount, country string) string {
	return `{"amount":` + amount + `,"country":"` + country + `"}`
}

func TestAccumulator(t *testing.T) {
	if got := AppendEmpty(nil); !bytes.Equal(got, []byte{1, 0, 0, 0}) {
		t.Fatalf("empty = %x", got)
	}
	acc := fold(t, txn("12.34", "FR"), txn("-1", "DE"), txn("40", "FR"), "nope", txn("0.5", "AT"))
	// n 4, sum 5184 cents, max 4000 cents, AT DE FR.
	want := []byte{1, 4, 0x80, 0x51, 0xc0, 0x3e, 2, 'A', 'T', 2, 'D', 'E', 2, 'F', 'R'}
	if !bytes.Equal(acc, want) {
		t.Fatalf("acc = %x, want %x", acc, want)
	}
	a, err := Decode(acc)
	if err != nil || a.N != 4 || a.Sum != 5184 || a.Max != 4000 || a.Countries != 3 {
		t.Fatalf("Decode = %+v, %v", a, err)
	}
	res, err := AppendResult(nil, acc)
	if want := `{"n":4,"total":"51.84","max":"40.00","countries":3}`; err != nil || string(res) != want {
		t.Fatalf("result %s, %v; want %s", res, err, want)
	}
	res, _ = AppendResult(nil, AppendEmpty(nil))
	if want := `{"n":0,"total":"0.00","max":null,"countries":0}`; string(res) != want {
		t.Fatalf("empty result %s, want %s", res, want)
	}
	res, _ = AppendResult(nil, fold(t, txn("-0.07", "DE"), txn("-3", "DE")))
	if want := `{"n":2,"total":"-3.07","max":"-0.07","countries":1}`; string(res) != want {
		t.Fatalf("negative result %s, want %s", res, want)
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		acc  []byte
		why  string
	}{
		{"empty", nil, "empty"},
		{"format", []byte{2, 0, 0, 0}, "format 2, want 1"},
		{"truncated varint", []byte{1, 0x80}, "bad varint"},
		{"missing field", []byte{1, 0, 0}, "bad varint"},
		{"longer varint", []byte{1, 0x80, 0, 0, 0}, "bad varint"},
		{"overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0}, "bad varint"},
		{"sum without records", []byte{1, 0, 2, 0}, "inconsistent counts"},
		{"max without records", []byte{1, 0, 0, 2}, "inconsistent counts"},
		{"country without records", []byte{1, 0, 0, 0, 0}, "inconsistent counts"},
		{"records without a country", []byte{1, 1, 2, 2}, "inconsistent counts"},
		{"more countries than records", []byte{1, 1, 2, 2, 1, 'A', 1, 'B'}, "inconsistent counts"},
		{"out of order", []byte{1, 2, 2, 2, 1, 'B', 1, 'A'}, "countries out of order"},
		{"duplicate", []byte{1, 2, 2, 2, 1, 'A', 1, 'A'}, "countries out of order"},
		{"prefix after", []byte{1, 2, 2, 2, 2, 'A', 'B', 1, 'A'}, "countries out of order"},
		{"truncated country", []byte{1, 1, 2, 2, 3, 'A', 'B'}, "truncated country"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.acc)
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.HasSuffix(err.Error(), ": "+tc.why) {
				t.Fatalf("Decode(%x) = %v, want ErrMalformed: %s", tc.acc, err, tc.why)
			}
			if _, err := Merge(nil, AppendEmpty(nil), tc.acc); err == nil {
				t.Error("Merge accepts it")
			}
			if _, _, err := AddValue(nil, tc.acc, []byte("ignored"), nil); err == nil {
				t.Error("AddValue accepts it with a value that does not count")
			}
			if _, err := AppendResult(nil, tc.acc); err == nil {
				t.Error("AppendResult accepts it")
			}
		})
	}
}

var countries = []string{"DE", "FR", "AT", "D", "DEU", "", "é", "NL"}

func randomAcc(t *testing.T, rng *rand.Rand) []byte {
	var values []string
	for range rng.IntN(6) {
		values = append(values, txn(strings.Repeat("9", rng.IntN(14)+1)+".25", countries[rng.IntN(len(countries))]))
		if rng.IntN(3) == 0 {
			values[len(values)-1] = txn("-"+strings.Repeat("9", rng.IntN(3)+1), countries[rng.IntN(len(countries))])
		}
	}
	return fold(t, values...)
}

func merge(t *testing.T, a, b []byte) []byte {
	t.Helper()
	m, err := Merge(nil, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(m); err != nil {
		t.Fatalf("Merge made an accumulator that does not decode: %v", err)
	}
	return m
}

// TestMergeLaws: associative, commutative, the empty accumulator its
// identity, and adding a record is merging its one-record accumulator.
func TestMergeLaws(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	empty := AppendEmpty(nil)
	for range 2000 {
		a, b, c := randomAcc(t, rng), randomAcc(t, rng), randomAcc(t, rng)
		if l, r := merge(t, merge(t, a, b), c), merge(t, a, merge(t, b, c)); !bytes.Equal(l, r) {
			t.Fatalf("not associative: (%x %x) %x = %x, but %x (%x %x) = %x", a, b, c, l, a, b, c, r)
		}
		if l, r := merge(t, a, b), merge(t, b, a); !bytes.Equal(l, r) {
			t.Fatalf("not commutative: %x %x", a, b)
		}
		if !bytes.Equal(merge(t, a, empty), a) || !bytes.Equal(merge(t, empty, a), a) {
			t.Fatalf("empty is not the identity for %x", a)
		}
		v := txn("1.5", countries[rng.IntN(len(countries))])
		added, _, err := AddValue(nil, a, []byte(v), nil)
		if err != nil {
			t.Fatal(err)
		}
		if m := merge(t, a, fold(t, v)); !bytes.Equal(added, m) {
			t.Fatalf("adding %s to %x gives %x, merging gives %x", v, a, added, m)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	acc := fold(t, txn("1", "DE"), txn("2", "FR"))
	value := []byte(`{"card":"card-0042","amount":12.34,"country":"NL","merchant":"m-017","ts":1767225600000}`)
	dst, scratch := make([]byte, 0, 64), make([]byte, 0, 64)
	n := testing.AllocsPerRun(100, func() {
		out, s, err := AddValue(dst[:0], acc, value, scratch)
		if err != nil {
			t.Fatal(err)
		}
		scratch = s
		out, _ = Merge(out[:0], acc, acc)
		_, _ = AppendResult(out[:0], acc)
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// FuzzDecode: Decode never panics, and what it accepts is canonical: the
// empty accumulator merges it back to the same bytes, and the merge laws
// hold with it.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{1, 4, 0x80, 0x51, 0xc0, 0x3e, 2, 'A', 'T', 2, 'D', 'E', 2, 'F', 'R'})
	f.Add([]byte{1, 2, 2, 2, 1, 'B', 1, 'A'})
	empty := AppendEmpty(nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Decode(b)
		if err != nil {
			if _, err := AppendResult(nil, b); err == nil {
				t.Fatal("AppendResult accepts what Decode refuses")
			}
			return
		}
		if m, err := Merge(nil, empty, b); err != nil || !bytes.Equal(m, b) {
			t.Fatalf("Merge(empty, %x) = %x, %v", b, m, err)
		}
		m, err := Merge(nil, b, b)
		if err != nil {
			t.Fatalf("Merge(%x, itself): %v", b, err)
		}
		// Only an absurd count overflows when doubled.
		if _, err := Decode(m); err != nil && a.N < 1<<63 {
			t.Fatalf("Merge(%x, itself) = %x does not decode: %v", b, m, err)
		}
		if _, err := AppendResult(nil, b); err != nil {
			t.Fatal(err)
		}
	})
}
