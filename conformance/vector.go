package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/localrun"
)

// Vector is one case: how the module runs, what it is fed and what must
// come out (Output, in order) or which error the run must end with.
type Vector struct {
	Description string          `json:"description"`
	Config      json.RawMessage `json:"config,omitempty"`
	KeyBy       string          `json:"key_by,omitempty"`
	// KeyBy2 keys the second input of a two-input module ("": KeyBy).
	KeyBy2 string `json:"key_by_2,omitempty"`
	// EventTime and MaxOutOfOrderness derive timestamps and watermarks
	// from a field, as a job's event_time does; without them the events'
	// timestamps and watermarks are used as they are.
	EventTime         string   `json:"event_time,omitempty"`
	MaxOutOfOrderness string   `json:"max_out_of_orderness,omitempty"`
	Window            string   `json:"window,omitempty"`
	Events            []Event  `json:"events"`
	Output            []Record `json:"output"`
	// Error, when set, is text the run's one-line error must contain; the
	// output is not compared then.
	Error string `json:"error,omitempty"`
}

// Event is a record (Value set), a watermark (Watermark set) or an
// advance of processing time (ProcessingTime set: Unix ms; the harness's
// processing time starts at 0 and moves only so).
type Event struct {
	Key   *string `json:"key,omitempty"`
	Value *string `json:"value,omitempty"`
	// Timestamp left out is a record without event time.
	Timestamp      *int64 `json:"timestamp,omitempty"`
	Watermark      *int64 `json:"watermark,omitempty"`
	ProcessingTime *int64 `json:"processing_time,omitempty"`
	// Input is the input of a two-input module a record or a watermark
	// arrives on, 0 (left out) or 1.
	Input int `json:"input,omitempty"`
}

// Record is an output record; values are strings so that every byte is
// compared.
type Record struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Timestamp left out is a record without event time.
	Timestamp *int64 `json:"timestamp,omitempty"`
}

// Load reads a vector file, refusing unknown fields so that a typo is not
// a silently ignored expectation.
func Load(path string) (*Vector, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v Vector
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if v.Output == nil && v.Error == "" {
		return nil, fmt.Errorf("%s: neither output nor error is expected", path)
	}
	for i, e := range v.Events {
		if n := btoi(e.Value != nil) + btoi(e.Watermark != nil) + btoi(e.ProcessingTime != nil); n != 1 {
			return nil, fmt.Errorf("%s: event %d: want exactly one of value, watermark and processing_time", path, i)
		}
		if e.Input != 0 && (e.Input != 1 || e.ProcessingTime != nil) {
			return nil, fmt.Errorf("%s: event %d: input %d: a record or a watermark is of input 0 or 1, processing time of none", path, i, e.Input)
		}
	}
	return &v, nil
}

// Events are the vector's events for localrun.
func (v *Vector) events() []localrun.Event {
	out := make([]localrun.Event, 0, len(v.Events))
	for _, e := range v.Events {
		if e.Watermark != nil {
			wm := *e.Watermark
			out = append(out, localrun.Event{Watermark: &wm, Input: e.Input})
			continue
		}
		if e.ProcessingTime != nil {
			pt := *e.ProcessingTime
			out = append(out, localrun.Event{ProcessingTime: &pt})
			continue
		}
		r := &localrun.Record{Value: []byte(*e.Value), Timestamp: abi.NoTimestamp}
		if e.Timestamp != nil {
			r.Timestamp = *e.Timestamp
		}
		if e.Key != nil {
			r.Key = []byte(*e.Key)
		}
		out = append(out, localrun.Event{Record: r, Input: e.Input})
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// config is the harness configuration of the vector.
func (v *Vector) config() (localrun.Config, error) {
	c := localrun.Config{ModuleConfig: v.Config, KeyBy: v.KeyBy, KeyBy2: v.KeyBy2, EventTimeField: v.EventTime, Window: v.Window}
	if v.MaxOutOfOrderness != "" {
		d, err := time.ParseDuration(v.MaxOutOfOrderness)
		if err != nil {
			return c, fmt.Errorf("max_out_of_orderness: %w", err)
		}
		c.MaxOutOfOrderness = d
	}
	if v.EventTime == "" && v.MaxOutOfOrderness != "" {
		return c, errors.New("max_out_of_orderness without event_time")
	}
	return c, nil
}

func records(rs []localrun.Record) []Record {
	out := make([]Record, 0, len(rs))
	for _, r := range rs {
		rec := Record{Key: string(r.Key), Value: string(r.Value)}
		if r.Timestamp != abi.NoTimestamp {
			ts := r.Timestamp
			rec.Timestamp = &ts
		}
		out = append(out, rec)
	}
	return out
}

// sameRecords compares two outputs field by field, timestamps by value.
func sameRecords(a, b []Record) bool {
	return slices.EqualFunc(a, b, func(x, y Record) bool {
		return x.Key == y.Key && x.Value == y.Value &&
			(x.Timestamp == nil) == (y.Timestamp == nil) && (x.Timestamp == nil || *x.Timestamp == *y.Timestamp)
	})
}
