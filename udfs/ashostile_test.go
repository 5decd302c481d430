//go:build !wasip1

package udfs_test

// AssemblyScript's abort through the real host: the SDK routes it (asc
// --use abort=...) to eddy.fail and a trap, so the task fails with one
// line that says what went wrong and where, not a bare "unreachable".

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host"
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

// TestAssemblyScriptSurface loads the module that uses every keyed state
// kind, schema versions and timers: the real host checks its imports
// against ABI version 4, which exports/schema declares, and its exports
// (eddy_on_timer among them).
func TestAssemblyScriptSurface(t *testing.T) {
	m := hostModule(t, "surface-as")
	if v := m.ABIVersion(); v != 4 {
		t.Fatalf("ABI version %d, want 4", v)
	}
	inst, err := m.NewInstance(context.Background(), host.InstanceConfig{Name: "test/surface-as"})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	// Not on a keyed node, so declaring state traps with the host's
	// message, which the SDK does not hide.
	if err := inst.Open([]byte(`{}`)); err == nil || !strings.Contains(err.Error(), "key_by") {
		t.Fatalf("open outside a keyed node: %v", err)
	}
}
