package raftnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// slogLevelTrace is where hclog's Trace lands: below slog's Debug.
const slogLevelTrace = slog.LevelDebug - 4

// hclogAdapter is an hclog.Logger that writes to a slog.Logger, so that raft
// and raft-wal log like the rest of Eddy. The hclog name becomes the
// "component" attribute.
type hclogAdapter struct {
	l       *slog.Logger
	name    string
	implied []any
	// min is an hclog.Level below which records are dropped before they
	// reach the slog handler (SetLevel); shared by every derived logger.
	min *atomic.Int32
}

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	min := new(atomic.Int32)
	min.Store(int32(hclog.Trace))
	return &hclogAdapter{l: l, name: name, min: min}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func toSlogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slogLevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.NoLevel, hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	if level == hclog.Off {
		return false
	}
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if int32(level) < a.min.Load() {
		return false
	}
	return a.l.Enabled(context.Background(), toSlogLevel(level))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if !a.enabled(level) {
		return
	}
	attrs := make([]slog.Attr, 0, 1+(len(a.implied)+len(args))/2)
	if a.name != "" {
		attrs = append(attrs, slog.String("component", a.name))
	}
	attrs = appendAttrs(attrs, a.implied)
	attrs = appendAttrs(attrs, args)
	a.l.LogAttrs(context.Background(), toSlogLevel(level), msg, attrs...)
}

// appendAttrs turns hclog's alternating keys and values into attributes.
func appendAttrs(attrs []slog.Attr, kv []any) []slog.Attr {
	for i := 0; i < len(kv); i += 2 {
		if i+1 == len(kv) {
			attrs = append(attrs, slog.Any("EXTRA_VALUE_AT_END", kv[i]))
			break
		}
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		val := kv[i+1]
		if f, ok := val.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				val = fmt.Sprintf(format, f[1:]...)
			}
		}
		attrs = append(attrs, slog.Any(key, val))
	}
	return attrs
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.implied = append(append([]any(nil), a.implied...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) SetLevel(level hclog.Level) { a.min.Store(int32(level)) }

func (a *hclogAdapter) GetLevel() hclog.Level { return hclog.Level(a.min.Load()) }

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	w := &stdWriter{a: a, level: hclog.Info}
	if opts != nil {
		w.infer = opts.InferLevels
		if opts.ForceLevel != hclog.NoLevel {
			w.level, w.infer = opts.ForceLevel, false
		}
	}
	return w
}

// stdWriter logs each line written by a standard library logger.
type stdWriter struct {
	a     *hclogAdapter
	level hclog.Level
	infer bool
}

func (w *stdWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		level, msg := w.level, string(line)
		if w.infer {
			level, msg = inferLevel(msg, w.level)
		}
		w.a.Log(level, msg)
	}
	return len(p), nil
}

// inferLevel reads a "[LEVEL] message" prefix, as hclog does.
func inferLevel(line string, fallback hclog.Level) (hclog.Level, string) {
	for prefix, level := range map[string]hclog.Level{
		"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info,
		"[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error,
	} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return level, strings.TrimSpace(rest)
		}
	}
	return fallback, line
}
