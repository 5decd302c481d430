package abi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// refSpan finds path in the JSON value v the way ABI.md's version 6 says,
// with encoding/json only: the first member of each name (after
// unescaping), absent through a value that is not an object. ok is false
// when v is not one valid JSON object.
func refSpan(v []byte, path []string) (off, n int, found, ok bool) {
	if !json.Valid(v) || !bytes.HasPrefix(bytes.TrimLeft(v, " \t\r\n"), []byte("{")) {
		return 0, 0, false, false
	}
	start, end := 0, len(v)
	for _, key := range path {
		obj := v[start:end]
		trimmed := bytes.TrimLeft(obj, " \t\r\n")
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return 0, 0, false, true
		}
		dec := json.NewDecoder(bytes.NewReader(obj))
		if _, err := dec.Token(); err != nil { // {
			panic(err)
		}
		hit := false
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				panic(err)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				panic(err)
			}
			if t.(string) == key {
				e := int(dec.InputOffset())
				start, end = start+e-len(raw), start+e
				hit = true
				break
			}
		}
		if !hit {
			return 0, 0, false, true
		}
	}
	return start, end - start, true, true
}

func fieldsOf(t *testing.T, paths [][]string) *Fields {
	t.Helper()
	f, err := ParseFieldList(EncodeFieldList(paths))
	if err != nil {
		t.Fatalf("ParseFieldList(%q): %v", paths, err)
	}
	return f
}

// checkRow compares Extract on value (placed at a random offset inside a
// larger buffer) with refSpan for every path.
func checkRow(t *testing.T, f *Fields, value []byte, pad int) {
	t.Helper()
	b := append(bytes.Repeat([]byte{'x'}, pad), value...)
	b = append(b, `,"junk":1}`...) // bytes after the value must not be read
	row := make([]byte, FieldRowSize(len(f.paths)))
	f.Extract(row, b, pad, pad+len(value))
	le := binary.LittleEndian
	status := le.Uint32(row)
	for j, p := range f.paths {
		off, n, found, ok := refSpan(value, p)
		if (status == 1) != ok {
			t.Fatalf("value %q: status %d, encoding/json says valid object = %v", value, status, ok)
		}
		if f.number[j] {
			want := FieldNoNumber
			if found && (value[off] == '-' || value[off]-'0' <= 9) {
				x, err := strconv.ParseFloat(string(value[off:off+n]), 64)
				if err != nil && !errors.Is(err, strconv.ErrRange) {
					t.Fatalf("value %q path %q: %v", value, p, err)
				}
				want = math.Float64bits(x)
			}
			if got := le.Uint64(row[4+8*j:]); got != want {
				t.Fatalf("value %q number path %q: %#x (%v), want %#x (%v)", value, p, got, math.Float64frombits(got), want, math.Float64frombits(want))
			}
			continue
		}
		gotOff, gotLen := le.Uint32(row[4+8*j:]), le.Uint32(row[8+8*j:])
		if !found {
			if gotOff != FieldAbsent || gotLen != 0 {
				t.Fatalf("value %q path %q: span (%d, %d), want absent", value, p, gotOff, gotLen)
			}
			continue
		}
		if int(gotOff) != pad+off || int(gotLen) != n {
			t.Fatalf("value %q path %q: span (%d, %d) = %q, want (%d, %d) = %q",
				value, p, int(gotOff)-pad, gotLen, safeSlice(value, int(gotOff)-pad, int(gotLen)), off, n, value[off:off+n])
		}
	}
}

func safeSlice(b []byte, off, n int) []byte {
	if off < 0 || n < 0 || off+n > len(b) {
		return nil
	}
	return b[off : off+n]
}

var fieldPaths = [][]string{
	{"a"}, {"b", "c"}, {"b"}, {"b", "d", "e"}, {"pr\u0069ce"}, {""}, {"é"}, {"x", "y"},
}

var fieldValues = []string{
	`{}`, ` {"a":1} `, `{"a":1,"a":2}`, `{"b":{"c":[1,{"c":2}],"c":3}}`, `{"b":[{"c":1}],"b":{"c":2}}`,
	`{"b":{"d":{"e":"\"q\\"}},"a":null}`, `{"\u0061":true,"a":false}`, `{"price":1.5e3}`, `{"pr\u0069ce":-0}`,
	`{"":{},"é":"\u00e9","\u00e9":2}`, `{"x":5,"x":{"y":1}}`, `{"b":{"c":1,"c":2,}}`, `{"a":1}x`, `[{"a":1}]`,
	`{"a":01}`, `{"a":"\x01"}`, `{"a":1,"b":{"c":1}`, `{"b":{"c":{"a":[[[]]]}}, "a" : "s" }`, `"a"`, ``, `   `,
	`{"a":"\ud800"}`, `{"a":1 , "b" : { "c" : 2 } }`, "{\"a\":\"\xff\"}", `{"b":{"d":{"e":1}}}`, `{"a":tru}`,
	`{"b":{"d":[]}}`, `{"b":{"c":1},"b":5}`, `{"a":[1,2,3],"b":{"c":{"d":1}}}`, `{"a" 1}`, `{"a":1,}`,
}

// numberPaths are declared as number paths (version 7) beside fieldPaths
// in TestExtractAgainstEncodingJSON: some are span paths too.
var numberPaths = [][]string{{"a"}, {"price"}, {"b", "c"}, {"x"}, {"n"}}

func TestExtractAgainstEncodingJSON(t *testing.T) {
	f, err := ParseFieldList(EncodeFields(fieldPaths, numberPaths))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range fieldValues {
		for _, pad := range []int{0, 3} {
			checkRow(t, f, []byte(v), pad)
		}
	}
	// Every cut and single-byte change of the valid values.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v := range fieldValues {
		for i := range len(v) {
			checkRow(t, f, []byte(v[:i]), 1)
			b := []byte(v)
			b[i] = `{}[]":,\ 0a1e"`[rng.IntN(14)]
			checkRow(t, f, b, 2)
		}
	}
	// Random objects with duplicates, nesting and escapes.
	for range 3000 {
		v := randObject(rng, 0)
		checkRow(t, f, []byte(v), rng.IntN(5))
	}
}

func randObject(rng *rand.Rand, depth int) string {
	keys := []string{`"a"`, `"b"`, `"c"`, `"d"`, `"e"`, `"x"`, `"y"`, `"price"`, `"pr\u0069ce"`, `""`, `"\u00e9"`, `"\u0062"`, `"n"`}
	var sb strings.Builder
	sb.WriteString("{")
	n := rng.IntN(5)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(keys[rng.IntN(len(keys))])
		sb.WriteString([]string{":", " : ", ":\n"}[rng.IntN(3)])
		switch k := rng.IntN(8); {
		case k < 3 && depth < 4:
			sb.WriteString(randObject(rng, depth+1))
		case k == 3:
			sb.WriteString(fmt.Sprintf("[%d,%s]", rng.IntN(9), randObject(rng, depth+3)))
		case k == 4:
			sb.WriteString(`"s\"\\t"`)
		case k == 5:
			// numbers of every shape: fractions, exponents, 16+ digits, out of range
			sb.WriteString([]string{fmt.Sprintf("%d.%03d", rng.IntN(1e6)-5e5, rng.IntN(1000)), "1e400", "-2.5E-3",
				"12345678901234567", "0.1", "-0", "9007199254740993", "1.7976931348623157e308"}[rng.IntN(8)])
		default:
			sb.WriteString(fmt.Sprint(rng.IntN(1000) - 500))
		}
	}
	sb.WriteString("}")
	return sb.String()
}

func FuzzExtract(f *testing.F) {
	for _, v := range fieldValues {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		f, err := ParseFieldList(EncodeFields(fieldPaths, numberPaths))
		if err != nil {
			t.Fatal(err)
		}
		checkRow(t, f, v, 1)
	})
}

func TestFieldsEncodeBatch(t *testing.T) {
	f := fieldsOf(t, [][]string{{"a"}, {"b", "c"}})
	recs := []Record{
		{Key: []byte("k"), Value: []byte(`{"a":1,"b":{"c":"x"}}`), Timestamp: 7, Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Value: []byte(`not json`), Timestamp: NoTimestamp},
		{Value: []byte(`{"b":2}`)},
	}
	buf := make([]byte, f.EncodedSize(recs))
	if n := f.EncodeBatch(buf, recs); n != len(buf) {
		t.Fatalf("EncodeBatch wrote %d bytes, EncodedSize %d", n, len(buf))
	}
	got, err := DecodeBatch(buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if !bytes.Equal(got[i].Value, recs[i].Value) || !bytes.Equal(got[i].Key, recs[i].Key) || got[i].Timestamp != recs[i].Timestamp {
			t.Fatalf("record %d decodes as %+v, want %+v", i, got[i], recs[i])
		}
	}
	if len(got[0].Headers) != 1 || string(got[0].Headers[0].Value) != "v" {
		t.Fatalf("headers %+v", got[0].Headers)
	}
	le := binary.LittleEndian
	row := func(i int) []byte { return buf[FieldTableOffset(3)+i*FieldRowSize(2):] }
	span := func(i, j int) string {
		r := row(i)
		off, n := le.Uint32(r[4+8*j:]), le.Uint32(r[8+8*j:])
		if off == FieldAbsent {
			return "absent"
		}
		return string(buf[off : off+n])
	}
	want := [][]string{{"1", `"x"`}, {"absent", "absent"}, {"absent", "absent"}}
	wantStatus := []uint32{1, 0, 1}
	for i := range recs {
		if s := le.Uint32(row(i)); s != wantStatus[i] {
			t.Fatalf("record %d: status %d, want %d", i, s, wantStatus[i])
		}
		for j := range 2 {
			if s := span(i, j); s != want[i][j] {
				t.Fatalf("record %d path %d: %s, want %s", i, j, s, want[i][j])
			}
		}
	}
}

func TestParseFieldListRefuses(t *testing.T) {
	le := binary.LittleEndian
	long := make([][]string, MaxFieldPaths+1)
	for i := range long {
		long[i] = []string{fmt.Sprint(i)}
	}
	for _, c := range []struct {
		list []byte
		want string
	}{
		{nil, "no path count"},
		{le.AppendUint32(nil, 0), "declares 0 paths"},
		{EncodeFieldList(long), "declares 65 paths"},
		{EncodeFieldList([][]string{{}}), "path 0 has 0 keys"},
		{EncodeFieldList([][]string{{"1", "2", "3", "4", "5", "6", "7", "8", "9"}}), "path 0 has 9 keys"},
		{EncodeFieldList([][]string{{"a", "b"}, {"a", "b"}}), `path 1 (["a" "b"]) repeats path 0`},
		{EncodeFieldList([][]string{{"\xff"}}), "not UTF-8"},
		{append(EncodeFieldList([][]string{{"a"}}), 0), "1 bytes after"},
		{EncodeFieldList([][]string{{"abc"}})[:13], "past the end"},
		{EncodeFieldList([][]string{{"abc"}})[:10], "before its length"},
		{le.AppendUint32(nil, 2), "ends in path 0"},
		{make([]byte, MaxFieldListLen+1), "longer than"},
	} {
		_, err := ParseFieldList(c.list)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFieldList(%x): %v, want an error with %q", c.list, err, c.want)
		}
	}
	if _, err := ParseFieldList(EncodeFieldList([][]string{{"a"}, {"a", "b"}, {""}})); err != nil {
		t.Fatalf("a prefix and an empty key: %v", err)
	}
	if _, err := ParseFieldList(EncodeFields([][]string{{"a"}}, [][]string{{"b"}, {"b"}})); err == nil || !strings.Contains(err.Error(), `path 2 (["b"]) repeats path 1`) {
		t.Errorf("a number path twice: %v", err)
	}
	f, err := ParseFieldList(EncodeFields([][]string{{"a"}}, [][]string{{"a"}}))
	if err != nil || !f.Numbers() || f.Number(0) || !f.Number(1) {
		t.Fatalf("a path as a span and as a number: %v", err)
	}
	if f, _ := ParseFieldList(EncodeFieldList([][]string{{"a"}})); f.Numbers() {
		t.Fatal("a list without number paths says it has some")
	}
}
