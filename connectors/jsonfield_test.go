package connectors

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestJSONField(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		field  string
		want   string
		wantOK bool
	}{
		{"first", `{"a":1,"b":2}`, "a", "1", true},
		{"last", `{"a":1,"b":2}`, "b", "2", true},
		{"missing", `{"a":1}`, "b", "", false},
		{"empty object", `{}`, "a", "", false},
		{"spaces", " { \"a\" :\t[1, {\"b\":\"}\"}] , \"c\":true } ", "a", `[1, {"b":"}"}]`, true},
		{"nested same name ignored", `{"x":{"a":1},"a":2}`, "a", "2", true},
		{"escaped quote in string", `{"s":"a\"b","a":3}`, "a", "3", true},
		{"escaped name", `{"\u0061":4}`, "a", "4", true},
		{"duplicate: last wins", `{"a":1,"a":2}`, "a", "2", true},
		{"string value", `{"a":"x,y}"}`, "a", `"x,y}"`, true},
		{"not an object", `[{"a":1}]`, "a", "", false},
		{"scalar", `"a"`, "a", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := jsonField([]byte(tc.data), tc.field)
			if ok != tc.wantOK || string(got) != tc.want {
				t.Fatalf("jsonField = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// FuzzJSONField checks the field scanner against encoding/json on valid
// JSON, and that it never panics on anything else.
func FuzzJSONField(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,2,{"a":3}],"c":"x\"y"}`), "a")
	f.Add([]byte(`{"ts":"2026-01-01T00:00:00Z","card":"card-0001"}`), "card")
	f.Add([]byte(`{"\u00e9":1, "é":2}`), "é")
	f.Add([]byte(`{"a":`), "a")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		got, ok := jsonField(data, name)
		if !json.Valid(data) {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil || m == nil {
			if ok {
				t.Fatalf("found %q in a non-object", got)
			}
			return
		}
		want, wantOK := m[name]
		if ok != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("jsonField(%q, %q) = %q, %v; encoding/json says %q, %v", data, name, got, ok, want, wantOK)
		}
	})
}
