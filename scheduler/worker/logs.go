package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// LogLimits bounds the task log lines a worker keeps for the leader and
// ships with one heartbeat. The defaults keep a heartbeat under ~300 KiB
// of logs however chatty a guest is (the host's rate limit comes first;
// these bound what is left of it).
type LogLimits struct {
	// LineBytes bounds one line's message; a longer one is cut.
	LineBytes int
	// PendingPerTask bounds the lines of one task waiting to be shipped;
	// beyond it the oldest are dropped and counted, so that a chatty task
	// does not push out its quiet neighbours' lines.
	PendingPerTask int
	// PerHeartbeat and BytesPerHeartbeat bound what one heartbeat carries;
	// the rest waits for the next one.
	PerHeartbeat      int
	BytesPerHeartbeat int
}

// DefaultLogLimits returns the limits a worker uses unless told otherwise.
func DefaultLogLimits() LogLimits {
	return LogLimits{LineBytes: 2 << 10, PendingPerTask: 1000, PerHeartbeat: 500, BytesPerHeartbeat: 256 << 10}
}

// Validate checks l.
func (l LogLimits) Validate() error {
	if l.LineBytes < 64 || l.PendingPerTask < 2 || l.PerHeartbeat < 1 || l.BytesPerHeartbeat < l.LineBytes+256 {
		return fmt.Errorf("worker: log limits too small (line %d B ≥ 64, pending %d ≥ 2, per heartbeat %d ≥ 1, bytes per heartbeat %d ≥ line + 256)",
			l.LineBytes, l.PendingPerTask, l.PerHeartbeat, l.BytesPerHeartbeat)
	}
	return nil
}

// logSource is one task of one job attempt, as its log lines name it.
type logSource struct {
	job     string
	attempt uint32
	task    string
}

// logBuffer holds the task log lines not yet shipped to the leader: one
// bounded queue per task, each entry numbered in the order it was logged
// (worker_seq), so that take can merge the queues in that order and the
// leader can drop a resent entry.
type logBuffer struct {
	limits LogLimits

	mu struct {
		sync.Mutex
		seq   uint64
		tasks map[logSource]*taskLog
	}
}

// taskLog is one task's pending lines, oldest first. When lines are
// dropped, the oldest pending entry becomes a marker that says how many
// (keeping its place and its seq, so the order of seqs stays that of the
// lines).
type taskLog struct {
	pending []*eddyv1.LogEntry
	dropped uint64 // lines the head entry stands for, beyond itself; 0: the head is a plain line
}

func newLogBuffer(limits LogLimits) *logBuffer {
	b := &logBuffer{limits: limits}
	b.mu.tasks = map[logSource]*taskLog{}
	return b
}

// add queues one entry (its worker_seq is assigned here).
func (b *logBuffer) add(e *eddyv1.LogEntry) {
	e.Message = truncate(e.Message, b.limits.LineBytes)
	src := logSource{e.GetJobId(), e.GetAttempt(), e.GetTask()}
	b.mu.Lock()
	b.mu.seq++
	e.WorkerSeq = b.mu.seq
	tl := b.mu.tasks[src]
	if tl == nil {
		tl = &taskLog{}
		b.mu.tasks[src] = tl
	}
	tl.pending = append(tl.pending, e)
	tl.bound(b.limits.PendingPerTask)
	b.mu.Unlock()
}

// bound drops the oldest lines beyond max, folding them into the head.
func (tl *taskLog) bound(max int) {
	for len(tl.pending) > max {
		// The head stays (as the marker); the line after it goes.
		tl.dropped++
		tl.pending = append(tl.pending[:1], tl.pending[2:]...)
	}
}

// entryBytes is what an entry costs a heartbeat, roughly: its strings and
// a fixed overhead for the numbers and field tags.
func entryBytes(e *eddyv1.LogEntry) int {
	return len(e.GetMessage()) + len(e.GetTask()) + len(e.GetJobId()) + len(e.GetLevel()) + len(e.GetStream()) + 48
}

// take removes and returns the oldest pending entries across tasks, in
// worker_seq order, within the per-heartbeat bounds.
func (b *logBuffer) take() []*eddyv1.LogEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*eddyv1.LogEntry
	size := 0
	for len(out) < b.limits.PerHeartbeat {
		var src logSource
		var tl *taskLog
		for s, t := range b.mu.tasks {
			if tl == nil || t.pending[0].GetWorkerSeq() < tl.pending[0].GetWorkerSeq() {
				src, tl = s, t
			}
		}
		if tl == nil {
			break
		}
		e := tl.pending[0]
		if tl.dropped > 0 {
			e = markDropped(e, tl.dropped)
		}
		if size += entryBytes(e); size > b.limits.BytesPerHeartbeat && len(out) > 0 {
			break
		}
		out = append(out, e)
		tl.dropped = 0
		tl.pending[0] = nil
		tl.pending = tl.pending[1:]
		if len(tl.pending) == 0 {
			delete(b.mu.tasks, src)
		}
	}
	return out
}

// markDropped is the entry that stands, in the head's place, for the head
// and the n lines dropped after it.
func markDropped(head *eddyv1.LogEntry, n uint64) *eddyv1.LogEntry {
	return &eddyv1.LogEntry{TimeUnixMs: head.GetTimeUnixMs(), JobId: head.GetJobId(), Attempt: head.GetAttempt(),
		Task: head.GetTask(), Subtask: head.GetSubtask(), Level: slog.LevelWarn.String(), WorkerSeq: head.GetWorkerSeq(),
		Message: fmt.Sprintf("… %d lines dropped: the task logged faster than its worker could ship them", n+1)}
}

// putBack returns entries take gave out that did not reach the leader (a
// failed heartbeat), ahead of the pending ones: they are older. The bounds
// apply again, so a leader that does not answer costs no more memory than
// a chatty task.
func (b *logBuffer) putBack(entries []*eddyv1.LogEntry) {
	if len(entries) == 0 {
		return
	}
	bySource := map[logSource][]*eddyv1.LogEntry{}
	for _, e := range entries {
		src := logSource{e.GetJobId(), e.GetAttempt(), e.GetTask()}
		bySource[src] = append(bySource[src], e)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for src, es := range bySource {
		tl := b.mu.tasks[src]
		if tl == nil {
			tl = &taskLog{}
			b.mu.tasks[src] = tl
		} else if tl.dropped > 0 {
			// The marker head goes behind es: it becomes an entry of its
			// own, with its count.
			tl.pending[0] = markDropped(tl.pending[0], tl.dropped)
			tl.dropped = 0
		}
		tl.pending = append(es, tl.pending...)
		tl.bound(b.limits.PendingPerTask)
	}
}

// truncate cuts s to at most max bytes, on a rune boundary, marking the cut.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// taskLogHandler is the slog.Handler of a deployment's logger: every
// record goes on to the worker's own handler as before, and those at
// Info or above also become log entries of the task named by the record's
// "task_id" attribute, or else "task" (a line of the whole deployment when
// there is neither),
// for the leader and `eddy job logs`. The guest's output reaches it
// through the task logger that package host writes to (attribute
// "stream"), the task's lifecycle through package dataflow's and the
// worker's own lines.
type taskLogHandler struct {
	next    slog.Handler
	buf     *logBuffer
	job     string
	attempt uint32
	// From WithAttrs, outside any group: the task's id (TaskSpec.ID, what
	// JobStatus and the leader's lines name it by) or else its name.
	task, taskID string
	subtask      uint32
	grouped      bool // WithGroup was called: later attributes are not ours
}

// minTaskLogLevel is the least level kept for the tenant: debug lines are
// the operator's, and too many.
const minTaskLogLevel = slog.LevelInfo

func (h *taskLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= minTaskLogLevel || h.next.Enabled(ctx, l)
}

func (h *taskLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= minTaskLogLevel {
		h.buf.add(h.entry(r))
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// entry makes the log entry of r: its message followed by its attributes
// as key=value, but those that have a field of their own.
func (h *taskLogHandler) entry(r slog.Record) *eddyv1.LogEntry {
	e := &eddyv1.LogEntry{TimeUnixMs: r.Time.UnixMilli(), JobId: h.job, Attempt: h.attempt, Task: h.task,
		Subtask: h.subtask, Level: r.Level.String()}
	taskID := h.taskID
	var msg strings.Builder
	msg.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		switch {
		case h.grouped:
		case a.Key == "stream":
			e.Stream = a.Value.String()
			return true
		case a.Key == "task":
			e.Task = a.Value.String()
			return true
		case a.Key == "task_id":
			taskID = a.Value.String()
			return true
		case a.Key == "subtask":
			e.Subtask = uint32(a.Value.Int64())
			return true
		}
		fmt.Fprintf(&msg, " %s=%s", a.Key, a.Value)
		return msg.Len() <= h.buf.limits.LineBytes // further attributes would be cut anyway
	})
	e.Message = msg.String()
	if taskID != "" {
		e.Task = taskID
	}
	return e
}

func (h *taskLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	if !h.grouped {
		for _, a := range attrs {
			switch a.Key {
			case "task":
				c.task = a.Value.String()
			case "task_id":
				c.taskID = a.Value.String()
			case "subtask":
				c.subtask = uint32(a.Value.Int64())
			}
		}
	}
	return &c
}

func (h *taskLogHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.grouped = true
	return &c
}
