package sdktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/connectors/nexmark"
)

const walkSuffix = "-jsonwalk"

// TestCJSONReader walks JSON values with the C SDK's reader inside a real
// Wasm module (testdata/cjsonwalk.c), three ways — containers iterated in
// place (eddy_json_enter/eddy_json_leave), the two-pass eddy_json_next,
// and enter-then-leave without reading — and compares what it rebuilds
// from the reader's spans with encoding/json's verdict and Compact.
func TestCJSONReader(t *testing.T) {
	build(t)
	if runtime.modules["c"+walkSuffix] == nil {
		t.Skip("clang is not installed")
	}
	in := start(t, "c"+walkSuffix)
	if r := in.open(""); r != ok {
		t.Fatalf("open: %+v", r)
	}
	inputs := jsonCorpus(t)
	for _, mode := range []string{"enter", "next", "skip"} {
		for _, v := range inputs {
			in.host.records = nil
			if r := in.process(abi.Record{Key: []byte(mode), Value: v}); r != ok {
				t.Fatalf("%s %q: %+v", mode, v, r)
			}
			if len(in.host.records) != 1 {
				t.Fatalf("%s %q: %d records out", mode, v, len(in.host.records))
			}
			got, want := string(in.host.records[0].Value), expectWalk(mode, v)
			if got != want {
				t.Errorf("%s %q:\n got %s\nwant %s", mode, v, got, want)
			}
		}
	}
}

func expectWalk(mode string, v []byte) string {
	if !json.Valid(v) {
		return "malformed"
	}
	t := bytes.TrimLeft(v, " \t\r\n")
	if t[0] != '{' && t[0] != '[' {
		return "scalar"
	}
	if mode == "skip" {
		return string(t[0]) + map[byte]string{'{': "}", '[': "]"}[t[0]]
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		panic(err)
	}
	return b.String()
}

// jsonCorpus: hand-written values and near-misses, Nexmark events with
// each of their prefixes cut short or a byte changed, and strings whose
// end falls at every offset around the scanners' 8- and 16-byte steps.
func jsonCorpus(t *testing.T) [][]byte {
	var c [][]byte
	for _, s := range []string{
		`{}`, `[]`, ` { } `, `[1,2,3]`, `{"a":1}`, `{"a":{"b":{"c":[1,{"d":"e"}]}},"f":[[],{}]}`,
		`[{"a":[{"b":[]}]},[[[1]]],"x",null,true,false,-0.5e+3]`,
		`{"a\"b":"c\\d","\u00e9":"\ud83d\ude00"}`, "{\n\t\"a\" :\r [ 1 , 2 ] }",
		`1`, `"s"`, `null`, ` true `,
		`{`, `}`, `[`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `{"a":1}}`, `{"a":1} x`, `[1 2]`,
		`{"a":{"b":1}`, `{"a":[1}`, `{"a":[1,{"b":2]}]}`, `{a:1}`, `{"a":01}`, `{"a":"\x01"}`, `{"a":"\q"}`,
		`[{"a":1},{"b":2}`, `{"a":{"b":{}}}  `, `{"a":{"b":{}}}]`,
	} {
		c = append(c, []byte(s))
	}
	g, err := nexmark.New(nexmark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for n := uint64(0); n < 60; n++ {
		ev, _ := g.AppendJSON(nil, n)
		c = append(c, ev)
		if n < 3 {
			for cut := 1; cut < len(ev); cut += 7 {
				c = append(c, ev[:cut])
			}
			for i := 0; i < len(ev); i += 5 {
				for _, b := range []byte{'"', '}', ']', ',', 0x01, '\\'} {
					m := bytes.Clone(ev)
					m[i] = b
					c = append(c, m)
				}
			}
		}
	}
	for n := 0; n < 40; n++ {
		s := strings.Repeat("x", n)
		for _, v := range []string{
			fmt.Sprintf(`{"k":"%s","n":{"m":["%s"]}}`, s, s),
			fmt.Sprintf(`{"k":"%s\"%s"}`, s, s), fmt.Sprintf(`{"k":"%s\\"}`, s),
			fmt.Sprintf(`{"k":"%s`, s), fmt.Sprintf("{\"k\":\"%s\x1f\"}", s), fmt.Sprintf(`{"k":"%sé"}`, s),
		} {
			c = append(c, []byte(v))
		}
	}
	return c
}
