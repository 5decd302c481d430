package sdktest

// The test of the keyed guests (keyedguest/ and testdata/ckeyed.c): one
// script of commands, the same expected output from both languages, on
// the fake keyed host of internal/testkit/keyedhost (ABI version 2), which
// also checks the rules a guest SDK must follow.

import (
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit/keyedhost"
)

// keyedSuffix names the keyed build of a language's guest ("go-keyed").
const keyedSuffix = "-keyed"

// fire hands the guest the timers of kind due at upTo, in (time, key)
// order, in one batch.
func (in *instance) fire(kind int32, upTo int64) result {
	recs := keyedhost.TimerRecords(in.host.keyed.Due(kind, upTo, 0))
	b := abi.AppendBatch(nil, recs)
	ptr := in.write(b)
	defer in.host.keyed.Batch(recs)()
	return in.result(in.call(abi.ExportOnTimer, uint64(ptr), uint64(len(b))))
}

func TestKeyedGuests(t *testing.T) {
	big := strings.Repeat("B", 1000) // more than the SDKs' first read buffer
	for _, lang := range build(t) {
		t.Run(lang, func(t *testing.T) {
			in := start(t, lang+keyedSuffix)
			if v := in.call(abi.ExportABIVersion); v != 2 {
				t.Fatalf("ABI version %d, want 2", v)
			}
			if r := in.open(`{}`); r != ok {
				t.Fatal(r)
			}
			if lang == "go" && in.host.keyed.Decls[0].Name != "early" {
				t.Errorf("the state declared by init is not declared first: %+v", in.host.keyed.Decls)
			}
			in.host.keyed.Now = 1767225600000
			var recs []abi.Record
			add := func(key string, cmds ...string) {
				for _, c := range cmds {
					recs = append(recs, abi.Record{Key: []byte(key), Value: []byte(c)})
				}
			}
			add("a", "vget", "vput 1", "vget")
			add("b", "vget", "vput 2")
			add("a", "ladd x", "ladd "+big, "ladd z", "lget", "lclear", "lget")
			add("a", "mput k2=v2", "mput k1=v1", "mput k3=", "mget k1", "mget nope", "mentries", "mdel k2", "mentries")
			add("a", "time", "key", "timer e 100", "timer e 50", "timer p 70", "timer e 200", "untimer e 200")
			add("b", "timer e 60", "key", "vget")
			if r := in.process(recs...); r != ok {
				t.Fatal(r)
			}
			if r := in.fire(0, 150); r != ok {
				t.Fatal(r)
			}
			if r := in.fire(1, 80); r != ok {
				t.Fatal(r)
			}
			want := []string{
				"a -", "a 1", "b -",
				"a [x," + big + ",z]", "a []",
				"a v1", "a -", "a {k1=v1,k2=v2,k3=}", "a {k1=v1,k3=}",
				"a -9223372036854775808 1767225600000", "a key a early a",
				"b key b early b", "b 2",
				"a fired e a 50 1", "b fired e b 60 2", "a fired e a 100 1",
				"a fired p a 70 1",
			}
			var got []string
			for _, r := range in.host.records {
				got = append(got, string(r.Key)+" "+string(r.Value))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("output\n %q\nwant\n %q", got, want)
			}
			if left := in.host.keyed.PendingTimers(); len(left) != 0 {
				t.Errorf("timers left: %v", left)
			}
			r := in.process(abi.Record{Key: []byte("a"), Value: []byte("declare")})
			wantMsg := map[string]string{
				"go": `panic: keyed: state "late" declared after Open: declare state in Open or in an init function`,
				"c":  "eddy: value state late declared outside eddy_op_open",
			}[lang]
			if r.status != abi.StatusError || r.message != wantMsg {
				t.Errorf("declaring in process: %+v, want %q", r, wantMsg)
			}
		})
	}
}
