//go:build !wasip1

package eddy

import (
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// The behaviour is tested in internal/guest; this checks that the public
// wrappers reach it without allocating.

type nopHost struct{ records int }

func (h *nopHost) Emit(batch []byte) {
	n, _ := abi.BatchCount(batch)
	h.records += n
}
func (*nopHost) Log(int32, string) {}
func (*nopHost) Fail(string)       {}

func TestEmitNoAllocations(t *testing.T) {
	h := &nopHost{}
	var out []byte
	op := Func(func(r *Record) error {
		out = append(out[:0], r.Value...)
		Emit(Record{Key: r.Key, Value: out, Timestamp: r.Timestamp, Headers: r.Headers})
		EmitKV(r.Key, r.Value, r.Timestamp)
		return nil
	})
	t.Cleanup(guest.SetTestHost(h, nil))
	Register(op)
	var in []Record
	for i := range 100 {
		in = append(in, Record{Key: []byte("key"), Value: []byte("value"), Timestamp: int64(i)})
	}
	batch := abi.AppendBatch(nil, in)
	if st := guest.Process(batch); st != abi.StatusOK || h.records != 200 {
		t.Fatalf("status %d, %d records", st, h.records)
	}
	if n := testing.AllocsPerRun(50, func() { guest.Process(batch) }); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
}
