package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/state"
)

// TestTwoInputOperator drives udfs/regularjoin (Go, C, Rust and AssemblyScript), a two-input
// operator of ABI version 5, with records of both inputs: the state it
// keeps under a key is one for both inputs, and the report timer that the
// first record of a key sets (from either input) fires once.
func TestTwoInputOperator(t *testing.T) {
	e := newKeyedEngine(t)
	for _, lang := range []string{"go", "c", "rust", "as"} {
		t.Run(lang, func(t *testing.T) {
			m := loadUDF(t, e, "regular-join-"+lang)
			if !m.IsTwoInput() || m.abiVersion != abi.TwoInputVersion {
				t.Fatalf("IsTwoInput %v, ABI version %d; want a two-input module of version %d", m.IsTwoInput(), m.abiVersion, abi.TwoInputVersion)
			}
			st := newStore(t, allGroups, nil)
			i := newKeyedInstance(t, m, "job/join[0]", st, `{"report_at":1000}`)
			var c collector
			rec := func(key, value string, ts int64) abi.Record {
				return abi.Record{Key: []byte(key), Value: []byte(value), Timestamp: ts}
			}
			steps := []struct {
				input int
				recs  []abi.Record
			}{
				{0, []abi.Record{rec("a", `{"p":1}`, 1)}},
				{1, []abi.Record{rec("a", `{"x":1}`, 2), rec("b", `{"x":2}`, 3)}},
				{0, []abi.Record{rec("a", `{"p":2}`, 4)}},
				{1, []abi.Record{rec("a", `{"x":3}`, 5)}},
			}
			for _, s := range steps {
				if err := i.ProcessInput(s.input, s.recs, c.emit); err != nil {
					t.Fatalf("ProcessInput(%d): %v", s.input, err)
				}
			}
			fireTimers(t, i, st, state.EventTime, 999, c.emit) // not due yet
			fireTimers(t, i, st, state.EventTime, 1000, c.emit)
			fireTimers(t, i, st, state.EventTime, 5000, c.emit) // fired once: nothing left
			var got []string
			for _, r := range c.recs {
				got = append(got, string(r.Key)+" "+string(r.Value))
			}
			want := []string{
				`a {"left":{"p":1},"right":{"x":1}}`,
				`a {"left":{"p":2},"right":{"x":1}}`,
				`a {"left":{"p":1},"right":{"x":3}}`,
				`a {"left":{"p":2},"right":{"x":3}}`,
				// Timers of the same time fire in the store's order.
				`b {"key":"b","left":0,"right":1}`,
				`a {"key":"a","left":2,"right":2}`,
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("emitted\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The report cleared the state: a's next record joins nothing.
			c.recs = nil
			if err := i.ProcessInput(1, []abi.Record{rec("a", `{"x":4}`, 6)}, c.emit); err != nil {
				t.Fatal(err)
			}
			if len(c.recs) != 0 {
				t.Fatalf("after the cleanup timer a record joined %d records", len(c.recs))
			}
			// A one-input call fails with the SDK's message, and an input
			// other than 0 and 1 is refused by the host.
			if err := i.Process([]abi.Record{rec("a", "{}", 7)}, c.emit); err == nil || !strings.Contains(err.Error(), "two-input operator") {
				t.Fatalf("Process on a two-input module: %v", err)
			}
		})
	}
}

// TestTwoInputRefused: a module that exports eddy_process2 but declares a
// version before 5 is refused when it is loaded, and a one-input module
// cannot be handed an input.
func TestTwoInputRefused(t *testing.T) {
	e := newTestEngine(t, DefaultConfig())
	const i32 = 0x7f
	funcs := append(abiFuncs(), wasmFunc{export: abi.ExportProcess2, params: []byte{i32, i32, i32}, results: []byte{i32}, body: []byte{0x41, 0}})
	_, err := e.Compile(context.Background(), "old-two", wasmModule{funcs: funcs, exportMemory: true}.bytes())
	if err == nil || !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "exports eddy_process2 but declares ABI version 1; two-input modules declare version 5") {
		t.Fatalf("Compile: %v", err)
	}
	m := loadUDF(t, newKeyedEngine(t), "counter-c")
	if m.IsTwoInput() {
		t.Fatal("counter-c is two-input")
	}
	st := newStore(t, allGroups, nil)
	i := newKeyedInstance(t, m, "job/count[0]", st, `{}`)
	if err := i.ProcessInput(1, nil, nil); err == nil || !strings.Contains(err.Error(), "is a one-input operator") {
		t.Fatalf("ProcessInput on a one-input module: %v", err)
	}
}
