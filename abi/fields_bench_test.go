package abi_test

import (
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/connectors/nexmark"
)

// BenchmarkExtractNexmark is the host's field extraction (EncodeBatch with
// a field table) over Nexmark events with the paths q0 declares: most of
// q0's CPU with a C module (its profile in the Nexmark notes).
func BenchmarkExtractNexmark(b *testing.B) {
	g, err := nexmark.New(nexmark.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]abi.Record, 1024)
	bytes := 0
	for i := range recs {
		v, ts := g.AppendJSON(nil, uint64(i))
		recs[i] = abi.Record{Value: v, Timestamp: ts}
		bytes += len(v)
	}
	f, err := abi.ParseFieldList(abi.EncodeFieldList([][]string{{"event_type"}, {"bid"}, {"bid", "auction"},
		{"bid", "bidder"}, {"bid", "price"}, {"bid", "dateTime"}, {"bid", "extra"}}))
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, f.EncodedSize(recs))
	b.SetBytes(int64(bytes))
	b.ResetTimer()
	for range b.N {
		f.EncodeBatch(dst, recs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/event")
}
