package raftnode

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft")
	tests := []struct {
		name string
		log  func()
		want string // substring of the line; "" for no line
	}{
		{"named with attrs", func() { l.Named("transport").Info("hello", "peer", "c2") }, `level=INFO msg=hello component=raft.transport peer=c2`},
		{"implied args", func() { l.With("term", 3).Warn("w") }, `level=WARN msg=w component=raft term=3`},
		{"format value", func() { l.Error("e", "detail", hclog.Fmt("%d-%s", 7, "x")) }, `detail=7-x`},
		{"odd args", func() { l.Info("odd", "lonely") }, `EXTRA_VALUE_AT_END=lonely`},
		{"trace below handler level", func() { l.Trace("t") }, ""},
		{"reset name", func() { l.Named("a").ResetNamed("wal").Debug("d") }, `component=wal`},
		{"standard logger infers levels", func() {
			l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] careful")
		}, `level=WARN msg=careful`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf.Reset()
			tc.log()
			got := buf.String()
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("logged %q, want %q", got, tc.want)
			}
		})
	}
	if l.IsTrace() || !l.IsDebug() {
		t.Error("levels do not follow the slog handler")
	}
	l.SetLevel(hclog.Warn)
	buf.Reset()
	l.Info("dropped")
	if buf.Len() != 0 || l.GetLevel() != hclog.Warn {
		t.Errorf("SetLevel(Warn) let through %q", buf.String())
	}
}
