package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

func openAgg(t *testing.T, e *Engine, config string) *Instance {
	t.Helper()
	m := loadFixture(t, e, "agg")
	if !m.IsAggregate() {
		t.Fatal("agg.wasm is not reported as an aggregate module")
	}
	i := newTestInstance(t, m, "agg")
	if err := i.Open([]byte(config)); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return i
}

func accOf(n uint64, sum int64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, n)
	return binary.LittleEndian.AppendUint64(b, uint64(sum))
}

func TestAggregate(t *testing.T) {
	e := newTestEngine(t, Config{})
	i := openAgg(t, e, "{}")
	empty, err := i.AggCreate()
	if err != nil {
		t.Fatalf("AggCreate: %v", err)
	}
	empty = bytes.Clone(empty)
	if !bytes.Equal(empty, accOf(0, 0)) {
		t.Fatalf("AggCreate = %x, want %x", empty, accOf(0, 0))
	}
	var recs []abi.Record
	for _, v := range []string{"5", "-2", "40"} {
		recs = append(recs, abi.Record{Key: []byte("k"), Value: []byte(v), Timestamp: 1})
	}
	a, err := i.AggAdd(bytes.Clone(empty), recs)
	if err != nil {
		t.Fatalf("AggAdd: %v", err)
	}
	a = bytes.Clone(a)
	if !bytes.Equal(a, accOf(3, 43)) {
		t.Fatalf("AggAdd = %x, want %x", a, accOf(3, 43))
	}
	// A group of no records gives back its accumulator.
	if b, err := i.AggAdd(a, nil); err != nil || !bytes.Equal(b, a) {
		t.Fatalf("AggAdd(acc, none) = %x, %v; want %x", b, err, a)
	}
	m, err := i.AggMerge(a, [][]byte{accOf(2, 10), empty})
	if err != nil {
		t.Fatalf("AggMerge: %v", err)
	}
	if !bytes.Equal(m, accOf(5, 53)) {
		t.Fatalf("AggMerge = %x, want %x", m, accOf(5, 53))
	}
	res, err := i.AggResult([]byte("k"), 99, bytes.Clone(m))
	if err != nil {
		t.Fatalf("AggResult: %v", err)
	}
	if string(res) != `{"n":5,"sum":53}` {
		t.Fatalf("AggResult = %s", res)
	}
	// An aggregate instance is not an operator.
	if err := i.Process(recs, nil); err == nil || !strings.Contains(err.Error(), "eddy_process") {
		t.Fatalf("Process on an aggregate module: %v, want an error naming eddy_process", err)
	}
}

func TestAggregateMisbehaves(t *testing.T) {
	e := newTestEngine(t, Config{})
	rec := []abi.Record{{Value: []byte("1"), Timestamp: 1}}
	tests := []struct {
		name, config string
		call         func(i *Instance) error
		want         string
	}{
		{"too few results", `{"mode":"short"}`, func(i *Instance) error {
			_, err := i.AggAdd(accOf(0, 0), rec)
			return err
		}, "eddy_agg_add emitted 0 records, want 1"},
		{"result not JSON", `{"mode":"badjson"}`, func(i *Instance) error {
			_, err := i.AggResult(nil, 0, accOf(1, 1))
			return err
		}, "is not one JSON value"},
		{"bad accumulator", `{}`, func(i *Instance) error {
			_, err := i.AggMerge([]byte("xyz"), nil)
			return err
		}, "accumulator is not 16 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := openAgg(t, e, tt.config)
			err := tt.call(i)
			if err == nil || !errors.Is(err, ErrOperatorFailed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrOperatorFailed containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			// The instance stays usable after an operator failure.
			if _, err := i.AggCreate(); err != nil {
				t.Fatalf("AggCreate after the failure: %v", err)
			}
		})
	}
}

func TestAggregateRefused(t *testing.T) {
	e := newTestEngine(t, Config{})
	tests := map[string]string{
		"agg_v2":      "declares ABI version 2; aggregate modules declare version 3",
		"agg_state":   "is an aggregate module but imports eddy.state_get",
		"agg_partial": `missing export "eddy_agg_create"`,
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := e.Load(t.Context(), "testdata/"+name+".wasm")
			if err == nil || !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Load: %v, want ErrInvalidModule containing %q", err, want)
			}
		})
	}
	// An operator module is not an aggregate.
	m := loadFixture(t, e, "echo")
	if m.IsAggregate() {
		t.Fatal("echo reported as an aggregate module")
	}
	i := newTestInstance(t, m, "echo")
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := i.AggCreate(); err == nil || !strings.Contains(err.Error(), "not an aggregate module") {
		t.Fatalf("AggCreate on an operator: %v", err)
	}
}
