package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
)

func TestEchoRoundTrip(t *testing.T) {
	rec := newRecorder()
	e := newTestEngine(t, Config{Logger: slog.New(rec)})
	i := newTestInstance(t, loadFixture(t, e, "echo"), "job/echo[3]")
	if err := i.Open([]byte(`{"field":"amount"}`)); err != nil {
		t.Fatalf("Open: %v", err)
	}
	logs := rec.records("stream", streamLog)
	if len(logs) != 1 || logs[0].Message != `echo opened with config {"field":"amount"}` {
		t.Fatalf("guest log lines = %v, want the config echoed once", logs)
	}
	if v, _ := attr(logs[0], "instance"); v.String() != "job/echo[3]" {
		t.Errorf("log line has instance %q, want job/echo[3]", v)
	}

	batches := []struct {
		name string
		recs []abi.Record
	}{
		{"one plain record", []abi.Record{{Key: []byte("a"), Value: []byte("xy"), Timestamp: 7}}},
		{"empty key, value and no timestamp", []abi.Record{{Timestamp: abi.NoTimestamp}}},
		{"headers", []abi.Record{{
			Key: []byte("k"), Value: []byte(`{"v":1}`), Timestamp: 1700000000000,
			Headers: []abi.Header{{Key: "trace", Value: []byte("abc")}, {Key: "empty"}},
		}}},
		{"empty batch", nil},
		{"larger than the first buffer", manyRecords(2000, 100)}, // ~270 KB: the host must re-allocate
		{"smaller again", manyRecords(3, 10)},
	}
	total := 0
	for _, b := range batches {
		t.Run(b.name, func(t *testing.T) {
			var c collector
			if err := i.Process(b.recs, c.emit); err != nil {
				t.Fatalf("Process: %v", err)
			}
			want := make([]abi.Record, len(b.recs))
			for j := range b.recs {
				want[j] = cloneRecord(b.recs[j])
			}
			if fmt.Sprint(c.recs) != fmt.Sprint(want) {
				t.Fatalf("emitted %v\nwant %v", c.recs, want)
			}
		})
		total += len(b.recs)
	}

	var c collector
	if err := i.Finish(c.emit); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if len(c.recs) != 1 || string(c.recs[0].Key) != "eddy.echo.count" || string(c.recs[0].Value) != fmt.Sprint(total) ||
		c.recs[0].Timestamp != abi.NoTimestamp {
		t.Fatalf("Finish emitted %v, want the trailer with count %d", c.recs, total)
	}
}

func manyRecords(n, valueSize int) []abi.Record {
	recs := make([]abi.Record, n)
	for j := range recs {
		recs[j] = abi.Record{
			Key:       fmt.Appendf(nil, "key-%06d", j),
			Value:     []byte(strings.Repeat(string(rune('a'+j%26)), valueSize)),
			Timestamp: int64(j),
		}
	}
	return recs
}

// TestHostileModules runs each misbehaving module and checks that it fails
// its own instance with the intended error, and that the engine then still
// runs a well-behaved module.
func TestHostileModules(t *testing.T) {
	one := []abi.Record{{Key: []byte("k"), Value: []byte("v")}}
	tests := []struct {
		module string
		open   string // configuration, default {}
		cfg    Config
		is     []error  // errors.Is must hold for each
		words  []string // must all appear in the message
		usable bool     // the instance may be called again afterwards
	}{
		{module: "loop", cfg: Config{CallTimeout: 200 * time.Millisecond},
			is: []error{ErrDeadline}, words: []string{"operator job/loop[0]: eddy_process exceeded its 200ms deadline"}},
		{module: "sleep", cfg: Config{CallTimeout: 200 * time.Millisecond},
			is: []error{ErrDeadline}, words: []string{"eddy_process exceeded its 200ms deadline"}},
		{module: "oob_emit",
			is: []error{ErrBadPointer}, words: []string{"eddy.emit", "[0x7fffff00, 0x80000f00)", "outside the guest memory"}},
		{module: "oob_import", open: "log",
			is: []error{ErrBadPointer}, words: []string{"eddy.log: range [0xfffffff0, 0x100000010) is outside the guest memory"}},
		{module: "oob_import", open: "fail",
			is: []error{ErrBadPointer}, words: []string{"eddy.fail: range [0x10, 0xffffff10) is outside the guest memory"}},
		{module: "bad_batch",
			is: []error{ErrBadPointer, abi.ErrMalformedBatch}, words: []string{"eddy.emit", "does not decode", "bad magic"}},
		{module: "grow_bomb",
			is: []error{ErrMemoryLimit, ErrTrap}, words: []string{"eddy_process: memory limit of 64 MiB reached", "unreachable"}},
		{module: "grow_bomb", cfg: Config{MemoryLimit: 2 << 20},
			is: []error{ErrMemoryLimit}, words: []string{"memory limit of 2 MiB reached"}},
		{module: "trap",
			is: []error{ErrTrap}, words: []string{"eddy_process trapped: wasm error: unreachable"}},
		{module: "fail",
			is: []error{ErrOperatorFailed}, words: []string{"operator job/fail[0]: eddy_process failed: bad record"}, usable: true},
		{module: "exit",
			is: []error{ErrExited}, words: []string{"eddy_process: module exited with code 3"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s", tt.module, tt.open, sizeString(tt.cfg.withDefaults().MemoryLimit)), func(t *testing.T) {
			e := newTestEngine(t, tt.cfg)
			i := newTestInstance(t, loadFixture(t, e, tt.module), "job/"+tt.module+"[0]")
			if err := i.Open([]byte(tt.open)); err != nil {
				t.Fatalf("Open: %v", err)
			}
			start := time.Now()
			err := i.Process(one, func([]abi.Record) { t.Error("a hostile module's output reached the caller") })
			if err == nil {
				t.Fatal("Process succeeded, want an error")
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("error %q does not wrap %v", err, target)
				}
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !containsAll(msg, tt.words...) {
				t.Errorf("error = %q, want one line containing %q", msg, tt.words)
			}
			if took := time.Since(start); took > e.cfg.CallTimeout+2*time.Second {
				t.Errorf("the failing call took %s", took)
			}

			again := i.Process(one, nil)
			if tt.usable && errors.Is(again, ErrClosed) {
				t.Errorf("second Process = %v, want the instance still usable", again)
			}
			if !tt.usable && (again == nil || again.Error() != err.Error()) {
				t.Errorf("second Process = %v, want the same error again", again)
			}
			if err := i.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			checkEchoWorks(t, e)
		})
	}
}

func TestBatchLargerThanMemoryLimit(t *testing.T) {
	e := newTestEngine(t, Config{MemoryLimit: 1 << 20})
	i := newTestInstance(t, loadFixture(t, e, "echo"), "job/echo[0]")
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}
	err := i.Process(manyRecords(1, 2<<20), nil)
	if !errors.Is(err, ErrMemoryLimit) || !strings.Contains(err.Error(), "cannot fit in the memory limit of 1 MiB") {
		t.Fatalf("Process = %v, want ErrMemoryLimit", err)
	}
	// Refused before the guest ran, so the instance still works.
	if err := i.Process(manyRecords(10, 10), nil); err != nil {
		t.Fatalf("Process after a refused batch: %v", err)
	}

	// Smaller than the limit, but more than the guest has room for.
	err = i.Process(manyRecords(1, 900<<10), nil)
	if !errors.Is(err, ErrMemoryLimit) || !strings.Contains(err.Error(), "eddy_alloc(921650) for the batch returned 0: memory limit of 1 MiB reached") {
		t.Fatalf("Process = %v, want ErrMemoryLimit from eddy_alloc", err)
	}
}

func TestLifecycleMisuse(t *testing.T) {
	e := newTestEngine(t, Config{})
	m := loadFixture(t, e, "echo")
	tests := []struct {
		name  string
		steps func(i *Instance) error // returns the error of the misuse
		words string
		is    error
	}{
		{name: "Process before Open", steps: func(i *Instance) error { return i.Process(nil, nil) }, words: "before Open"},
		{name: "Finish before Open", steps: func(i *Instance) error { return i.Finish(nil) }, words: "before Open"},
		{name: "Open twice", steps: func(i *Instance) error {
			if err := i.Open(nil); err != nil {
				return err
			}
			return i.Open(nil)
		}, words: "Open called twice"},
		{name: "Process after Finish", steps: func(i *Instance) error {
			if err := i.Open(nil); err != nil {
				return err
			}
			if err := i.Finish(nil); err != nil {
				return err
			}
			return i.Process(nil, nil)
		}, words: "after Finish"},
		{name: "Process after Close", steps: func(i *Instance) error {
			if err := i.Open(nil); err != nil {
				return err
			}
			if err := i.Close(); err != nil {
				return err
			}
			if err := i.Close(); err != nil {
				return fmt.Errorf("second Close: %w", err)
			}
			return i.Process(nil, nil)
		}, words: "instance is closed", is: ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.steps(newTestInstance(t, m, "job/echo[0]"))
			if err == nil || !strings.Contains(err.Error(), tt.words) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("got %v, want an error containing %q", err, tt.words)
			}
		})
	}
}

func TestEmitCallbackPanicReachesCaller(t *testing.T) {
	e := newTestEngine(t, Config{})
	i := newTestInstance(t, loadFixture(t, e, "echo"), "job/echo[0]")
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "caller bug" {
				t.Fatalf("recovered %v, want the callback's own panic", r)
			}
		}()
		_ = i.Process(manyRecords(1, 1), func([]abi.Record) { panic("caller bug") })
		t.Fatal("Process returned, want the callback's panic")
	}()
	if err := i.Process(nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Process after the panic = %v, want ErrClosed", err)
	}
	checkEchoWorks(t, e)
}

func TestGuestOutputIsRateLimited(t *testing.T) {
	rec := newRecorder()
	e := newTestEngine(t, Config{Logger: slog.New(rec), LogLinesPerSecond: 50, LogBurst: 200})
	i := newTestInstance(t, loadFixture(t, e, "chatty"), "job/chatty[0]")
	now := time.Unix(1700000000, 0)
	i.log.limit.now = func() time.Time { return now } // the clock moves only when the test says so
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}

	// One batch writes 1000 stdout and 10 stderr lines: only the burst passes.
	if err := i.Process(nil, nil); err != nil {
		t.Fatal(err)
	}
	stdout := rec.records("stream", streamStdout)
	if len(stdout) != 200 || stdout[0].Message != "chatty line 0" || stdout[199].Message != "chatty line 199" {
		t.Fatalf("logged %d stdout lines (first %q), want the first 200", len(stdout), stdout[0].Message)
	}
	if v, _ := attr(stdout[0], "instance"); v.String() != "job/chatty[0]" {
		t.Errorf("stdout line has instance %q", v)
	}
	if n := len(rec.records("stream", streamStderr)); n != 0 {
		t.Errorf("logged %d stderr lines past the burst", n)
	}

	// A second later 50 tokens are back: the drop count is reported once, first.
	now = now.Add(time.Second)
	if err := i.Process(nil, nil); err != nil {
		t.Fatal(err)
	}
	all := rec.records("", "")
	report := all[len(all)-51] // then the 50 lines the refilled tokens allow
	if v, ok := attr(report, "dropped_lines"); !ok || v.Uint64() != 810 {
		t.Fatalf("record after the pause = %q %v, want the report of 810 dropped lines", report.Message, v)
	}
	if got := len(rec.records("stream", streamStdout)); got != 250 {
		t.Errorf("logged %d stdout lines in total, want 200 + 50", got)
	}

	// Lines dropped since are reported when the instance closes.
	if err := i.Close(); err != nil {
		t.Fatal(err)
	}
	all = rec.records("", "")
	if v, ok := attr(all[len(all)-1], "dropped_lines"); !ok || v.Uint64() != 1010-50 {
		t.Fatalf("last record = %q %v, want the report of %d dropped lines", all[len(all)-1].Message, v, 1010-50)
	}
}

// TestConcurrentInstances hammers one Engine and Module from many
// goroutines, with hostile instances failing alongside well-behaved ones.
func TestConcurrentInstances(t *testing.T) {
	e := newTestEngine(t, Config{CallTimeout: 300 * time.Millisecond})
	echo := loadFixture(t, e, "echo")
	hostile := []*Module{loadFixture(t, e, "trap"), loadFixture(t, e, "loop"), loadFixture(t, e, "oob_emit")}
	const workers, batches = 8, 50
	in := manyRecords(64, 40)

	var wg sync.WaitGroup
	errs := make(chan error, workers+len(hostile))
	for w := range workers {
		wg.Go(func() {
			i, err := echo.NewInstance(context.Background(), InstanceConfig{Name: fmt.Sprintf("job/echo[%d]", w)})
			if err != nil {
				errs <- err
				return
			}
			defer i.Close()
			if err := i.Open(nil); err != nil {
				errs <- err
				return
			}
			got := 0
			for range batches {
				if err := i.Process(in, func(out []abi.Record) { got += len(out) }); err != nil {
					errs <- err
					return
				}
			}
			if got != batches*len(in) {
				errs <- fmt.Errorf("worker %d got %d records, want %d", w, got, batches*len(in))
			}
		})
	}
	for _, m := range hostile {
		wg.Go(func() {
			i, err := m.NewInstance(context.Background(), InstanceConfig{})
			if err != nil {
				errs <- err
				return
			}
			defer i.Close()
			if err := i.Open(nil); err != nil {
				errs <- err
				return
			}
			if err := i.Process(in, nil); err == nil {
				errs <- fmt.Errorf("%s: Process succeeded", m.Name())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
