package testkit_test

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

func TestFrames(t *testing.T) {
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{"none", nil, ""},
		{"one empty", []string{""}, "\x00\x00\x00\x00"},
		{"two", []string{"ab", "c"}, "\x02\x00\x00\x00ab\x01\x00\x00\x00c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(testkit.Frames(tc.parts...)); got != tc.want {
				t.Errorf("Frames(%q) = %q, want %q", tc.parts, got, tc.want)
			}
			var bs [][]byte
			for _, p := range tc.parts {
				bs = append(bs, []byte(p))
			}
			if got := string(testkit.Frames(bs...)); got != tc.want {
				t.Errorf("Frames of bytes %q = %q, want %q", tc.parts, got, tc.want)
			}
		})
	}
}

// TestReadLines reads a sink's parts in name order, each in its order.
func TestReadLines(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"out.jsonl-1": "c\nd\n", "out.jsonl-0": "a\nb", "other": "x\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := testkit.ReadLines(t, filepath.Join(dir, "out.jsonl")), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("ReadLines = %q, want %q", got, want)
	}
	if got := testkit.ReadLines(t, filepath.Join(dir, "none")); len(got) != 0 {
		t.Errorf("ReadLines of nothing = %q", got)
	}
}

func TestEventually(t *testing.T) {
	polls := 0
	testkit.Eventually(t, time.Minute, "the fifth poll", func() bool {
		polls++
		return polls == 5
	})
	if polls != 5 {
		t.Errorf("%d polls, want 5", polls)
	}
}

func TestListen(t *testing.T) {
	l := testkit.Listen(t)
	if host, port, err := net.SplitHostPort(l.Addr().String()); err != nil || host != "127.0.0.1" || port == "0" {
		t.Errorf("listening on %s (%v)", l.Addr(), err)
	}
}

func TestWasmModules(t *testing.T) {
	var host, udfs bool
	for _, p := range testkit.WasmModules(t) {
		switch filepath.Base(filepath.Dir(p)) {
		case "testdata":
			host = true
		case "build":
			udfs = true
		}
	}
	if !host || !udfs {
		t.Fatalf("WasmModules: host/testdata found %v, udfs/build found %v", host, udfs)
	}
}
