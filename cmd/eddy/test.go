package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/localrun"
	"github.com/eddy-stream/eddy/host"
)

const testUsage = `usage: eddy test MODULE.wasm [flags]

Runs one operator module locally over JSON-lines input, through the same
host and operator semantics as a job (keyed state, timers fired by
watermarks, windows, the end of input), and prints what it emits, one
record a line: {"key":…,"value":…,"timestamp":…} (value as JSON when it
is JSON, else as a string; key and timestamp left out when absent).
Input lines are record values; with --events they are records in the
output's format, explicit watermarks {"watermark":MS} or processing-time
advances {"processing_time":MS} (processing time starts at 0 and moves
only so, firing the processing-time timers due). A two-input module
(ABI version 5) reads --events: each record and watermark names its
input, "input": 0 or 1 (a record without one is input 0's, a watermark
without one both inputs'), and the module sees the events in the
file's order; --key-by FIELD keys both inputs, FIELD_0,FIELD_1 each its
own. The guest's log lines go to stderr. A trap or a failure prints the job's one-line error
and exits 1; --expect FILE compares the output with FILE (the same
format; spacing inside values aside) and exits 1 on a difference.

flags:
`

// maxExpectDiff bounds the lines a readable diff is computed over (its
// cost is their product); beyond it only the first difference is shown.
const maxExpectDiff = 4000

func cmdTest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), testUsage)
		fs.PrintDefaults()
	}
	var (
		input    = fs.String("input", "-", "JSON-lines input file, one record value a line (- for stdin)")
		keyBy    = fs.String("key-by", "", "key the module's node by this top-level JSON field (or record_key); a two-input module's by FIELD or FIELD_0,FIELD_1")
		evtTime  = fs.String("event-time", "", "take each record's timestamp from this JSON field (ms) and derive watermarks")
		ooo      = fs.Duration("max-out-of-orderness", 0, "how far behind the largest timestamp the watermark stays (with --event-time)")
		config   = fs.String("config", "{}", "the module's configuration, a JSON object")
		win      = fs.String("window", "", "run in a window: 'tumbling 1m', 'sliding 10m 1m', 'session 30s' or 'global 100' (aggregate modules and window functions)")
		expect   = fs.String("expect", "", "compare the output with this JSON-lines file; a difference exits 1")
		asEvents = fs.Bool("events", false, `input lines are events: {"key":…,"value":…,"timestamp":…} records (a string value is its text, other JSON as it is), {"watermark":MS} or {"processing_time":MS}; "input":0 or 1 for a two-input module`)
		cacheDir = fs.String("cache-dir", defaultCacheDir(), "directory of the compiled-module cache (\"\" for none)")
	)
	// The module comes first (eddy test MODULE.wasm --flags) or after the
	// flags; flag stops at the first argument that is not one.
	var module string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		module, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if module == "" && fs.NArg() > 0 {
		module = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return usageError{err}
		}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("test takes one module (got also %q)", fs.Arg(0))}
	}
	if module == "" {
		return usageError{errors.New("test: which module? eddy test MODULE.wasm")}
	}
	if *evtTime == "" && *ooo != 0 {
		return usageError{errors.New("--max-out-of-orderness needs --event-time")}
	}
	events, err := readTestInput(*input, *asEvents)
	if err != nil {
		return err
	}
	var want []string
	if *expect != "" {
		if want, err = readExpect(*expect); err != nil {
			return err
		}
	}

	ctx := context.Background()
	log := slog.New(&guestLogHandler{w: stderr})
	cfg := host.DefaultConfig()
	cfg.CacheDir = *cacheDir
	cfg.Logger = log
	engine, err := host.NewEngine(ctx, cfg)
	if err != nil {
		return err
	}
	defer engine.Close(ctx)
	mod, err := engine.Load(ctx, module)
	if err != nil {
		return err
	}
	key1, key2 := *keyBy, ""
	if mod.IsTwoInput() {
		if !*asEvents {
			return usageError{fmt.Errorf(`module %s is a two-input operator: give it --events, whose records and watermarks name their input ("input": 0 or 1)`, mod.Name())}
		}
		if k1, k2, ok := strings.Cut(*keyBy, ","); ok {
			key1, key2 = k1, k2
		}
	}
	if events, err = assignInputs(events, mod.IsTwoInput()); err != nil {
		return err
	}
	out, err := localrun.Run(ctx, localrun.Config{
		Module:            mod,
		ModuleConfig:      json.RawMessage(*config),
		KeyBy:             key1,
		KeyBy2:            key2,
		EventTimeField:    *evtTime,
		MaxOutOfOrderness: *ooo,
		Window:            *win,
		Logger:            log,
	}, events)
	got := make([]string, 0, len(out))
	for _, r := range out {
		got = append(got, formatTestRecord(r))
	}
	for _, line := range got {
		fmt.Fprintln(stdout, line)
	}
	if err != nil {
		return err
	}
	if *expect == "" {
		return nil
	}
	if diff := diffLines(want, normalizeAll(got)); diff != "" {
		fmt.Fprintf(stderr, "--- %s (expected)\n+++ output\n%s", *expect, diff)
		return fmt.Errorf("the output differs from %s", *expect)
	}
	fmt.Fprintf(stderr, "ok: %d records as expected\n", len(got))
	return nil
}

// readTestInput reads one record value a line, or with events one event
// a line (testEvent); blank lines are skipped.
func readTestInput(path string, events bool) ([]localrun.Event, error) {
	var r io.Reader = os.Stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		defer f.Close()
		r, name = f, path
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []localrun.Event
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !events {
			out = append(out, localrun.Event{Record: &localrun.Record{Value: append([]byte{}, line...), Timestamp: abi.NoTimestamp}, Input: noInput})
			continue
		}
		e, err := parseTestEvent(line)
		if err != nil {
			return nil, fmt.Errorf("input %s:%d: %w", name, n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("input %s: %w", name, err)
	}
	return out, nil
}

// testEvent is an input line of --events.
type testEvent struct {
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	Timestamp *int64          `json:"timestamp"`
	Watermark *int64          `json:"watermark"`
	ProcTime  *int64          `json:"processing_time"`
	Input     *int            `json:"input"`
}

// noInput marks an event whose line named no input, until assignInputs
// knows whether the module has two.
const noInput = -1

// assignInputs gives the events without an input theirs: input 0 for a
// record, both inputs for a watermark of a two-input module. An input
// named for a one-input module is refused.
func assignInputs(events []localrun.Event, twoInput bool) ([]localrun.Event, error) {
	out := make([]localrun.Event, 0, len(events))
	for _, e := range events {
		switch {
		case e.Input > 0 && !twoInput:
			return nil, fmt.Errorf(`input: an event names "input": %d, but the module is a one-input operator`, e.Input)
		case e.Input != noInput:
			// named
		case twoInput && e.Watermark != nil:
			e.Input = 0
			out = append(out, e)
			e.Input = 1
		default:
			e.Input = 0
		}
		out = append(out, e)
	}
	return out, nil
}

func parseTestEvent(line []byte) (localrun.Event, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var te testEvent
	if err := dec.Decode(&te); err != nil {
		return localrun.Event{}, fmt.Errorf(`not an event {"key":…,"value":…,"timestamp":…}, {"watermark":MS} or {"processing_time":MS}: %w`, err)
	}
	input := noInput
	if te.Input != nil {
		if *te.Input != 0 && *te.Input != 1 {
			return localrun.Event{}, fmt.Errorf(`"input": %d: an input is 0 or 1`, *te.Input)
		}
		if te.ProcTime != nil {
			return localrun.Event{}, errors.New(`a processing_time event names no input: processing time is the job's`)
		}
		input = *te.Input
	}
	if te.Watermark != nil || te.ProcTime != nil {
		if te.Value != nil || te.Key != nil || te.Timestamp != nil || (te.Watermark != nil && te.ProcTime != nil) {
			return localrun.Event{}, errors.New(`a watermark or processing_time event has no other field (but "input")`)
		}
		return localrun.Event{Watermark: te.Watermark, ProcessingTime: te.ProcTime, Input: input}, nil
	}
	if te.Value == nil {
		return localrun.Event{}, errors.New(`the event has none of "value", "watermark" and "processing_time"`)
	}
	r := &localrun.Record{Value: []byte(te.Value), Timestamp: abi.NoTimestamp}
	var text string
	if json.Unmarshal(te.Value, &text) == nil {
		r.Value = []byte(text)
	}
	if te.Key != nil {
		r.Key = []byte(*te.Key)
	}
	if te.Timestamp != nil {
		r.Timestamp = *te.Timestamp
	}
	return localrun.Event{Record: r, Input: input}, nil
}

// testRecord is the printed form of an output record.
type testRecord struct {
	Key       *string         `json:"key,omitempty"`
	Value     json.RawMessage `json:"value"`
	Timestamp *int64          `json:"timestamp,omitempty"`
}

// formatTestRecord prints r as one JSON line: the value as JSON when it
// is valid JSON (compacted), else as a JSON string of its bytes.
func formatTestRecord(r localrun.Record) string {
	var tr testRecord
	if len(r.Key) > 0 {
		k := string(r.Key)
		tr.Key = &k
	}
	if r.Timestamp != abi.NoTimestamp {
		ts := r.Timestamp
		tr.Timestamp = &ts
	}
	var buf bytes.Buffer
	if json.Valid(r.Value) && json.Compact(&buf, r.Value) == nil {
		tr.Value = buf.Bytes()
	} else {
		s, _ := json.Marshal(string(r.Value))
		tr.Value = s
	}
	b, _ := json.Marshal(tr)
	return string(b)
}

// readExpect reads an expected output file in the format eddy test
// prints, normalized so that spacing does not count.
func readExpect(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--expect: %w", err)
	}
	var lines []string
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		n, err := normalizeLine(line)
		if err != nil {
			return nil, fmt.Errorf("--expect %s:%d: %w", path, i+1, err)
		}
		lines = append(lines, n)
	}
	return lines, nil
}

func normalizeLine(line []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var tr testRecord
	if err := dec.Decode(&tr); err != nil {
		return "", fmt.Errorf(`not a record line {"key":…,"value":…,"timestamp":…}: %w`, err)
	}
	if tr.Value == nil {
		return "", errors.New("the record has no value")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, tr.Value); err != nil {
		return "", err
	}
	tr.Value = buf.Bytes()
	b, err := json.Marshal(tr)
	return string(b), err
}

func normalizeAll(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		n, err := normalizeLine([]byte(l))
		if err != nil {
			n = l
		}
		out[i] = n
	}
	return out
}

// diffLines is a line diff of want and got ("" when equal): "-" lines
// are expected and missing, "+" lines came out unexpected, " " lines are
// context, as in a unified diff without hunks.
func diffLines(want, got []string) string {
	if len(want) == len(got) {
		same := true
		for i := range want {
			if want[i] != got[i] {
				same = false
				break
			}
		}
		if same {
			return ""
		}
	}
	var b strings.Builder
	if len(want)*len(got) > maxExpectDiff*maxExpectDiff/4 || len(want) > maxExpectDiff || len(got) > maxExpectDiff {
		i := 0
		for i < len(want) && i < len(got) && want[i] == got[i] {
			i++
		}
		fmt.Fprintf(&b, "first difference at record %d of %d expected, %d output:\n", i+1, len(want), len(got))
		if i < len(want) {
			fmt.Fprintf(&b, "-%s\n", want[i])
		}
		if i < len(got) {
			fmt.Fprintf(&b, "+%s\n", got[i])
		}
		return b.String()
	}
	// Longest common subsequence, from the end.
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			fmt.Fprintf(&b, " %s\n", want[i])
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&b, "+%s\n", got[j])
			j++
		default:
			fmt.Fprintf(&b, "-%s\n", want[i])
			i++
		}
	}
	return b.String()
}

// guestLogHandler prints the guest's output lines (the records the host
// logs with a "stream" attribute) as "[guest stdout] line", and other log
// records at warning level and above; the engine's informational lines
// (compilations) would drown the guest's.
type guestLogHandler struct {
	w     io.Writer
	attrs []slog.Attr
}

func (h *guestLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *guestLogHandler) Handle(_ context.Context, r slog.Record) error {
	stream := ""
	find := func(a slog.Attr) bool {
		if a.Key == "stream" {
			stream = a.Value.String()
			return false
		}
		return true
	}
	for _, a := range h.attrs {
		find(a)
	}
	r.Attrs(find)
	switch {
	case stream != "":
		_, err := fmt.Fprintf(h.w, "[guest %s] %s\n", stream, r.Message)
		return err
	case r.Level >= slog.LevelWarn && r.Level < slog.LevelError: // errors: the job's one line says them
		_, err := fmt.Fprintf(h.w, "eddy: %s: %s\n", strings.ToLower(r.Level.String()), r.Message)
		return err
	}
	return nil
}

func (h *guestLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &guestLogHandler{w: h.w, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *guestLogHandler) WithGroup(string) slog.Handler { return h }
