//go:build !wasip1

package udfs_test

// AssemblyScript's abort through the real host: the SDK routes it (asc
// --use abort=...) to eddy.fail and a trap, so the task fails with one
// line that says what went wrong and where, not a bare "unreachable".

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

func TestAssemblyScriptAbort(t *testing.T) {
	m := hostModule(t, "abort-as")
	tests := []struct {
		name, value string
		want        []string // in the error, in order
	}{
		{"assert", "a", []string{"eddy_process trapped: abort: the value is too short at ../sdk/assemblyscript/testdata/abort.ts:", "(wasm error: unreachable)"}},
		{"index out of range", "i", []string{"eddy_process trapped: abort: Index out of range at ~lib/", "(wasm error: unreachable)"}},
		{"throw", "t", []string{"eddy_process trapped: abort: thrown by the operator at ../sdk/assemblyscript/testdata/abort.ts:", "(wasm error: unreachable)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := m.NewInstance(context.Background(), host.InstanceConfig{Name: "test/abort-as"})
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Close()
			if err := inst.Open([]byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			// A record that does not abort goes through first: the
			// module works until the bad one.
			var got []abi.Record
			if err := inst.Process([]abi.Record{{Value: []byte("ok")}}, func(r []abi.Record) { got = append(got, r...) }); err != nil || len(got) != 1 {
				t.Fatalf("good record: %v, %d records out", err, len(got))
			}
			err = inst.Process([]abi.Record{{Value: []byte(tc.value)}}, func([]abi.Record) {})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") || !errors.Is(err, host.ErrTrap) {
				t.Errorf("want one line marked ErrTrap, got %q", msg)
			}
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q does not contain %q (after byte %d)", msg, w, at)
				}
				at += i + len(w)
			}
		})
	}
}

// TestAssemblyScriptSurface runs the module that uses every keyed state
// kind, schema versions and timers (sdk/assemblyscript/testdata/surface.ts)
// through the real host with an in-memory state store: the host checks
// its imports against ABI version 4 and its exports, and the records show
// what each state handle read back.
func TestAssemblyScriptSurface(t *testing.T) {
	m := hostModule(t, "surface-as")
	if v := m.ABIVersion(); v != 4 {
		t.Fatalf("ABI version %d, want 4", v)
	}
	ctx := context.Background()
	t.Run("not keyed", func(t *testing.T) {
		inst, err := m.NewInstance(ctx, host.InstanceConfig{Name: "test/surface-as"})
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		// Declaring state outside a keyed node traps with the host's
		// message, which the SDK does not hide.
		if err := inst.Open([]byte(`{}`)); err == nil || !strings.Contains(err.Error(), "key_by") {
			t.Fatalf("open outside a keyed node: %v", err)
		}
	})

	const maxP = 128
	backend, err := state.NewMemory(state.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	st, err := backend.OpenTask(state.Scope{Tenant: "t", Job: "surface", Operator: "op"}, maxP, state.Range{Start: 0, End: maxP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inst, err := m.NewInstance(ctx, host.InstanceConfig{Name: "job/surface[0]", State: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	if err := inst.Open([]byte(`{}`)); err != nil {
		t.Fatalf("open: %v", err)
	}
	var got []string
	emit := func(recs []abi.Record) {
		for _, r := range recs {
			got = append(got, fmt.Sprintf("%s@%d=%s", r.Key, r.Timestamp, r.Value))
		}
	}
	inst.SetWatermark(42)
	recs := []abi.Record{
		{Key: []byte("a"), Value: []byte("x"), Timestamp: 1},
		{Key: []byte("a"), Value: []byte("y"), Timestamp: 2},
		{Key: []byte("b"), Value: []byte("x"), Timestamp: 3},
		{Key: []byte("a"), Value: []byte("x"), Timestamp: 4},
		{Key: []byte("a"), Value: []byte("forget"), Timestamp: 5},
		{Key: []byte("a"), Value: []byte("z"), Timestamp: 6},
	}
	if err := inst.Process(recs, emit); err != nil {
		t.Fatal(err)
	}
	// list | map entries in user-key order | schema of the previous value
	// (-1: none) | watermark | the key's records (NumberState).
	want := []string{
		"a@1=x|x:1|-1|42|1",
		"a@2=x+y|x:1;y:1|1|42|2",
		"b@3=x|x:1|-1|42|1",
		"a@4=x+y+x|x:2;y:1|1|42|3",
		"a@6=x+y+x+z|y:1;z:1|1|42|4", // "forget" deleted a's entry x
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("process:\n got %q\nwant %q", got, want)
	}
	// The schema-1 value as the store keeps it, beside its bytes.
	v, schema, ok, err := st.ValueGetSchema("last", []byte("a"), nil, nil)
	if err != nil || !ok || string(v) != "z" || schema != 1 {
		t.Errorf("stored last of a: %q schema %d ok %v err %v, want \"z\" schema 1", v, schema, ok, err)
	}
	// The processing-time timers it set are in the store, and fired they
	// come back through eddy_on_timer with their key and its state.
	var timers []abi.Record
	if err := st.PopTimers(state.ProcessingTime, 100, func(tm state.Timer) error {
		timers = append(timers, abi.Record{Key: append([]byte{}, tm.Key...), Value: []byte{abi.TimerProcessingTime}, Timestamp: tm.Timestamp})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := inst.OnTimers(timers, emit); err != nil {
		t.Fatal(err)
	}
	want = []string{"a@1=timer:1:1:z", "a@2=timer:1:2:z", "b@3=timer:1:3:x", "a@4=timer:1:4:z", "a@6=timer:1:6:z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("timers:\n got %q\nwant %q", got, want)
	}
	// fail gives the task's one-line error.
	err = inst.Process([]abi.Record{{Key: []byte("k"), Value: []byte("fail")}}, emit)
	if err == nil || !strings.Contains(err.Error(), `asguest: refusing the record "fail"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("fail: %v", err)
	}
}
