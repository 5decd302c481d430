package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

// rec is one record out of the counter: plus when counter-plus-c wrote it.
type rec struct {
	key   string
	count int
	plus  bool
}

type batchAt struct {
	ms   int64
	recs []rec
}

// logOf builds an arrival log from, per subtask, batches that arrived at
// the given ms.
func logOf(t *testing.T, subtasks [swapParallelism][]batchAt) *arrivalLog {
	t.Helper()
	l := newArrivalLog()
	for s, batches := range subtasks {
		for _, b := range batches {
			batch := stream.NewBatch(len(b.recs))
			for _, r := range b.recs {
				v := fmt.Sprintf(`{"key":%q,"count":%d}`, r.key, r.count)
				if r.plus {
					v = fmt.Sprintf(`{"key":%q,"count":%d,"v":"plus"}`, r.key, r.count)
				}
				batch.Add([]byte(r.key), []byte(v), 0)
			}
			if err := l.write(s, batch); err != nil {
				t.Fatal(err)
			}
			// The arrival time is the write's; set the batch's to b.ms.
			log := l.mu.subtasks[s]
			for i := len(log) - len(b.recs); i < len(log); i++ {
				log[i].at = b.ms * int64(time.Millisecond)
			}
		}
	}
	return l
}

func TestArrivalLogPauses(t *testing.T) {
	v1 := func(key string, n int) rec { return rec{key, n, false} }
	plus := func(key string, n int) rec { return rec{key, n, true} }
	for _, tc := range []struct {
		name     string
		subtasks [swapParallelism][]batchAt
		changes  int
		want     []time.Duration // pauses
		wantErr  string
	}{
		{
			name: "one swap: the larger gap of the two subtasks",
			subtasks: [swapParallelism][]batchAt{
				{{10, []rec{v1("a", 1)}}, {20, []rec{v1("a", 2)}}, {50, []rec{plus("a", 3)}}},
				{{12, []rec{v1("b", 1), v1("b", 2)}}, {90, []rec{plus("b", 3)}}, {100, []rec{plus("b", 4)}}},
			},
			changes: 1, want: []time.Duration{78 * time.Millisecond},
		},
		{
			name: "two swaps, back and forth",
			subtasks: [swapParallelism][]batchAt{
				{{0, []rec{v1("a", 1)}}, {30, []rec{plus("a", 2)}}, {100, []rec{v1("a", 3)}}},
				{{0, []rec{v1("b", 1)}}, {20, []rec{plus("b", 2)}}, {140, []rec{v1("b", 3)}}},
			},
			changes: 2, want: []time.Duration{30 * time.Millisecond, 120 * time.Millisecond},
		},
		{
			name: "a subtask without the swap",
			subtasks: [swapParallelism][]batchAt{
				{{0, []rec{v1("a", 1)}}, {30, []rec{plus("a", 2)}}},
				{{0, []rec{v1("b", 1)}}, {20, []rec{v1("b", 2)}}},
			},
			changes: 1, wantErr: "sink subtask 1: 0 changes of version, want 1",
		},
		{
			name: "versions interleaved",
			subtasks: [swapParallelism][]batchAt{
				{{0, []rec{v1("a", 1)}}, {30, []rec{plus("a", 2)}}, {40, []rec{v1("a", 3)}}},
				{{0, []rec{v1("b", 1)}}, {20, []rec{plus("b", 2)}}},
			},
			changes: 1, wantErr: "records of two versions interleaved",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, gaps, err := logOf(t, tc.subtasks).pauses(tc.changes, 0)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("pauses = %v, want %v", got, tc.want)
			}
			for _, g := range gaps {
				if g <= 0 {
					t.Fatalf("gap %v: gaps are between batches, > 0", g)
				}
			}
		})
	}
}

func TestArrivalLogCountsAndTruncate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counts  []int // of key "a" at subtask 0, one batch each
		wantErr string
	}{
		{"continuous", []int{1, 2, 3}, ""},
		{"a repeat", []int{1, 2, 2}, "a count of 2 after 2"},
		{"a gap", []int{1, 3}, "a count of 3 after 1"},
		{"a reset", []int{1, 2, 1}, "a count of 1 after 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sub [swapParallelism][]batchAt
			for i, c := range tc.counts {
				sub[0] = append(sub[0], batchAt{int64(i), []rec{{"a", c, false}}})
			}
			_, n, err := logOf(t, sub).checkCounts()
			if tc.wantErr == "" && (err != nil || n != int64(len(tc.counts))) {
				t.Fatalf("checkCounts = %d records, %v", n, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}

	// A resubmit: what the old job wrote after the savepoint's PreCommit
	// is dropped, and the new job's replay then continues the counts.
	l := newArrivalLog()
	sink := &arrivalSink{log: l}
	write := func(counts ...int) {
		b := stream.NewBatch(len(counts))
		for _, c := range counts {
			b.Add([]byte("a"), fmt.Appendf(nil, `{"key":"a","count":%d}`, c), 0)
		}
		if err := sink.Write(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	write(1, 2)
	if _, err := sink.PreCommit(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	write(3, 4) // after the savepoint: replayed by the new job
	l.truncate(7)
	write(3, 4, 5)
	if _, n, err := l.checkCounts(); err != nil || n != 5 {
		t.Fatalf("after truncate and replay: %d records, %v; want 5, nil", n, err)
	}
}
