package detector

import (
	"math"
	"testing"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, config string
		want         int64
		err          string
	}{
		{"default", `{}`, DefaultWindowMs, ""},
		{"window", `{"window_ms": 60000}`, 60000, ""},
		{"escaped name", `{"window\u005fms": 5}`, 5, ""},
		{"exponent", `{"window_ms": 3e5}`, 300000, ""},
		{"largest", `{"window_ms": 9007199254740992}`, 1 << 53, ""},
		{"not an object", `[]`, 0, "country-change: config is not a JSON object"},
		{"malformed", `{"window_ms": }`, 0, "country-change: config is not valid JSON"},
		{"zero", `{"window_ms": 0}`, 0, "country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53"},
		{"fraction", `{"window_ms": 0.5}`, 0, "country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53"},
		{"string", `{"window_ms": "1"}`, 0, "country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53"},
		{"too large", `{"window_ms": 1e16}`, 0, "country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53"},
		{"unknown", `{"window": 1}`, 0, `country-change: config: unknown or repeated key "window"`},
		{"repeated", `{"window_ms": 1, "window_ms": 1}`, 0, `country-change: config: unknown or repeated key "window_ms"`},
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
			if err != nil || c.WindowMs != tc.want {
				t.Fatalf("window %d, error %v; want %d", c.WindowMs, err, tc.want)
			}
		})
	}
}

func TestParseTxn(t *testing.T) {
	tests := []struct {
		name, value   string
		card, country string
		ok            bool
	}{
		{"documented", `{"card":"card-0042","amount":12.5,"country":"DE","merchant":"m-017","ts":1767225600000}`, "card-0042", "DE", true},
		{"escapes", `{"country": "D\u0045", "card": "c\"1"}`, `c"1`, "DE", true},
		{"first duplicate", `{"card": "a", "country": "DE", "country": "FR"}`, "a", "DE", true},
		{"no country", `{"card": "a"}`, "", "", false},
		{"no card", `{"country": "DE"}`, "", "", false},
		{"country not a string", `{"card": "a", "country": 49}`, "", "", false},
		{"card not a string", `{"card": 42, "country": "DE"}`, "", "", false},
		{"malformed", `{"card": "a", "country": "DE",}`, "", "", false},
		{"not an object", `"DE"`, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			txn, _, ok := ParseTxn([]byte(tc.value), nil)
			if ok != tc.ok || string(txn.Card) != tc.card || string(txn.Country) != tc.country {
				t.Fatalf("got %q %q %v, want %q %q %v", txn.Card, txn.Country, ok, tc.card, tc.country, tc.ok)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	c := Config{WindowMs: 1000}
	de, fr := []byte("DE"), []byte("FR")
	tests := []struct {
		name    string
		last    Last
		have    bool
		country []byte
		ts      int64
		want    Step
	}{
		{"first", Last{}, false, de, 5, Step{Replace: true, NewTimer: 1005}},
		{"same country", Last{0, de}, true, de, 10, Step{Replace: true, HasOld: true, OldTimer: 1000, NewTimer: 1010}},
		{"change", Last{0, de}, true, fr, 1000, Step{Alert: true, From: de, To: fr, GapMs: 1000, Replace: true, HasOld: true, OldTimer: 1000, NewTimer: 2000}},
		{"change too late", Last{0, de}, true, fr, 1001, Step{Replace: true, HasOld: true, OldTimer: 1000, NewTimer: 2001}},
		{"same time", Last{7, de}, true, fr, 7, Step{Alert: true, From: de, To: fr, Replace: true, HasOld: true, OldTimer: 1007, NewTimer: 1007}},
		{"older", Last{1000, de}, true, fr, 400, Step{Alert: true, From: fr, To: de, GapMs: 600}},
		{"much older", Last{5000, de}, true, fr, 400, Step{}},
		{"far apart", Last{math.MinInt64 + 1, de}, true, fr, math.MaxInt64, Step{Replace: true, HasOld: true, OldTimer: math.MinInt64 + 1001, NewTimer: math.MaxInt64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Decide(tc.last, tc.have, tc.country, tc.ts)
			if got.Alert != tc.want.Alert || string(got.From) != string(tc.want.From) || string(got.To) != string(tc.want.To) ||
				got.GapMs != tc.want.GapMs || got.Replace != tc.want.Replace || got.HasOld != tc.want.HasOld ||
				got.OldTimer != tc.want.OldTimer || got.NewTimer != tc.want.NewTimer {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestExpired(t *testing.T) {
	c := Config{WindowMs: 1000}
	if c.Expired(Last{Ts: 500}, 1499) || !c.Expired(Last{Ts: 500}, 1500) || !c.Expired(Last{Ts: math.MaxInt64 - 1}, math.MaxInt64) {
		t.Fatal("Expired does not follow the stored time")
	}
}

func TestStateAndAlert(t *testing.T) {
	l := Last{Ts: -2, Country: []byte("FR")}
	b := AppendLast(nil, l)
	if string(b) != "\xfe\xff\xff\xff\xff\xff\xff\xffFR" {
		t.Fatalf("encoding %q", b)
	}
	got, ok := DecodeLast(b)
	if !ok || got.Ts != l.Ts || string(got.Country) != "FR" {
		t.Fatalf("decoded %+v %v", got, ok)
	}
	if _, ok := DecodeLast(b[:7]); ok {
		t.Fatal("7 bytes decoded")
	}
	alert := AppendAlert(nil, []byte(`card"1`), Step{From: []byte("DE"), To: []byte("F\nR"), GapMs: 12}, 99)
	if want := `{"card":"card\"1","from":"DE","to":"F\nR","gap_ms":12,"ts":99}`; string(alert) != want {
		t.Fatalf("alert %s, want %s", alert, want)
	}
}

// FuzzParseTxn checks that ParseTxn never panics and reads exactly the two
// strings jsonscan finds.
func FuzzParseTxn(f *testing.F) {
	f.Add([]byte(`{"card":"card-0042","amount":12.5,"country":"DE","merchant":"m-017","ts":1767225600000}`))
	f.Add([]byte(`{"card":"\ud800","country":"\u00e9"}`))
	f.Add([]byte(`{"card":1}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		txn, _, ok := ParseTxn(value, nil)
		card, st := jsonscan.Lookup(value, []byte("card"))
		if ok && (st != jsonscan.Field || jsonscan.KindOf(card) != jsonscan.String) {
			t.Fatalf("ParseTxn accepted %q without a card string", value)
		}
		if ok && string(txn.Card) != string(jsonscan.AppendUnquote(nil, card)) {
			t.Fatalf("card %q from %q", txn.Card, value)
		}
	})
}
