package host

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLineWriter(t *testing.T) {
	long := strings.Repeat("x", maxLogLine)
	tests := []struct {
		name   string
		writes []string
		want   []string // lines logged, after close
	}{
		{name: "one line", writes: []string{"hello\n"}, want: []string{"hello"}},
		{name: "line split across writes", writes: []string{"hel", "lo\nwor", "ld\n"}, want: []string{"hello", "world"}},
		{name: "several lines in one write", writes: []string{"a\nb\nc\n"}, want: []string{"a", "b", "c"}},
		{name: "CRLF", writes: []string{"dos\r\n"}, want: []string{"dos"}},
		{name: "empty line", writes: []string{"\n"}, want: []string{""}},
		{name: "unterminated line flushed on close", writes: []string{"tail"}, want: []string{"tail"}},
		{name: "overlong line logged in pieces", writes: []string{long + "yz\n"}, want: []string{long, "yz"}},
		{name: "overlong line across writes", writes: []string{"ab", long}, want: []string{"ab" + long[2:], "xx"}},
		{name: "line of exactly the maximum", writes: []string{long + "\n"}, want: []string{long}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			g := newGuestLog(context.Background(), slog.New(rec), 1, 1000)
			for _, w := range tt.writes {
				if n, err := g.stdout.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			g.close()
			var got []string
			for _, r := range rec.records("stream", streamStdout) {
				got = append(got, r.Message)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("logged %d lines %.40q, want %d lines %.40q", len(got), got, len(tt.want), tt.want)
			}
		})
	}
}

func TestLimiter(t *testing.T) {
	start := time.Unix(0, 0)
	tests := []struct {
		name      string
		perSecond float64
		burst     int
		at        []time.Duration // offsets of successive calls
		want      string          // one char per call: + allowed, - dropped
	}{
		{name: "burst then nothing", perSecond: 1, burst: 3, at: []time.Duration{0, 0, 0, 0, 0}, want: "+++--"},
		{name: "refills at the rate", perSecond: 10, burst: 1, at: []time.Duration{0, 0, 50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond}, want: "+--+-"},
		{name: "refill capped at burst", perSecond: 100, burst: 2, at: []time.Duration{0, 0, time.Hour, time.Hour, time.Hour}, want: "++++-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now time.Time
			l := newLimiter(tt.perSecond, tt.burst, func() time.Time { return now })
			var got strings.Builder
			for _, d := range tt.at {
				now = start.Add(d)
				if l.allow() {
					got.WriteByte('+')
				} else {
					got.WriteByte('-')
				}
			}
			if got.String() != tt.want {
				t.Fatalf("got %s, want %s", got.String(), tt.want)
			}
		})
	}
}
