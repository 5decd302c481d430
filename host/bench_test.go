package host

import (
	"context"
	"fmt"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// BenchmarkEchoBatch measures the host's per-record cost through the echo
// module: encode a batch into guest memory, one eddy_process call (with its
// deadline), the guest's re-encoding, one emit and its decode; without a
// gate and with one that admits at once, the cost of the hook itself.
func BenchmarkEchoBatch(b *testing.B) {
	b.Run("gate=none", func(b *testing.B) { benchEchoBatch(b, nil, false) })
	b.Run("gate=open", func(b *testing.B) { benchEchoBatch(b, newCountingGate(), false) })
	// The cost of the call metrics (metrics.go): the same calls uncounted,
	// alternating with gate=none under -count.
	b.Run("gate=none,metrics=off", func(b *testing.B) { benchEchoBatch(b, nil, true) })
}

// countingGate admits every call at once and counts them.
type countingGate struct {
	n, released int
	release     func() // bound once: a method value returned each time would allocate
}

func newCountingGate() *countingGate {
	g := &countingGate{}
	g.release = func() { g.released++ }
	return g
}

func (g *countingGate) Acquire(context.Context) (func(), error) {
	g.n++
	return g.release, nil
}

func benchEchoBatch(b *testing.B, gate Gate, noMetrics bool) {
	const batchSize = 256
	e := newTestEngine(b, Config{})
	i, err := loadFixture(b, e, "echo").NewInstance(context.Background(), InstanceConfig{Name: "bench/echo[0]", Gate: gate, noMetrics: noMetrics})
	if err != nil {
		b.Fatal(err)
	}
	defer i.Close()
	if err := i.Open(nil); err != nil {
		b.Fatal(err)
	}
	recs := make([]abi.Record, batchSize)
	for j := range recs {
		recs[j] = abi.Record{
			Key:       fmt.Appendf(nil, "user-%05d", j),
			Value:     fmt.Appendf(nil, `{"user":"user-%05d","amount":%4d.25,"currency":"EUR","ok":true}`, j, j),
			Timestamp: 1700000000000 + int64(j),
		}
	}
	b.SetBytes(int64(abi.EncodedSize(recs)))
	emitted := 0
	emit := func(out []abi.Record) { emitted += len(out) }
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := i.Process(recs, emit); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if emitted != b.N*batchSize {
		b.Fatalf("emitted %d records, want %d", emitted, b.N*batchSize)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/record")
}
