package worker

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

func line(task, msg string) *eddyv1.LogEntry {
	return &eddyv1.LogEntry{JobId: "job-1", Attempt: 1, Task: task, Level: "INFO", Message: msg}
}

func messages(es []*eddyv1.LogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.GetTask()+": "+e.GetMessage())
	}
	return out
}

// TestLogBufferBounds: a task that logs more than its bound loses its
// oldest lines, which one entry in their place counts, while a quiet
// task's lines stay; take merges the tasks in the order of logging.
func TestLogBufferBounds(t *testing.T) {
	limits := DefaultLogLimits()
	limits.PendingPerTask = 10
	b := newLogBuffer(limits)
	b.add(line("quiet[0]", "first"))
	for i := 1; i <= 25; i++ {
		b.add(line("chatty[0]", fmt.Sprintf("line %d", i)))
	}
	b.add(line("quiet[0]", "last"))
	got := messages(b.take())
	want := []string{"quiet[0]: first",
		"chatty[0]: … 16 lines dropped: the task logged faster than its worker could ship them"}
	for i := 17; i <= 25; i++ {
		want = append(want, fmt.Sprintf("chatty[0]: line %d", i))
	}
	want = append(want, "quiet[0]: last")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("took\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rest := b.take(); len(rest) != 0 {
		t.Fatalf("left after taking all: %v", messages(rest))
	}
}

// TestLogBufferPerHeartbeat: however much a chatty task logs, one take
// (one heartbeat's logs) stays within the entry and byte bounds, each
// line within its byte bound, and what it leaves comes with the next
// takes, in order.
func TestLogBufferPerHeartbeat(t *testing.T) {
	tests := []struct {
		name   string
		limits LogLimits
		msgLen int
	}{
		{"defaults, long lines", DefaultLogLimits(), 100 << 10},
		{"defaults, short lines", DefaultLogLimits(), 10},
		{"small", LogLimits{LineBytes: 100, PendingPerTask: 50, PerHeartbeat: 7, BytesPerHeartbeat: 600}, 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newLogBuffer(tc.limits)
			msg := strings.Repeat("é", tc.msgLen/2)
			for i := 0; i < 3*tc.limits.PendingPerTask; i++ {
				b.add(line(fmt.Sprintf("t[%d]", i%2), msg))
			}
			var lastSeq uint64
			total, largest := 0, 0
			for range 1000 {
				es := b.take()
				if len(es) == 0 {
					break
				}
				total += len(es)
				req := &eddyv1.HeartbeatRequest{WorkerId: "worker-127.0.0.1:1234", InstanceId: "0123456789abcdef", Logs: es}
				n := proto.Size(req)
				if n > tc.limits.BytesPerHeartbeat+64 || len(es) > tc.limits.PerHeartbeat {
					t.Fatalf("one heartbeat: %d entries, %d bytes (bounds %d, %d)", len(es), n, tc.limits.PerHeartbeat, tc.limits.BytesPerHeartbeat)
				}
				largest = max(largest, n)
				for _, e := range es {
					if len(e.GetMessage()) > tc.limits.LineBytes {
						t.Fatalf("a line of %d bytes, bound %d", len(e.GetMessage()), tc.limits.LineBytes)
					}
					if !strings.HasPrefix(e.GetMessage(), "…") && !strings.Contains(e.GetMessage(), "é") {
						t.Fatalf("line cut inside a rune: %q", e.GetMessage())
					}
					if e.GetWorkerSeq() <= lastSeq {
						t.Fatalf("worker_seq %d after %d", e.GetWorkerSeq(), lastSeq)
					}
					lastSeq = e.GetWorkerSeq()
				}
			}
			t.Logf("largest heartbeat: %d bytes (bound %d)", largest, tc.limits.BytesPerHeartbeat)
			// Two tasks, each keeping its bound.
			if total != 2*tc.limits.PendingPerTask {
				t.Fatalf("took %d entries, want %d", total, 2*tc.limits.PendingPerTask)
			}
		})
	}
}

// TestLogBufferPutBack: entries of a failed heartbeat go back ahead of
// newer ones and are taken again with the same worker_seq, which is how
// the leader recognises those it already has.
func TestLogBufferPutBack(t *testing.T) {
	limits := DefaultLogLimits()
	limits.PerHeartbeat = 3
	b := newLogBuffer(limits)
	for i := range 5 {
		b.add(line("t[0]", fmt.Sprint("line ", i)))
	}
	first := b.take()
	b.add(line("t[0]", "line 5"))
	b.putBack(first)
	var got []string
	var seqs []uint64
	for es := b.take(); len(es) > 0; es = b.take() {
		got = append(got, messages(es)...)
		for _, e := range es {
			seqs = append(seqs, e.GetWorkerSeq())
		}
	}
	if want := "t[0]: line 0,t[0]: line 1,t[0]: line 2,t[0]: line 3,t[0]: line 4,t[0]: line 5"; strings.Join(got, ",") != want {
		t.Fatalf("after put back: %v", got)
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6]" {
		t.Fatalf("worker_seq %v", seqs)
	}
}

// TestTaskLogHandler: the deployment logger's handler keeps Info and
// above as entries of the task its attributes name (guest output with its
// stream), and passes on to the worker's handler what that one enables.
func TestTaskLogHandler(t *testing.T) {
	var out bytes.Buffer
	b := newLogBuffer(DefaultLogLimits())
	log := slog.New(&taskLogHandler{next: slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}), buf: b,
		job: "job-7", attempt: 2}).With("job", "job-7", "attempt", 2)
	log.Info("deploying", "tasks", []string{"src[0]"})
	task := log.With("task", "src→op[1]", "task_id", "src[1]", "subtask", 1)
	task.Info("task started", "restored_from_checkpoint", 4)
	task.With("instance", "x/op[1]").Warn("hello from the guest", "stream", "stderr")
	task.Debug("not for the tenant")
	task.Error("task failed", "err", "boom")
	es := b.take()
	got := make([]string, len(es))
	for i, e := range es {
		got[i] = fmt.Sprintf("%s#%d %s %d %s [%s] %s", e.GetJobId(), e.GetAttempt(), e.GetTask(), e.GetSubtask(), e.GetLevel(), e.GetStream(), e.GetMessage())
	}
	want := []string{
		"job-7#2  0 INFO [] deploying tasks=[src[0]]",
		"job-7#2 src[1] 1 INFO [] task started restored_from_checkpoint=4",
		"job-7#2 src[1] 1 WARN [stderr] hello from the guest",
		"job-7#2 src[1] 1 ERROR [] task failed err=boom",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("entries\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := out.String(); strings.Contains(s, "deploying") || !strings.Contains(s, "hello from the guest") || !strings.Contains(s, "boom") {
		t.Fatalf("the worker's own log:\n%s", s)
	}
}

func TestLogLimitsValidate(t *testing.T) {
	if err := DefaultLogLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (LogLimits{LineBytes: 10, PendingPerTask: 1, PerHeartbeat: 1, BytesPerHeartbeat: 10}).Validate(); err == nil {
		t.Fatal("tiny limits accepted")
	}
}

// TestHeartbeatWait: a heartbeat that ships log lines is held for at
// most logFlushDelay, so that the lines that follow go soon; any other for
// the whole wait.
func TestHeartbeatWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		wait      time.Duration
		shipsLogs bool
		want      time.Duration
	}{
		{"no logs", time.Second, false, time.Second},
		{"logs", time.Second, true, logFlushDelay},
		{"logs, short interval", 100 * time.Millisecond, true, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heartbeatWait(tc.wait, tc.shipsLogs); got != tc.want {
				t.Fatalf("heartbeatWait(%s, %v) = %s, want %s", tc.wait, tc.shipsLogs, got, tc.want)
			}
		})
	}
}
