package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// fieldsConfig is testdata/fields.c's configuration: a mode byte and a
// field list.
func fieldsConfig(mode byte, paths ...[]string) []byte {
	return append([]byte{mode}, abi.EncodeFieldList(paths)...)
}

// TestFieldsTable runs testdata/fields.c, a version 6 module that declares
// fields and echoes the row of the field table it finds for each record:
// the table is where ABI.md puts it, its spans point into the record's
// value in the guest's batch, and batches of any size carry it.
func TestFieldsTable(t *testing.T) {
	e := newTestEngine(t, Config{})
	for _, name := range []string{"fields", "fields_co"} {
		t.Run(name, func(t *testing.T) {
			m := loadFixture(t, e, name)
			i := newTestInstance(t, m, "job/fields[0]")
			paths := [][]string{{"a"}, {"b", "c"}, {"b"}}
			if err := i.Open(fieldsConfig('F', paths...)); err != nil {
				t.Fatalf("Open: %v", err)
			}
			if got := i.Fields(); len(got) != 3 || got[1][1] != "c" {
				t.Fatalf("Fields() = %q, want %q", got, paths)
			}
			in := []struct{ value, want string }{
				{`{"a":1,"b":{"c":"x"}}`, `1|1|"x"|{"c":"x"}`},
				{`{"b":[1],"a":"\u0041"}`, `1|"\u0041"|-|[1]`},
				{` {"a" : {"c":2} , "a":3} `, `1|{"c":2}|-|-`},
				{`{"a":1,"b":{"c":2}`, `0|-|-|-`},
				{`[1,2]`, `0|-|-|-`},
				{`{}`, `1|-|-|-`},
			}
			for _, size := range []int{1, 2, len(in)} {
				var c collector
				for start := 0; start < len(in); start += size {
					var recs []abi.Record
					for _, r := range in[start:min(start+size, len(in))] {
						recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(r.value), Timestamp: 5})
					}
					var err error
					if name == "fields_co" {
						err = i.ProcessInput(start%2, recs, c.emit)
					} else {
						err = i.Process(recs, c.emit)
					}
					if err != nil {
						t.Fatalf("batches of %d: %v", size, err)
					}
				}
				if len(c.recs) != len(in) {
					t.Fatalf("batches of %d: %d records out, want %d", size, len(c.recs), len(in))
				}
				for k, r := range c.recs {
					if string(r.Value) != in[k].want || string(r.Key) != "k" || r.Timestamp != 5 {
						t.Errorf("batches of %d, record %d %s: got %q (key %q, ts %d), want %q",
							size, k, in[k].value, r.Value, r.Key, r.Timestamp, in[k].want)
					}
				}
			}
		})
	}
}

// TestFieldsWithoutDeclaration: a version 6 module that declares nothing
// gets the batch encoding as before (fields.c in mode N echoes values).
func TestFieldsWithoutDeclaration(t *testing.T) {
	e := newTestEngine(t, Config{})
	i := newTestInstance(t, loadFixture(t, e, "fields"), "job/fields[0]")
	if err := i.Open([]byte{'N'}); err != nil {
		t.Fatal(err)
	}
	var c collector
	if err := i.Process([]abi.Record{{Value: []byte(`{"a":1}`)}, {Value: []byte("x")}}, c.emit); err != nil {
		t.Fatal(err)
	}
	if len(c.recs) != 2 || string(c.recs[0].Value) != `{"a":1}` || string(c.recs[1].Value) != "x" {
		t.Fatalf("got %+v", c.recs)
	}
	if i.Fields() != nil {
		t.Fatalf("Fields() = %q, want nil", i.Fields())
	}
}

// TestFieldsRefused: a declaration outside eddy_open, a second one, a bad
// list, and a module that imports fields but declares version 5 each fail
// with one line naming the problem.
func TestFieldsRefused(t *testing.T) {
	e := newTestEngine(t, Config{})
	m := loadFixture(t, e, "fields")
	for _, c := range []struct {
		name   string
		config []byte
		want   string
	}{
		{"twice", fieldsConfig('2', []string{"a"}), "eddy.fields called twice"},
		{"bad list", append([]byte{'F'}, 0, 0, 0, 0), "eddy.fields: field list declares 0 paths"},
		{"too deep", fieldsConfig('F', []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}), "path 0 has 9 keys"},
		{"repeated", fieldsConfig('F', []string{"a"}, []string{"a"}), "repeats path 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			i := newTestInstance(t, m, "job/fields[0]")
			err := i.Open(c.config)
			if err == nil || !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open: %v; want one line with %q", err, c.want)
			}
		})
	}
	t.Run("during eddy_process", func(t *testing.T) {
		i := newTestInstance(t, m, "job/fields[0]")
		if err := i.Open(fieldsConfig('P', []string{"a"})); err != nil {
			t.Fatal(err)
		}
		err := i.Process([]abi.Record{{Value: []byte(`{}`)}}, nil)
		if err == nil || !strings.Contains(err.Error(), "eddy.fields called during eddy_process; it is only valid during eddy_open") {
			t.Fatalf("Process: %v", err)
		}
	})
	t.Run("declares version 5", func(t *testing.T) {
		_, err := e.Load(context.Background(), "testdata/fields_v5.wasm")
		if err == nil || !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "eddy.fields, which needs ABI version 6, but declares version 5") {
			t.Fatalf("Load: %v", err)
		}
	})
	checkEchoWorks(t, e)
}
