// Package localrun is the local harness of one operator module: it runs a
// module over a scripted sequence of events — records, watermarks, the end
// of input — and returns what the module emitted. It is what `eddy test`
// and the conformance suite (testdata/conformance) run on.
//
// It does not simulate the engine: it plans a real dataflow.Job of three
// nodes (a source replaying the events, the module's node, a sink that
// captures) and runs it, so keyed state, timers fired by watermarks,
// windows and the end of input behave exactly as in a deployed job. It is
// not for running jobs of several modules (that is `eddy run`).
package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// Record is one input or output record.
type Record struct {
	Key       []byte
	Value     []byte
	Timestamp int64
}

// Event is one step of a run: exactly one of Record, Watermark or
// ProcessingTime.
type Event struct {
	Record *Record
	// Watermark moves event time to *Watermark after the records before
	// it (a watermark not above the current one changes nothing).
	Watermark *int64
	// ProcessingTime moves processing time to *ProcessingTime (Unix ms)
	// after the records before it, firing the processing-time timers due
	// (a time not above the current one changes nothing). The harness's
	// processing time starts at 0 and moves only so: it is what the
	// guest's processing_time returns, so a run is the same on every
	// machine. Processing-time timers still pending at the end of input
	// do not fire, as in a job.
	ProcessingTime *int64
	// Input is the input of a two-input module (host.Module.IsTwoInput)
	// that the record or the watermark arrives on: 0 for the first, 1 for
	// the second; each input has its own watermark and the module's is the
	// lower of the two, as in a job. A watermark meant for both inputs is
	// two events. A one-input module has only input 0. Processing time is
	// the job's, whatever Input says.
	Input int
}

// Config says how the module runs.
type Config struct {
	// Module is the loaded module under test.
	Module *host.Module
	// ModuleConfig is the JSON object handed to eddy_open ("" or nil: {}).
	ModuleConfig json.RawMessage
	// KeyBy makes the module's node keyed: a top-level JSON field of the
	// value or "record_key" (jobspec.RecordKey). Required with Window
	// and for a two-input module, whose first input it keys.
	KeyBy string
	// KeyBy2 keys the second input of a two-input module ("": KeyBy's
	// field).
	KeyBy2 string
	// EventTimeField, when set, takes each record's timestamp from this
	// JSON field and derives watermarks as a job's event_time does, with
	// MaxOutOfOrderness.
	EventTimeField    string
	MaxOutOfOrderness time.Duration
	// Window runs the module in a window node, in ParseWindow's syntax
	// ("tumbling 1m", "sliding 10m 1m", "session 30s", "global 100"): an
	// aggregate module as the aggregate, any other as the window function.
	Window string
	// Logger receives the job's log, the guest's output among it (nil:
	// discarded).
	Logger *slog.Logger
}

// Validate checks c before anything runs.
func (c *Config) Validate() error {
	if c.Module == nil {
		return errors.New("localrun: no module")
	}
	if c.Window != "" && c.KeyBy == "" {
		return errors.New("a window needs a key: add --key-by FIELD (or record_key)")
	}
	if c.Module.IsTwoInput() {
		if c.KeyBy == "" {
			return fmt.Errorf("module %s is a two-input operator: it runs keyed, add --key-by FIELD (or FIELD_0,FIELD_1, one per input)", c.Module.Name())
		}
		if c.Window != "" {
			return fmt.Errorf("module %s is a two-input operator: it does not run in a window", c.Module.Name())
		}
	} else if c.KeyBy2 != "" {
		return fmt.Errorf("module %s is a one-input operator: it has one key, not two", c.Module.Name())
	}
	if c.Module.IsAggregate() && c.Window == "" {
		return fmt.Errorf("module %s is an aggregate: it runs only in a window (add --window, e.g. 'tumbling 1m')", c.Module.Name())
	}
	if len(c.ModuleConfig) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(c.ModuleConfig, &obj); err != nil {
			return fmt.Errorf("config is not a JSON object: %w", err)
		}
	}
	if c.MaxOutOfOrderness < 0 {
		return errors.New("max out of orderness is negative")
	}
	return nil
}

// ParseWindow turns the short window syntax into the YAML flow mapping of
// a job spec's window.
func ParseWindow(s string) (string, error) {
	f := strings.Fields(s)
	bad := fmt.Errorf("window %q: want 'tumbling SIZE', 'sliding SIZE SLIDE', 'session GAP' or 'global COUNT'", s)
	if len(f) == 0 {
		return "", bad
	}
	dur := func(v string) (string, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return "", fmt.Errorf("window %q: %q is not a positive duration such as 1m", s, v)
		}
		return d.String(), nil
	}
	switch {
	case f[0] == "tumbling" && len(f) == 2:
		size, err := dur(f[1])
		return "{tumbling: " + size + "}", err
	case f[0] == "sliding" && len(f) == 3:
		size, err := dur(f[1])
		if err != nil {
			return "", err
		}
		slide, err := dur(f[2])
		return "{sliding: {size: " + size + ", slide: " + slide + "}}", err
	case f[0] == "session" && len(f) == 2:
		gap, err := dur(f[1])
		return "{session: {gap: " + gap + "}}", err
	case f[0] == "global" && len(f) == 2:
		var n int64
		if _, err := fmt.Sscan(f[1], &n); err != nil || n <= 0 {
			return "", fmt.Errorf("window %q: the count %q is not a positive integer", s, f[1])
		}
		return fmt.Sprintf("{global: {trigger: {count: %d}}}", n), nil
	}
	return "", bad
}

// moduleRef is the module's name in the harness's spec; LoadModule
// resolves it to Config.Module.
const moduleRef = "module-under-test"

// spec writes the job of c as YAML, so that it goes through the same
// parser and validation as a user's spec.
func (c *Config) spec() (*jobspec.Spec, error) {
	cfg := "{}"
	if len(c.ModuleConfig) > 0 {
		cfg = string(c.ModuleConfig)
	}
	backend := jobspec.BackendMemory // a test's state is small
	var b strings.Builder
	fmt.Fprintf(&b, "name: eddy-test\nparallelism: 1\nbuffer_timeout: 0s\nstate_backend: %s\nnodes:\n", backend)
	inputs := []string{"input"}
	if c.Module.IsTwoInput() {
		inputs = []string{"input_0", "input_1"}
	}
	for i, name := range inputs {
		fmt.Fprintf(&b, "  - name: %s\n    source: {file: {path: %s}}\n", name, sourcePath(i))
		if c.EventTimeField != "" {
			fmt.Fprintf(&b, "    event_time: {field: %q, max_out_of_orderness: %s}\n", c.EventTimeField, c.MaxOutOfOrderness)
		}
	}
	switch {
	case len(inputs) == 2:
		key2 := c.KeyBy2
		if key2 == "" {
			key2 = c.KeyBy
		}
		fmt.Fprintf(&b, "  - name: module\n    input: [%s, %s]\n    key_by: [%q, %q]\n", inputs[0], inputs[1], c.KeyBy, key2)
	case c.KeyBy != "":
		fmt.Fprintf(&b, "  - name: module\n    input: input\n    key_by: %q\n", c.KeyBy)
	default:
		b.WriteString("  - name: module\n    input: input\n")
	}
	wasm := fmt.Sprintf("{module: %s, config: %s}", moduleRef, cfg)
	switch {
	case c.Window == "":
		fmt.Fprintf(&b, "    wasm: %s\n", wasm)
	default:
		w, err := ParseWindow(c.Window)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "    window: %s\n", w)
		if c.Module.IsAggregate() {
			fmt.Fprintf(&b, "    aggregate: {wasm: %s}\n", wasm)
		} else {
			fmt.Fprintf(&b, "    aggregate: {apply: %s}\n", wasm)
		}
	}
	b.WriteString("  - name: output\n    input: module\n    sink: {discard: {}}\n")
	return jobspec.Parse([]byte(b.String()), "")
}

// sourcePath is the path in the spec of the source of input i, by which
// the harness's connectors tell its sources apart.
func sourcePath(i int) string { return fmt.Sprintf("events-%d", i) }

// Run runs c.Module over events until the end of input (the final
// watermark is +∞, so every timer and window fires, as in a bounded job)
// and returns its output in order. A trap or a failure of the module is
// the job's error, whose text is the one line `eddy run` would print.
func Run(ctx context.Context, c Config, events []Event) ([]Record, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	spec, err := c.spec()
	if err != nil {
		return nil, fmt.Errorf("localrun: %w", err)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	inputs := 1
	if c.Module.IsTwoInput() {
		inputs = 2
	}
	for i, e := range events {
		if e.Input < 0 || e.Input >= inputs {
			return nil, fmt.Errorf("event %d: input %d: module %s has %s", i+1, e.Input, c.Module.Name(), map[int]string{1: "one input, 0", 2: "inputs 0 and 1"}[inputs])
		}
	}
	sink := &captureSink{}
	backends := &memBackends{}
	defer backends.close()
	job, err := dataflow.NewJob(ctx, spec, dataflow.Options{
		Connectors: connectors{turns: newTurns(events, inputs), perRecord: c.EventTimeField != "", sink: sink},
		LoadModule: func(_ context.Context, ref string) (*host.Module, error) {
			if ref != moduleRef {
				return nil, fmt.Errorf("localrun: unknown module %q", ref)
			}
			return c.Module, nil
		},
		StateBackends:        backends.get,
		WindowOperator:       window.New,
		Logger:               log,
		ManualProcessingTime: true,
	})
	if err != nil {
		return nil, err
	}
	if _, err := job.Run(ctx); err != nil {
		return sink.records(), err
	}
	return sink.records(), nil
}

// connectors hands the job its replaying sources (one per input of the
// module) and capturing sink.
type connectors struct {
	turns     *turns
	perRecord bool
	sink      *captureSink
}

func (c connectors) NewSource(spec *jobspec.SourceSpec, _ string) (stream.Source, error) {
	for i := 0; i < c.turns.inputs; i++ {
		if spec.File != nil && spec.File.Path == sourcePath(i) {
			return &replaySource{turns: c.turns, input: i, perRecord: c.perRecord}, nil
		}
	}
	return nil, fmt.Errorf("localrun: no source %v", spec)
}

func (c connectors) NewSink(*jobspec.SinkSpec, string) (stream.Sink, error) {
	return c.sink, nil
}

// replaySource hands out the records of its input up to the next
// watermark event per Next call and then reports that watermark
// (stream.WatermarkSource), so the watermark reaches the module after
// exactly those records.
//
// With perRecord (event time from a field), each Next hands out one
// record, so that the watermark the task derives follows every record, as
// if each had come in a batch of its own: which records are late then
// depends on the input alone, not on how a batch happened to be cut.
//
// The sources of a two-input module take turns (turns), so that the
// module sees the events in the script's order.
type replaySource struct {
	turns     *turns
	input     int
	perRecord bool
	opened    bool
	passOn    bool // the events after the last batch are another input's
	wm        int64
	hasWM     bool
	pt        int64
	hasPT     bool
}

func (s *replaySource) Open(context.Context, stream.TaskInfo) error {
	s.opened = true
	return nil
}

// Close ends the input's turns: the task closes its source after it sent
// its end of input, so the other input's end comes after it.
func (s *replaySource) Close() error {
	if s.opened {
		s.turns.end(s.input)
	}
	return nil
}

func (s *replaySource) Next(ctx context.Context, b *stream.Batch, max int) error {
	s.hasWM, s.hasPT = false, false
	t := s.turns
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.passOn {
		// The task asks for more only after it sent what the last call
		// gave it, so that is in the module's queue ahead of anything the
		// other input sends from now on.
		// At the end of the events the input of the last one ends first.
		s.passOn = false
		if t.next < len(t.events) {
			t.pass(s.input)
		}
	}
	for t.owner != s.input {
		changed := t.changed
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			t.mu.Lock()
			return ctx.Err()
		case <-changed:
		}
		t.mu.Lock()
	}
	if t.next == len(t.events) {
		return io.EOF
	}
	if s.perRecord {
		max = 1
	}
	for t.next < len(t.events) && t.owners[t.next] == s.input && b.Len() < max {
		e := t.events[t.next]
		if e.Watermark != nil || e.ProcessingTime != nil {
			if b.Len() > 0 {
				break // it waits for the next call
			}
			t.next++
			if e.Watermark != nil {
				s.wm, s.hasWM = *e.Watermark, true
			} else {
				s.pt, s.hasPT = *e.ProcessingTime, true
			}
			break
		}
		t.next++
		if r := e.Record; r != nil {
			b.Add(r.Key, r.Value, r.Timestamp)
		}
	}
	if t.next == len(t.events) || t.owners[t.next] != s.input {
		s.passOn = true
	}
	return nil
}

// turns orders the sources of a run's inputs: the events are handed out
// in the script's order by the source of each event's input, one source
// at a time. A source passes the turn on when the task asks it for more
// after a batch whose successor is another input's (the task has then
// sent the batch and its watermark into the module's input queue, which
// keeps arrival order), and at the end when its task closed it (after
// its end of input is in that queue): the source of the last event ends
// first, then the other.
type turns struct {
	inputs int
	events []Event
	owners []int // the input each event is handed out by

	mu      sync.Mutex
	next    int
	owner   int
	ended   [2]bool
	changed chan struct{} // closed when owner changes
}

func newTurns(events []Event, inputs int) *turns {
	t := &turns{inputs: inputs, events: events, owners: make([]int, len(events)), changed: make(chan struct{})}
	last := 0
	for i, e := range events {
		if e.ProcessingTime == nil { // processing time is the job's: any source will do
			last = e.Input
		}
		t.owners[i] = last
	}
	if len(events) > 0 {
		t.owner = t.owners[0]
	}
	return t
}

// pass hands the turn from input from to the other, unless that ended;
// t.mu is held.
func (t *turns) pass(from int) {
	other := 1 - from
	if t.inputs == 1 || t.ended[other] || t.owner != from {
		return
	}
	t.owner = other
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *turns) end(input int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended[input] = true
	t.pass(input)
}

func (s *replaySource) Watermark() (int64, bool) {
	if s.hasWM && s.wm == math.MaxInt64 {
		return 0, false // +∞ is the end of input's, not a step's
	}
	return s.wm, s.hasWM
}

func (s *replaySource) ProcessingTime() (int64, bool) { return s.pt, s.hasPT }

// captureSink keeps what reaches it, copied (a batch's bytes are reused).
type captureSink struct {
	mu  sync.Mutex
	out []Record
}

func (s *captureSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *captureSink) Finish(context.Context) error                { return nil }
func (s *captureSink) Close() error                                { return nil }

func (s *captureSink) Write(_ context.Context, b *stream.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Records {
		s.out = append(s.out, Record{
			Key:       append([]byte{}, r.Key...),
			Value:     append([]byte{}, r.Value...),
			Timestamp: r.Timestamp,
		})
	}
	return nil
}

// ReleasesInput: Write copies.
func (s *captureSink) ReleasesInput() bool { return true }

func (s *captureSink) records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.out...)
}

// memBackends opens one in-memory state backend per run, so that runs
// share nothing.
type memBackends struct {
	mu      sync.Mutex
	backend state.Backend
}

func (m *memBackends) get(kind string) (state.Backend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.backend != nil {
		return m.backend, nil
	}
	if kind != jobspec.BackendMemory {
		return nil, fmt.Errorf("localrun: state backend %q: the harness keeps state in memory", kind)
	}
	b, err := state.NewMemory(state.DefaultMemoryConfig())
	if err != nil {
		return nil, err
	}
	m.backend = b
	return b, nil
}

func (m *memBackends) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.backend != nil {
		_ = m.backend.Close()
	}
}
