package host

import (
	"bytes"
	"context"
	"log/slog"
	"time"
)

// Streams of guest output, as the "stream" attribute of its log records.
const (
	streamLog    = "log" // the eddy.log import
	streamStdout = "stdout"
	streamStderr = "stderr"
)

// maxLogLine bounds one logged guest line; a guest writing without newlines
// is logged in pieces of this size instead of growing a buffer without end.
const maxLogLine = 8 << 10

// guestLog takes every line of guest output (log import, stdout, stderr)
// through one per-instance rate limiter into the instance's logger, so a
// chatty or hostile guest cannot flood the task log. It is used only from
// the goroutine driving the instance.
type guestLog struct {
	ctx     context.Context
	logger  *slog.Logger
	limit   limiter
	dropped uint64
	stdout  lineWriter
	stderr  lineWriter
}

func newGuestLog(ctx context.Context, logger *slog.Logger, perSecond float64, burst int) *guestLog {
	g := &guestLog{
		ctx:    ctx,
		logger: logger,
		limit:  newLimiter(perSecond, burst, time.Now),
	}
	g.stdout = lineWriter{log: g, stream: streamStdout, level: slog.LevelInfo}
	g.stderr = lineWriter{log: g, stream: streamStderr, level: slog.LevelWarn}
	return g
}

// line logs one line of guest output if the rate limit allows, and first
// reports how many lines were dropped since the last one that was logged.
func (g *guestLog) line(level slog.Level, stream string, msg []byte) {
	if !g.logger.Enabled(g.ctx, level) {
		return // filtered anyway: do not spend the budget on it
	}
	if !g.limit.allow() {
		g.dropped++
		return
	}
	g.reportDropped()
	truncated := 0
	if len(msg) > maxLogLine {
		truncated = len(msg) - maxLogLine
		msg = msg[:maxLogLine]
	}
	attrs := []slog.Attr{slog.String("stream", stream)}
	if truncated > 0 {
		attrs = append(attrs, slog.Int("truncated_bytes", truncated))
	}
	g.logger.LogAttrs(g.ctx, level, string(msg), attrs...)
}

func (g *guestLog) reportDropped() {
	if g.dropped == 0 {
		return
	}
	g.logger.LogAttrs(g.ctx, slog.LevelWarn, "guest output dropped by the log rate limit",
		slog.Uint64("dropped_lines", g.dropped))
	g.dropped = 0
}

// close logs unterminated output and the count of lines still unreported.
func (g *guestLog) close() {
	g.stdout.flush()
	g.stderr.flush()
	g.reportDropped()
}

// lineWriter is the io.Writer WASI stdout or stderr writes to: it splits the
// byte stream into lines, since guests write in arbitrary chunks (libc
// buffers, partial writes).
type lineWriter struct {
	log     *guestLog
	stream  string
	level   slog.Level
	partial []byte
}

// Write never fails: a guest must not see an error because its output was
// rate-limited.
func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		seg, rest, complete := bytes.Cut(p, []byte{'\n'})
		p = rest
		if complete && len(w.partial) == 0 && len(seg) <= maxLogLine {
			w.log.line(w.level, w.stream, bytes.TrimSuffix(seg, []byte{'\r'}))
			continue
		}
		for len(w.partial)+len(seg) > maxLogLine {
			room := maxLogLine - len(w.partial)
			w.partial = append(w.partial, seg[:room]...)
			seg = seg[room:]
			w.flush()
		}
		w.partial = append(w.partial, seg...)
		if complete {
			w.log.line(w.level, w.stream, bytes.TrimSuffix(w.partial, []byte{'\r'}))
			w.partial = w.partial[:0]
		}
	}
	return n, nil
}

// flush logs a pending unterminated line.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.log.line(w.level, w.stream, w.partial)
		w.partial = w.partial[:0]
	}
}

// limiter is a token bucket: burst tokens, refilled at perSecond. A small
// one of our own because the host needs nothing more, and a fake clock
// makes it testable without sleeping.
type limiter struct {
	perSecond float64
	burst     float64
	tokens    float64
	last      time.Time
	now       func() time.Time
}

func newLimiter(perSecond float64, burst int, now func() time.Time) limiter {
	return limiter{perSecond: perSecond, burst: float64(burst), tokens: float64(burst), now: now}
}

func (l *limiter) allow() bool {
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.perSecond)
	}
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	return false
}
