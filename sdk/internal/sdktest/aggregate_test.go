package sdktest

// The aggregate and window function guests (ABI version 3): aggguest/ and
// testdata/cagg.c, windowguest/ and testdata/cwindow.c. One script each,
// the same output from both languages.

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

const (
	aggSuffix    = "-agg"
	windowSuffix = "-window"
)

// aggCall writes recs as one batch (none for eddy_agg_create), calls
// export, and returns the values emitted and the call's result.
func (in *instance) aggCall(export string, recs ...abi.Record) ([]string, result) {
	in.host.records = nil
	var st uint64
	if export == abi.ExportAggCreate {
		st = in.call(export)
	} else {
		b := abi.AppendBatch(nil, recs)
		ptr := in.write(b)
		st = in.call(export, uint64(ptr), uint64(len(b)))
	}
	var values []string
	for _, r := range in.host.records {
		values = append(values, string(r.Value))
	}
	return values, in.result(st)
}

func group(acc string, n int) abi.Record {
	return abi.Record{Key: binary.LittleEndian.AppendUint32(nil, uint32(n)), Value: []byte(acc), Timestamp: abi.NoTimestamp}
}

func value(v string) abi.Record { return abi.Record{Key: []byte("k"), Value: []byte(v), Timestamp: 3} }

func TestAggregateGuests(t *testing.T) {
	for _, lang := range build(t) {
		t.Run(lang, func(t *testing.T) {
			in := start(t, lang+aggSuffix)
			if v := in.call(abi.ExportABIVersion); v != abi.AggregateVersion {
				t.Fatalf("ABI version %d", v)
			}
			if r := in.open(`"error"`); r.status != abi.StatusError || r.message != "open refused" {
				t.Fatalf("open: %+v", r)
			}
			if r := in.open(`{}`); r != ok {
				t.Fatal(r)
			}
			steps := []struct {
				export string
				recs   []abi.Record
				want   []string
			}{
				{abi.ExportAggCreate, nil, []string{""}},
				{abi.ExportAggAdd, []abi.Record{group("", 2), value("a"), value("b"), group("x", 0), group("y", 1), value("")},
					[]string{"+a+b", "x", "y+"}},
				{abi.ExportAggMerge, []abi.Record{group("a", 3), value("b"), value(""), value("c"), group("", 0)},
					[]string{"(((a|b)|)|c)", ""}},
				{abi.ExportAggResult, []abi.Record{value(`a"b`), value("")}, []string{`"a\"b"`, `""`}},
				{abi.ExportAggAdd, nil, nil},
			}
			for _, s := range steps {
				got, r := in.aggCall(s.export, s.recs...)
				if r != ok || !slices.Equal(got, s.want) {
					t.Fatalf("%s: %q, %+v; want %q", s.export, got, r, s.want)
				}
			}
			failures := []struct {
				name, export string
				recs         []abi.Record
				want         string
			}{
				{"add error", abi.ExportAggAdd, []abi.Record{group("", 0), group("", 2), value("a"), value("error")}, "bad record"},
				{"merge error", abi.ExportAggMerge, []abi.Record{group("a", 1), value("error")}, "bad accumulator"},
				{"result error", abi.ExportAggResult, []abi.Record{value("ok"), value("error")}, "bad accumulator"},
				{"panic", abi.ExportAggAdd, []abi.Record{group("", 1), value("panic")}, "panic: boom"},
				{"silent", abi.ExportAggAdd, []abi.Record{group("", 1), value("silent")}, "operator returned 7 without calling eddy_fail"},
				{"header", abi.ExportAggMerge, []abi.Record{value("a")},
					"aggregate: eddy_agg_merge: record 0 should be a group header, with a 4-byte key, but its key has 1 bytes"},
				{"members", abi.ExportAggAdd, []abi.Record{group("", 2), value("a")},
					"aggregate: eddy_agg_add: the group header at record 0 announces 2 records, but only 1 follow"},
				{"process", abi.ExportProcess, []abi.Record{value("a")}, "is an aggregate module"},
				{"process nothing", abi.ExportProcess, nil, "is an aggregate module"},
			}
			for _, tc := range failures {
				// Go has no status without an error; C has no panics.
				if lang == "go" && tc.name == "silent" || lang == "c" && tc.name == "panic" {
					continue
				}
				var got []string
				var r result
				if tc.export == abi.ExportProcess {
					r = in.process(tc.recs...)
				} else {
					got, r = in.aggCall(tc.export, tc.recs...)
				}
				if r.status != abi.StatusError || !strings.Contains(r.message, tc.want) || len(in.host.records) != 0 {
					t.Errorf("%s: %+v, emitted %q; want status 1 with %q", tc.name, r, got, tc.want)
				}
				if tc.name == "panic" && (len(in.host.logs) == 0 || !strings.Contains(in.host.logs[len(in.host.logs)-1], "main.trail.Add")) {
					t.Errorf("no stack trace in the log: %q", in.host.logs)
				}
			}
			if r := in.close(); r != ok {
				t.Fatal(r)
			}
		})
	}
}

func descriptor(key string, start, end int64) abi.Record {
	v := binary.LittleEndian.AppendUint64(nil, uint64(start))
	v = binary.LittleEndian.AppendUint64(v, uint64(end))
	return abi.Record{Key: []byte(key), Value: v, Timestamp: end - 1}
}

func TestWindowGuests(t *testing.T) {
	for _, lang := range build(t) {
		t.Run(lang, func(t *testing.T) {
			in := start(t, lang+windowSuffix)
			if v := in.call(abi.ExportABIVersion); v != 1 {
				t.Fatalf("ABI version %d", v)
			}
			if r := in.open(`{}`); r != ok {
				t.Fatal(r)
			}
			windows := [][]abi.Record{
				{descriptor("k", 0, 10), value("a"), {Value: []byte("b"), Timestamp: 9}},
				{descriptor("", -20, -10)},
				{descriptor("j", 1<<40, 1<<41), descriptor("x", 1, 2)}, // only record 0 is the descriptor
			}
			for _, w := range windows {
				if r := in.process(w...); r != ok {
					t.Fatal(r)
				}
			}
			want := []string{
				`k [0,10) 2: a@3 b@9 @9`,
				` [-20,-10) 0: @-11`,
				"j [1099511627776,2199023255552) 1: \x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00@1 @2199023255551",
			}
			var got []string
			for _, r := range in.host.records {
				got = append(got, string(r.Key)+" "+string(r.Value)+" @"+strconv.FormatInt(r.Timestamp, 10))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%q\nwant %q", got, want)
			}
			in.host.records = nil
			for _, tc := range []struct {
				recs []abi.Record
				want string
			}{
				{nil, "window: an empty batch"},
				{[]abi.Record{value("a")}, "window: record 0 is not a window descriptor: its value has 1 bytes, want 16"},
				{[]abi.Record{descriptor("k", 0, 1), value("error")}, "bad element"},
			} {
				if r := in.process(tc.recs...); r.status != abi.StatusError || !strings.Contains(r.message, tc.want) || len(in.host.records) != 0 {
					t.Errorf("%d records: %+v; want status 1 with %q", len(tc.recs), r, tc.want)
				}
			}
		})
	}
}

// TestCLinkRules: the C SDK's files that define what a module is refuse
// to be linked together, and an aggregate module cannot also define
// eddy_op_process.
func TestCLinkRules(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	if _, err := exec.LookPath("clang"); err != nil {
		t.Skip("clang is not installed")
	}
	dir := t.TempDir()
	op := filepath.Join(dir, "op.c")
	if err := os.WriteFile(op, []byte("#include \"eddy.h\"\nint eddy_op_process(const eddy_record *r) { return eddy_emit(r); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		srcs []string
		want string
	}{
		"aggregate with keyed state": {[]string{"testdata/cagg.c", "../../c/eddy_aggregate.c", "../../c/eddy_json.c", "../../c/eddy_keyed.c"}, "duplicate symbol: eddy__stateful_or_aggregate"},
		"aggregate and operator":     {[]string{op, "testdata/cagg.c", "../../c/eddy_aggregate.c", "../../c/eddy_json.c"}, "duplicate symbol: eddy_op_process"},
		"aggregate and window":       {[]string{"testdata/cagg.c", "testdata/cwindow.c", "../../c/eddy_aggregate.c", "../../c/eddy_window.c", "../../c/eddy_json.c"}, "duplicate symbol"},
		"window and operator":        {[]string{op, "testdata/cwindow.c", "../../c/eddy_window.c"}, "duplicate symbol: eddy_op_process"},
		// eddy_value_state2 needs ABI version 4, which eddy_keyed_schema.c declares.
		"schema without eddy_keyed_schema.c": {[]string{"../../../udfs/counter/c-v2/counter_v2.c", "../../c/eddy_keyed.c", "../../c/eddy_json.c"}, "undefined symbol: eddy__schema_linked"},
	} {
		args := append([]string{"--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-flto", "-mbulk-memory", "-msimd128", "-std=c99", "-I", "../../c",
			"-o", filepath.Join(dir, "out.wasm"), "../../c/eddy.c"}, tc.srcs...)
		msg, err := exec.Command("clang", args...).CombinedOutput()
		if err == nil || !strings.Contains(string(msg), tc.want) {
			t.Errorf("%s: %v\n%s\nwant a link error with %q", name, err, msg, tc.want)
		}
	}
}
