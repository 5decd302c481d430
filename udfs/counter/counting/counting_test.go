package counting

import "testing"

func TestParse(t *testing.T) {
	tests := []struct{ config, err string }{
		{`{}`, ""},
		{` { } `, ""},
		{`[]`, "counter: config is not a JSON object"},
		{`{`, "counter: config is not valid JSON"},
		{`{"a": 1}`, `counter: config: unknown key "a"`},
	}
	for _, tc := range tests {
		err := Parse([]byte(tc.config))
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("Parse(%s) = %v, want %q", tc.config, err, tc.err)
		}
	}
}

func TestCount(t *testing.T) {
	if n, err := Decode(nil, false); n != 0 || err != nil {
		t.Fatalf("absent: %d %v", n, err)
	}
	b := Append(nil, 258)
	if n, err := Decode(b, true); n != 258 || err != nil || string(b) != "\x02\x01\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("%q: %d %v", b, n, err)
	}
	if _, err := Decode(b[:3], true); err == nil || err.Error() != "counter: the stored count has 3 bytes, want 8" {
		t.Fatalf("3 bytes: %v", err)
	}
	if got := AppendJSON(nil, []byte("a\"\x01"), 7); string(got) != `{"key":"a\"\u0001","count":7}` {
		t.Fatalf("output %s", got)
	}
}
