package fsm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// goldenLines seeds the fuzzers with every command of the golden log.
func goldenLines(f *testing.F) [][]byte {
	data, err := os.ReadFile(filepath.Join("testdata", "log.golden"))
	if err != nil {
		f.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(data), []byte("\n"))
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to bytes
// that decode and re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, line := range goldenLines(f) {
		f.Add(line)
	}
	f.Add([]byte(`{"v":1,"type":"submit_job","at":0,"body":{"tenant":"default","name":"j","tasks":["a"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := Decode(data)
		if err != nil {
			return
		}
		if env.Command.validate() != nil {
			return
		}
		once, err := Encode(env.Command, env.At)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		env2, err := Decode(once)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		if env2.Type != env.Type || !env2.At.Equal(env.At) {
			t.Fatalf("round trip: %+v != %+v", env, env2)
		}
		twice, err := Encode(env2.Command, env2.At)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("encoding not stable: %s then %s (%v)", once, twice, err)
		}
	})
}

// FuzzApply: applying arbitrary bytes to a busy state never panics, and the
// state still snapshots and restores to the same bytes.
func FuzzApply(f *testing.F) {
	for _, line := range goldenLines(f) {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHarness(t)
		scenario(h)
		_, _ = h.applyRaw(data)
		snap, err := h.f.MarshalState()
		if err != nil {
			t.Fatalf("marshal after applying %q: %v", data, err)
		}
		g := New()
		if err := g.UnmarshalState(snap); err != nil {
			t.Fatalf("restore after applying %q: %v", data, err)
		}
		if again, _ := g.MarshalState(); !bytes.Equal(snap, again) {
			t.Fatalf("snapshot round trip differs after applying %q", data)
		}
	})
}

// FuzzRestore: UnmarshalState never panics, and a snapshot it accepts
// re-encodes to one it accepts again identically.
func FuzzRestore(f *testing.F) {
	h := newHarness(f)
	scenario(h)
	good, _ := h.f.MarshalState()
	f.Add(good)
	f.Add([]byte(`{"format":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := New()
		if err := g.UnmarshalState(data); err != nil {
			return
		}
		once, err := g.MarshalState()
		if err != nil {
			t.Fatalf("marshal restored state: %v", err)
		}
		k := New()
		if err := k.UnmarshalState(once); err != nil {
			t.Fatalf("restore re-encoded state: %v", err)
		}
		if twice, _ := k.MarshalState(); !bytes.Equal(once, twice) {
			t.Fatal("restore/marshal not stable")
		}
	})
}
