package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
)

// counterKeys is how many distinct keys the counter bench's records have:
// enough that state lookups are not all in one cache line, few enough that
// every key is hot, as in a per-card count.
const counterKeys = 10_000

// benchCounter times the counter, a keyed operator, alone: natively (the
// counting package's algorithm, its state in a state.Store as the Wasm
// builds' is) and as each language's module, over batches of records of
// counterKeys keys made beforehand, each over a fresh in-memory store. The
// guest figures include the ABI boundary and one state get and one put per
// record through the host, which is what a keyed operator pays in a guest.
func benchCounter(root string, records, runs int) error {
	ctx := context.Background()
	var batches []*stream.Batch
	for i := 0; i < records; {
		b := stream.NewBatch(jobspec.DefaultBatchSize)
		for ; b.Len() < jobspec.DefaultBatchSize && i < records; i++ {
			b.Add(fmt.Appendf(nil, "card-%05d", (i*7919)%counterKeys), []byte(`{}`), int64(i))
		}
		batches = append(batches, b)
	}
	engine, err := benchEngine(ctx)
	if err != nil {
		return err
	}
	defer engine.Close(ctx)

	// Each run gets a fresh store, so that every run counts from 0.
	var backend *state.Memory
	newStore := func(run int) (state.Store, error) {
		if backend != nil {
			_ = backend.Close()
		}
		b, err := state.NewMemory(state.DefaultMemoryConfig())
		if err != nil {
			return nil, err
		}
		backend = b
		return b.OpenTask(state.Scope{Tenant: "bench", Job: fmt.Sprintf("counter-%d", run), Operator: "count"},
			jobspec.DefaultMaxParallelism, state.Range{Start: 0, End: jobspec.DefaultMaxParallelism})
	}
	defer func() {
		if backend != nil {
			_ = backend.Close()
		}
	}()

	// A variant makes, for a store, the function that processes a batch.
	type variant struct {
		label string
		open  func(st state.Store) (func(in, out *stream.Batch) error, func(), error)
	}
	variants := []variant{{"(a) native Go", func(st state.Store) (func(in, out *stream.Batch) error, func(), error) {
		var buf, enc, val []byte
		return func(in, out *stream.Batch) error {
			for _, r := range in.Records {
				var ok bool
				var err error
				buf, ok, err = st.ValueGet(counting.StateName, r.Key, nil, buf[:0])
				if err != nil {
					return err
				}
				n, err := counting.Decode(buf, ok)
				if err != nil {
					return err
				}
				enc = counting.Append(enc[:0], n+1)
				if err := st.ValuePut(counting.StateName, r.Key, nil, enc, 0); err != nil {
					return err
				}
				val = counting.AppendJSON(val[:0], r.Key, n+1)
				out.Add(r.Key, val, r.Timestamp)
			}
			return nil
		}, func() {}, nil
	}}}
	for _, m := range []struct{ label, file string }{{"(b) C module", "counter-c.wasm"}, {"(c) Go module", "counter-go.wasm"}, {"(d) Rust module", "counter-rust.wasm"}, {"(e) AS module", "counter-as.wasm"}} {
		mod, err := engine.Load(ctx, filepath.Join(root, "udfs/build", m.file))
		if err != nil {
			return err
		}
		variants = append(variants, variant{m.label, func(st state.Store) (func(in, out *stream.Batch) error, func(), error) {
			inst, err := mod.NewInstance(ctx, host.InstanceConfig{Name: "bench/" + m.file, State: st})
			if err != nil {
				return nil, nil, err
			}
			if err := inst.Open([]byte(`{}`)); err != nil {
				inst.Close()
				return nil, nil, err
			}
			var out *stream.Batch
			emit := func(recs []stream.Record) { out.AddRecords(recs) }
			return func(in, o *stream.Batch) error {
				out = o
				return inst.Process(in.Records, emit)
			}, func() { inst.Close() }, nil
		}})
	}
	fmt.Printf("operator only: counter (keyed, in-memory state, %d keys) over %d batches of %d records, %d interleaved rounds (medians)\n",
		counterKeys, len(batches), jobspec.DefaultBatchSize, runs)
	out := stream.NewBatch(jobspec.DefaultBatchSize)
	run := 0
	perRecord, ratio, err := rounds(runs, len(variants), func(i int) (float64, error) {
		v := variants[i]
		run++
		st, err := newStore(run)
		if err != nil {
			return 0, err
		}
		process, closeFn, err := v.open(st)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", v.label, err)
		}
		defer closeFn()
		start := time.Now()
		// Labelled, so that -cpuprofile splits by variant (pprof -tagfocus=variant=...).
		pprof.Do(ctx, pprof.Labels("variant", "counter "+v.label), func(context.Context) {
			for _, b := range batches {
				out.Reset()
				if err = process(b, out); err != nil {
					return
				}
			}
		})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", v.label, err)
		}
		cost := float64(time.Since(start).Nanoseconds()) / float64(records)
		// The last batch's last count says the run counted every record.
		last := out.Records[out.Len()-1]
		if want := counting.AppendJSON(nil, last.Key, uint64((records+counterKeys-1)/counterKeys)); records%counterKeys == 0 && string(last.Value) != string(want) {
			return 0, fmt.Errorf("%s: last output %s, want %s", v.label, last.Value, want)
		}
		return cost, nil
	})
	if err != nil {
		return err
	}
	for i, v := range variants {
		fmt.Printf("  %-14s %8.1f ns/record %12.0f records/s\n", v.label, perRecord[i], 1e9/perRecord[i])
	}
	printRatios(ratio)
	return nil
}
