package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors/nexmark"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

func TestNexmarkSpecErrors(t *testing.T) {
	tests := []struct {
		name string
		spec jobspec.GeneratorSpec
		want string
	}{
		{"negative proportion", jobspec.GeneratorSpec{Kind: "nexmark", Nexmark: &jobspec.NexmarkSpec{BidProportion: -1}}, "nexmark.bid_proportion is -1, want ≥ 1 (0 is the default 46)"},
		{"negative in-flight auctions", jobspec.GeneratorSpec{Kind: "nexmark", Nexmark: &jobspec.NexmarkSpec{InFlightAuctions: -5}}, "nexmark.in_flight_auctions is -5"},
		{"huge size", jobspec.GeneratorSpec{Kind: "nexmark", Nexmark: &jobspec.NexmarkSpec{AvgBidBytes: 1 << 31}}, "nexmark.avg_bid_bytes is 2147483648"},
		{"nexmark on another kind", jobspec.GeneratorSpec{Kind: "sequence", Nexmark: &jobspec.NexmarkSpec{}}, `nexmark is only for kind "nexmark"`},
		{"cards on nexmark", jobspec.GeneratorSpec{Kind: "nexmark", Cards: 3}, "cards is only for"},
		{"late fraction on nexmark", jobspec.GeneratorSpec{Kind: "nexmark", Disorder: jobspec.Duration(time.Second), LateFraction: 0.1}, "late_fraction is not for kind"},
		{"negative disorder", jobspec.GeneratorSpec{Kind: "nexmark", Disorder: jobspec.Duration(-time.Second)}, "disorder is -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Registry{}.NewSource(genSpec(tc.spec), "")
			if err == nil || !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("NewSource: %v, want one line of ErrBadSpec mentioning %q", err, tc.want)
			}
		})
	}
}

// TestNexmarkSource: the source's records are the model's events, without
// a key, stamped with their dateTime; the event-time spacing follows the
// rate unless interval is set; the union over 3 subtasks is that of 1.
func TestNexmarkSource(t *testing.T) {
	tests := []struct {
		name     string
		spec     jobspec.GeneratorSpec
		interval time.Duration // the model's expected spacing
		edit     func(*nexmark.Config)
	}{
		{"defaults", jobspec.GeneratorSpec{Kind: "nexmark", Count: 3001, Seed: 3}, 100 * time.Microsecond, nil},
		{"spacing from the rate", jobspec.GeneratorSpec{Kind: "nexmark", Count: 3001, Seed: 3, Rate: 1e6}, time.Microsecond, nil},
		{"interval and fields", jobspec.GeneratorSpec{Kind: "nexmark", Count: 3001, Seed: 4, Interval: jobspec.Duration(time.Millisecond),
			Disorder: jobspec.Duration(3 * time.Second), Start: "2020-05-01T00:00:00Z",
			Nexmark: &jobspec.NexmarkSpec{PersonProportion: 2, AuctionProportion: 2, BidProportion: 6, HotAuctionRatio: 3, ActivePeople: 20, AvgBidBytes: 150}},
			time.Millisecond, func(c *nexmark.Config) {
				c.DisorderMs = 3000
				c.StartMs = time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
				c.PersonProportion, c.AuctionProportion, c.BidProportion = 2, 2, 6
				c.HotAuctionRatio, c.ActivePeople, c.AvgBidBytes = 3, 20, 150
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := nexmark.DefaultConfig()
			c.Seed, c.IntervalNs = uint64(tc.spec.Seed), uint64(tc.interval)
			if tc.edit != nil {
				tc.edit(&c)
			}
			model, err := nexmark.New(c)
			if err != nil {
				t.Fatal(err)
			}
			one := drainAll(t, genSpec(tc.spec), "", 1, 100)
			three := drainAll(t, genSpec(tc.spec), "", 3, 37)
			if !slices.Equal(one, three) {
				t.Fatal("parallelism 1 and 3 produce different events")
			}
			var want []rec
			for n := range uint64(tc.spec.Count) {
				v, ts := model.AppendJSON(nil, n)
				want = append(want, rec{"", string(v), ts})
			}
			sortRecs(want)
			if !slices.Equal(one, want) {
				t.Fatalf("%d records, not the model's %d events", len(one), len(want))
			}
			for _, r := range one[:50] {
				var e nexmark.Event
				if err := json.Unmarshal([]byte(r.Value), &e); err != nil {
					t.Fatal(err)
				}
				if e.Timestamp() != r.TS {
					t.Fatalf("record timestamp %d, dateTime %d", r.TS, e.Timestamp())
				}
			}
		})
	}
}

// TestNexmarkSeek: a restored subtask continues exactly after the
// position of any batch: no event lost, none repeated.
func TestNexmarkSeek(t *testing.T) {
	spec := jobspec.GeneratorSpec{Kind: "nexmark", Count: 400, Seed: 11, Disorder: jobspec.Duration(time.Second)}
	for _, p := range []int{1, 3} {
		checkSeekRoundTrip(t, genSpec(spec), p, 17)
	}
}

// BenchmarkNexmarkSource is the source's events/s on one core: the model
// plus the batch copy.
func BenchmarkNexmarkSource(b *testing.B) {
	src, err := Registry{}.NewSource(genSpec(jobspec.GeneratorSpec{Kind: "nexmark", Seed: 1, Disorder: jobspec.Duration(4 * time.Second)}), "")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{}); err != nil {
		b.Fatal(err)
	}
	const batch = 1024
	out := stream.NewBatch(batch)
	b.ReportAllocs()
	events, bytesOut := 0, 0
	for b.Loop() {
		out.Reset()
		if err := src.Next(ctx, out, batch); err != nil {
			b.Fatal(err)
		}
		events += out.Len()
		bytesOut += out.Bytes()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(bytesOut)/float64(events), "B/event")
}
