package udfs_test

import (
	"math/rand/v2"
	"strings"

	"github.com/eddy-stream/eddy/abi"
)

// genRecords makes n varied records: mostly JSON objects in the shape the
// example configurations look at, with the awkward cases mixed in (escapes,
// duplicate and escaped member names, numbers at the edges of float64,
// nested values, type mismatches) and a share of values that are not valid
// JSON objects at all.
func genRecords(rng *rand.Rand, n int) []abi.Record {
	recs := make([]abi.Record, n)
	for i := range recs {
		r := &recs[i]
		r.Value = []byte(genValue(rng))
		r.Timestamp = rng.Int64N(2e12) - 1e11
		switch rng.IntN(10) {
		case 0:
			r.Timestamp = abi.NoTimestamp
		case 1:
			r.Headers = []abi.Header{{Key: "trace", Value: []byte(pick(rng, cards))}, {Key: "empty"}}
		}
		if rng.IntN(4) > 0 {
			r.Key = []byte(pick(rng, words))
		}
	}
	return recs
}

func pick(rng *rand.Rand, list []string) string { return list[rng.IntN(len(list))] }

var space = []string{"", "", "", " ", "\n\t ", "\r\n"}

var cards = []string{
	`"4111"`, `"4111 \"x\""`, `"caf\u00e9"`, `"café"`, `"\ud83d\ude00"`, `"😀"`, `"\ud800"`,
	`""`, `"a\\b"`, `"\/\b\f\n\r\t"`, `4111`, `null`, `true`, `["4111"]`,
}

var amounts = []string{
	`0`, `-0`, `0.0`, `100`, `100.0`, `100.5`, `101`, `150`, `1.5e2`, `15E+1`, `1500e-1`, `-15`,
	`-15.0`, `-1.5e1`, `-16`, `1e400`, `-1e400`, `1e-400`, `1e300`, `"150"`, `true`, `null`, `{}`,
	`0.1`, `1` + strings.Repeat("0", 300), `100.` + strings.Repeat("0", 200) + `1`,
	`-` + strings.Repeat("9", 150), `9007199254740993`,
	// Hard to round: C's strtod and Go's ParseFloat must agree exactly.
	`9007199254740993.0000000001`, `9007199254740992.9999`, `9007199254740995`,
	`2.2250738585072011e-308`, `2.2250738585072012e-308`, `4.9e-324`, `2.4703282292062327e-324`,
	`1.7976931348623157e308`, `1.7976931348623158e308`, `1.7976931348623159e308`,
	`1.00000000000000011102230246251565404236316680908203125`,
	`1.000000000000000111022302462515654042363166809082031250000000000000000000000000000000000000000000000000000000000000000000000001`,
	`0.` + strings.Repeat("0", 140) + `1e141`,
}

var merchants = []string{
	`{"name": "A \"B\" {C}", "geo": [1, 2.5, {"x": []}]}`, `{}`, `[]`, `{"amount": 999}`,
	`{"a":{"b":{"c":[[[]],{"d":"}"}]}}}`, `"]"`, `null`,
}

var tags = []string{`["a", "b"]`, `[]`, `[[[]]]`, `["}", "{", "\""]`, `[1, -2e3, true, false, null]`}

var words = []string{
	"Hello", "WORLD", "don\\u0027t", "x\\ny", "42abc", "café", "\\u0041BC", "über", "a",
	"Zebra", "hello", "k8s", "--", "e.g.", "\\ud83d\\ude00", "tab\\there", "q\\\"uote", "",
}

var separators = []string{" ", ", ", "--", "\\t", " ... ", "/", "\\n", "😀"}

func genText(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := rng.IntN(12); i > 0; i-- {
		b.WriteString(pick(rng, words))
		b.WriteString(pick(rng, separators))
	}
	b.WriteByte('"')
	return b.String()
}

var malformed = []string{
	``, ` `, `[1, 2]`, `"text"`, `42`, `null`, `{`, `}`, `{"a":1,}`, `{"a" 1}`, `{"a":1} x`,
	`{"a":01}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"raw` + "\t" + `tab"}`, `{"amount": 200, "card": "x"`,
	`{"amount": 200 "card": "x"}`, `{"a": [1, 2}`, `{"a": {"b": 1]}`, `{"a": -}`, `{"a": 1.}`,
	`{"a": 1e}`, `{"a": .5}`, `{"a": "\u12"}`, `{'a': 1}`, `{"amount": 150}}`, `{"a":[1,]}`,
	`{"text": "deep", "x": ` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
	"\xff\xfe{}", `{"a":1}` + "\x00",
}

func genValue(rng *rand.Rand) string {
	switch k := rng.IntN(20); {
	case k == 0:
		return pick(rng, malformed)
	case k == 1:
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return string(b)
	case k == 2:
		// Deep but within the scanner's limit: valid.
		d := 1 + rng.IntN(500)
		return `{"text": "deep ok", "amount": 101, "x": ` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}`
	}
	type member struct{ name, value string }
	all := []member{
		{`"card"`, pick(rng, cards)},
		{`"amount"`, pick(rng, amounts)},
		{`"merchant"`, pick(rng, merchants)},
		{`"tags"`, pick(rng, tags)},
		{`"text"`, genText(rng)},
		{`"n` + pick(rng, []string{"1", "2", "3"}) + `"`, pick(rng, amounts)},
	}
	if rng.IntN(8) == 0 {
		all[0].name = `"c\u0061rd"`
	}
	if rng.IntN(8) == 0 {
		all = append(all, member{`"amount"`, pick(rng, amounts)}) // a duplicate: the first counts
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	all = all[:rng.IntN(len(all)+1)]
	var b strings.Builder
	b.WriteString(pick(rng, space))
	b.WriteByte('{')
	for i, m := range all {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pick(rng, space))
		b.WriteString(m.name)
		b.WriteString(pick(rng, space))
		b.WriteByte(':')
		b.WriteString(pick(rng, space))
		b.WriteString(m.value)
		b.WriteString(pick(rng, space))
	}
	b.WriteByte('}')
	b.WriteString(pick(rng, space))
	return b.String()
}
