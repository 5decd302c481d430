package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// The C SDK's JSON reader (sdk/c/eddy_json.c) is held here to the Go one
// (abi/jsonscan), and through it to encoding/json, inside real Wasm
// guests: testdata/cjson.c built twice, with -msimd128 (the SIMD string
// scan, as udfs/Makefile builds the C modules) and without (the SWAR
// fallback). Every input is checked where it ends at the very end of the
// guest's linear memory, so that a load past it traps, and at 16
// alignments with bytes after it that would change the verdict if they
// were read.

// jsonBuilds are the builds of testdata/cjson.c: the flags beyond the
// C modules' common ones.
var jsonBuilds = []struct {
	name  string
	flags []string
}{
	{"simd128", []string{"-msimd128"}},
	{"swar", nil},
}

const (
	pageSize = 64 << 10
	// maxJSONDoc is the largest input the guests take: the scratch pages
	// hold one each.
	maxJSONDoc = pageSize - 4096
	maxMembers = pageSize / 16
)

// jsonGuest is one instance of a build of testdata/cjson.c, with four
// pages of its memory for the tests: the unquote output, the members'
// spans, a placement with trailing bytes (and the lookup's name), and the
// last page, whose inputs end where memory ends.
type jsonGuest struct {
	name                                             string
	mod                                              api.Module
	valid, valueEnd, lookup, members, unquote, equal api.Function
	dst, out, mid, top                               uint32
}

var jsonEnv struct {
	once   sync.Once
	err    error
	guests []*jsonGuest
}

// jsonGuests builds and instantiates the guests once per test binary.
func jsonGuests(tb testing.TB) []*jsonGuest {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds Wasm modules")
	}
	if _, err := exec.LookPath("clang"); err != nil {
		tb.Skip("clang is not installed: the C SDK is not tested here")
	}
	jsonEnv.once.Do(func() { jsonEnv.guests, jsonEnv.err = startJSONGuests() })
	if jsonEnv.err != nil {
		tb.Fatal(jsonEnv.err)
	}
	return jsonEnv.guests
}

func startJSONGuests() ([]*jsonGuest, error) {
	ctx := context.Background()
	// Never closed: the guests live as long as the test binary. The
	// default configuration compiles (to SSE for SIMD) where wazero can.
	r := wazero.NewRuntime(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	dir, err := os.MkdirTemp("", "sdktest-cjson")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var guests []*jsonGuest
	for _, b := range jsonBuilds {
		out := filepath.Join(dir, "cjson-"+b.name+".wasm")
		args := append([]string{"--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-mbulk-memory", "-std=c99",
			"-Wall", "-Wextra", "-Werror", "-I", "../../c", "-o", out}, b.flags...)
		args = append(args, "testdata/cjson.c", "../../c/eddy_json.c")
		if msg, err := exec.Command("clang", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build testdata/cjson.c (%s): %v\n%s", b.name, err, msg)
		}
		wasm, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(b.name).WithStartFunctions("_initialize"))
		if err != nil {
			return nil, fmt.Errorf("instantiate the %s build of testdata/cjson.c: %w", b.name, err)
		}
		base, ok := mod.Memory().Grow(4)
		if !ok {
			return nil, fmt.Errorf("%s: cannot grow memory", b.name)
		}
		g := &jsonGuest{name: b.name, mod: mod,
			valid: mod.ExportedFunction("json_valid"), valueEnd: mod.ExportedFunction("json_value_end"),
			lookup: mod.ExportedFunction("json_lookup"), members: mod.ExportedFunction("json_members"),
			unquote: mod.ExportedFunction("json_unquote"), equal: mod.ExportedFunction("json_equal"),
			dst: base * pageSize, out: (base + 1) * pageSize, mid: (base + 2) * pageSize, top: (base + 4) * pageSize}
		if g.top != mod.Memory().Size() {
			return nil, fmt.Errorf("%s: memory ends at %d, not %d", b.name, mod.Memory().Size(), g.top)
		}
		guests = append(guests, g)
	}
	return guests, nil
}

func (g *jsonGuest) call(f api.Function, params ...uint64) (uint64, error) {
	res, err := f.Call(context.Background(), params...)
	if err != nil {
		return 0, err
	}
	if len(res) == 0 {
		return 0, nil
	}
	return res[0], nil
}

// verdict is what one reader says about an input.
type verdict struct {
	Valid   bool
	End     int    // ValueEnd after the leading whitespace
	Lookup  string // of member "a": its offset and length, or the step
	Members string // the keys' and values' offsets and lengths, or "malformed"
	Unquote string // of the input as a raw string span
	Equal   bool   // Equal(input, the Go reader's unquoted input)
}

var lookupSteps = map[jsonscan.Step]string{jsonscan.Malformed: "malformed", jsonscan.End: "absent"}

// want is the Go reader's verdict; full adds the lookup and the members.
func want(doc []byte, full bool) verdict {
	v := verdict{Valid: jsonscan.Valid(doc), End: jsonscan.ValueEnd(doc, skipSpace(doc))}
	unq := jsonscan.AppendUnquote(nil, doc)
	v.Unquote, v.Equal = string(unq), jsonscan.Equal(doc, unq)
	if !full {
		return v
	}
	value, st := jsonscan.Lookup(doc, []byte("a"))
	cursor := 0
	if st == jsonscan.Field {
		v.Lookup = span(doc, &cursor, value)
	} else {
		v.Lookup = lookupSteps[st]
	}
	it, ok := jsonscan.Objects(doc)
	if !ok {
		v.Members = "malformed"
		return v
	}
	var ms []string
	cursor = 0
	for {
		k, val, st := it.Next()
		if st == jsonscan.Malformed {
			v.Members = "malformed"
			return v
		}
		if st == jsonscan.End {
			break
		}
		if len(ms) < maxMembers {
			ms = append(ms, span(doc, &cursor, k)+" "+span(doc, &cursor, val))
		}
	}
	v.Members = strings.Join(ms, ",")
	return v
}

// span is s's offset in doc and its length; s starts at or after *cursor,
// which moves to it (spans come in order, so all of them cost one pass).
func span(doc []byte, cursor *int, s []byte) string {
	for ; *cursor < len(doc); *cursor++ {
		if &doc[*cursor] == &s[0] {
			return fmt.Sprintf("%d+%d", *cursor, len(s))
		}
	}
	panic("span not in doc")
}

func skipSpace(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// read is the C reader's verdict on doc written at ptr.
func (g *jsonGuest) read(doc []byte, ptr uint32, full bool) (verdict, error) {
	var v verdict
	mem := g.mod.Memory()
	if !mem.Write(ptr, doc) {
		return v, fmt.Errorf("cannot write %d bytes at %d", len(doc), ptr)
	}
	p, n := uint64(ptr), uint64(len(doc))
	res, err := g.call(g.valid, p, n)
	if err != nil {
		return v, fmt.Errorf("eddy_json_valid: %w", err)
	}
	v.Valid = res != 0
	if res, err = g.call(g.valueEnd, p, n, uint64(skipSpace(doc))); err != nil {
		return v, fmt.Errorf("eddy_json_value_end: %w", err)
	}
	v.End = int(int64(res))
	if res, err = g.call(g.unquote, p, n, uint64(g.dst)); err != nil {
		return v, fmt.Errorf("eddy_json_unquote: %w", err)
	}
	unq, _ := mem.Read(g.dst, uint32(res))
	v.Unquote = string(unq)
	// The name of json_lookup and the unquoted string of json_equal go to
	// the members' page, which json_members overwrites afterwards.
	mem.Write(g.out, unq)
	if res, err = g.call(g.equal, p, n, uint64(g.out), uint64(len(unq))); err != nil {
		return v, fmt.Errorf("eddy_json_equal: %w", err)
	}
	v.Equal = res != 0
	if !full {
		return v, nil
	}
	mem.WriteByte(g.out, 'a')
	if res, err = g.call(g.lookup, p, n, uint64(g.out), 1); err != nil {
		return v, fmt.Errorf("eddy_json_lookup: %w", err)
	}
	switch int64(res) {
	case -1:
		v.Lookup = lookupSteps[jsonscan.Malformed]
	case -2:
		v.Lookup = lookupSteps[jsonscan.End]
	default:
		v.Lookup = fmt.Sprintf("%d+%d", res>>32, uint32(res))
	}
	if res, err = g.call(g.members, p, n, uint64(g.out), maxMembers); err != nil {
		return v, fmt.Errorf("eddy_json_members: %w", err)
	}
	if int32(res) < 0 {
		v.Members = "malformed"
		return v, nil
	}
	var ms []string
	for k := uint32(0); k < min(uint32(res), maxMembers); k++ {
		var f [4]uint32
		for j := range f {
			f[j], _ = mem.ReadUint32Le(g.out + 16*k + 4*uint32(j))
		}
		ms = append(ms, fmt.Sprintf("%d+%d %d+%d", f[0], f[1], f[2], f[3]))
	}
	v.Members = strings.Join(ms, ",")
	return v, nil
}

// check compares every build's verdict on doc with the Go reader's, doc
// placed at the end of memory and at 16 alignments before bytes that
// would close a string or the document.
func check(t *testing.T, guests []*jsonGuest, doc []byte, full bool) {
	t.Helper()
	if len(doc) > maxJSONDoc {
		t.Skipf("%d bytes: longer than the guests take", len(doc))
	}
	w := want(doc, full)
	poison := bytes.Repeat([]byte(`"]}`), 16)
	for _, g := range guests {
		for align := -1; align < 16; align++ {
			ptr := g.top - uint32(len(doc))
			where := "at the end of memory"
			if align >= 0 {
				ptr = g.mid + 1024 + uint32(align)
				where = fmt.Sprintf("at %d mod 16, before %q", align, poison[:3])
				g.mod.Memory().Write(ptr+uint32(len(doc)), poison)
			}
			got, err := g.read(doc, ptr, full)
			if err != nil {
				t.Fatalf("%s build, %q %s: %v", g.name, doc, where, err)
			}
			if got != w {
				t.Fatalf("%s build, %q %s:\n got %+v\nwant %+v (abi/jsonscan)", g.name, doc, where, got, w)
			}
		}
	}
}

// depth over-approximates the nesting of b (brackets inside strings count).
func jsonDepth(b []byte) int { return bytes.Count(b, []byte("[")) + bytes.Count(b, []byte("{")) }

// TestCJSONStringsEveryOffset puts each byte or sequence that ends,
// escapes or breaks a string, and some that do not (non-ASCII among them),
// at every offset of strings of 0 to 40 bytes: around both 8-byte (SWAR)
// and 16-byte (SIMD) steps, with the string's end at every distance from
// the end of the input, and every prefix of each input, so that strings
// are cut at every offset too.
func TestCJSONStringsEveryOffset(t *testing.T) {
	guests := jsonGuests(t)
	specials := []string{`"`, `\`, "\x00", "\x01", "\x1f", " ", "\x7f", "\x80", "\xff", "!", "#", "[", "]", "{",
		`\"`, `\\`, `\/`, `\n`, `\t`, `\u00e9`, `\uD83D\uDE00`, `\ud800`, `\x`, `\u12`, `\u12g4`, "\t", "\n",
		"é", "😀", "\xe2\x82"}
	var docs int
	for _, sp := range specials {
		for n := 0; n <= 40; n++ {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + sp + strings.Repeat("b", n-at)
				for _, shape := range []string{`"%s"`, `["%s",1]`, `{"%s":"%s"}`} {
					doc := []byte(strings.ReplaceAll(shape, "%s", s))
					if got, w := jsonscan.Valid(doc), json.Valid(doc); got != w {
						t.Fatalf("abi/jsonscan says Valid(%q) = %v, encoding/json %v", doc, got, w)
					}
					check(t, guests, doc, shape[0] == '{')
					docs++
					// The prefixes at the end of memory only: a cut string
					// must not be read on past the input.
					if at == n || n%8 == 7 {
						for k := 0; k < len(doc); k++ {
							checkEnd(t, guests, doc[:k])
							docs++
						}
					}
				}
			}
		}
	}
	t.Logf("%d inputs, each in both builds", docs)
}

// TestCJSONNumbersEveryLength does for the digit runs of numbers (which
// the SIMD build also scans 16 bytes at a time) what
// TestCJSONStringsEveryOffset does for strings: runs of 0 to 40 digits in
// each part of a number, a byte after them that does or does not end the
// number, and every prefix.
func TestCJSONNumbersEveryLength(t *testing.T) {
	guests := jsonGuests(t)
	var docs int
	for n := 0; n <= 40; n++ {
		d := strings.Repeat("7", n)
		for _, num := range []string{d, "-" + d, "0" + d, "1" + d, "1." + d, "-0." + d + "5", "1e" + d, "2E+" + d,
			"3e-" + d, "9" + d + ".5" + d + "e" + d} {
			for _, shape := range []string{"%s", "[%s,1]", `{"a":%s}`, "%sx", "%s.", "%s:", "%s/", "%s ", "%s\x00"} {
				doc := []byte(strings.ReplaceAll(shape, "%s", num))
				check(t, guests, doc, shape[0] == '{')
				docs++
				for k := 0; k < len(doc); k++ {
					checkEnd(t, guests, doc[:k])
					docs++
				}
			}
		}
	}
	t.Logf("%d inputs, each in both builds", docs)
}

// checkEnd is check with the input at the end of memory only.
func checkEnd(t *testing.T, guests []*jsonGuest, doc []byte) {
	t.Helper()
	w := want(doc, false)
	for _, g := range guests {
		got, err := g.read(doc, g.top-uint32(len(doc)), false)
		if err != nil {
			t.Fatalf("%s build, %q at the end of memory: %v", g.name, doc, err)
		}
		if got != w {
			t.Fatalf("%s build, %q at the end of memory:\n got %+v\nwant %+v (abi/jsonscan)", g.name, doc, got, w)
		}
	}
}

// FuzzCJSON feeds arbitrary bytes to both builds of the C reader: they
// must agree with the Go reader (and on validity with encoding/json) on
// every function the exports reach, and never trap.
func FuzzCJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, "b", {"c": null}], "d": -1.5e3}`, `"\ud83d\ude00"`, `[]`,
		`{"a":1,}`, `"\u12"`, `{"a":"\"}`, "\"\xff\"", `1e999`, `[[[[]]]]`,
		`{"url":"https://www.nexmark.com/abc/def_g/hij/item.htm?query=1","a":"` + strings.Repeat("x", 150) + `"}`,
		`{"a" : "q\"}{" , "a":2}`, "\"" + strings.Repeat("0123456789abcdef", 3) + "\\u00e9\"", "  \"abc\t\"  "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		guests := jsonGuests(t)
		if jsonDepth(doc) <= jsonscan.MaxDepth && jsonscan.Valid(doc) != json.Valid(doc) {
			t.Fatalf("abi/jsonscan says Valid(%q) = %v, encoding/json %v", doc, !json.Valid(doc), json.Valid(doc))
		}
		check(t, guests, doc, true)
	})
}
