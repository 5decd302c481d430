package host

import (
	"fmt"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// BenchmarkEchoBatch measures the host's per-record cost through the echo
// module: encode a batch into guest memory, one eddy_process call (with its
// deadline), the guest's re-encoding, one emit and its decode.
func BenchmarkEchoBatch(b *testing.B) {
	const batchSize = 256
	e := newTestEngine(b, Config{})
	i := newTestInstance(b, loadFixture(b, e, "echo"), "bench/echo[0]")
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
