package nexmark

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func mustNew(t testing.TB, c Config) *Generator {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// stats are what TestModel measures over a run of events.
type stats struct {
	kinds                                  [3]int
	hotAuctionBids, hotBidderBids, hotSell int
}

// TestModel checks the model's invariants over 1M events of the default
// configuration (with a disorder bound) and of a changed one.
func TestModel(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"default with disorder", func(c *Config) { c.DisorderMs = 4000; c.Seed = 42 }},
		{"other proportions and ratios", func(c *Config) {
			c.PersonProportion, c.AuctionProportion, c.BidProportion = 2, 5, 13
			c.HotAuctionRatio, c.HotBiddersRatio, c.HotSellersRatio = 5, 2, 10
			c.InFlightAuctions, c.ActivePeople = 300, 50
			c.IntervalNs = 1_000_000 // 1,000 events/s
			c.DisorderMs = 250
		}},
	}
	const events = 1_000_000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			g := mustNew(t, c)
			total := c.PersonProportion + c.AuctionProportion + c.BidProportion
			var s stats
			var maxTS int64 = math.MinInt64
			nextPerson, nextAuction := int64(FirstPersonID), int64(FirstAuctionID)
			for n := uint64(0); n < events; n++ {
				ev := g.Event(n)
				ts := ev.Timestamp()
				// Timestamps are monotone up to the out-of-order bound,
				// and never later than the event's base time.
				if base := g.BaseTime(n); ts > base || ts < base-int64(c.DisorderMs) {
					t.Fatalf("event %d: dateTime %d outside [%d, %d]", n, ts, base-int64(c.DisorderMs), base)
				}
				if n > 0 && maxTS-ts > int64(c.DisorderMs) {
					t.Fatalf("event %d: dateTime %d is %d ms behind an earlier event's, bound %d", n, ts, maxTS-ts, c.DisorderMs)
				}
				maxTS = max(maxTS, ts)
				s.kinds[ev.Type]++
				lastP := g.lastPersonID(g.placeOf(n)) + FirstPersonID
				lastA := g.lastAuctionID(g.placeOf(n)) + FirstAuctionID
				switch ev.Type {
				case TypePerson:
					// People get consecutive ids in event order.
					if ev.Person.ID != nextPerson {
						t.Fatalf("event %d: person id %d, want %d", n, ev.Person.ID, nextPerson)
					}
					nextPerson++
				case TypeAuction:
					a := ev.Auction
					if a.ID != nextAuction {
						t.Fatalf("event %d: auction id %d, want %d", n, a.ID, nextAuction)
					}
					nextAuction++
					inWindow(t, n, "seller", a.Seller, lastP, c.ActivePeople, personIDLead)
					if a.Seller == (lastP-FirstPersonID)/hotIDRatio*hotIDRatio+FirstPersonID {
						s.hotSell++
					}
					if a.Expires <= a.DateTime || a.Reserve < a.InitialBid || a.InitialBid < 100 ||
						a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories {
						t.Fatalf("event %d: bad auction %+v", n, a)
					}
				case TypeBid:
					b := ev.Bid
					inWindow(t, n, "auction", b.Auction, lastA, c.InFlightAuctions, auctionIDLead)
					inWindow(t, n, "bidder", b.Bidder, lastP, c.ActivePeople, personIDLead)
					if b.Auction == (lastA-FirstAuctionID)/hotIDRatio*hotIDRatio+FirstAuctionID {
						s.hotAuctionBids++
					}
					if b.Bidder == (lastP-FirstPersonID)/hotIDRatio*hotIDRatio+1+FirstPersonID {
						s.hotBidderBids++
					}
					if b.Price < 100 || b.Price > 100_000_000 || b.Channel == "" || !strings.HasPrefix(b.URL, "https://www.nexmark.com/") {
						t.Fatalf("event %d: bad bid %+v", n, b)
					}
				}
			}
			want := [3]uint64{c.PersonProportion, c.AuctionProportion, c.BidProportion}
			for k := range 3 {
				frac := float64(s.kinds[k]) / events
				if wantFrac := float64(want[k]) / float64(total); math.Abs(frac-wantFrac) > 0.001 {
					t.Errorf("kind %d: %.4f of the events, want %.4f", k, frac, wantFrac)
				}
			}
			// A hot id is chosen with probability 1 − 1/ratio; a random
			// choice hits it now and then too, hence the upper slack.
			hot := func(what string, got, of int, ratio uint64) {
				frac, want := float64(got)/float64(of), 1-1/float64(ratio)
				if frac < want-0.01 || frac > want+0.03 {
					t.Errorf("%s: %.4f hot, want about %.4f", what, frac, want)
				}
			}
			hot("bid auctions", s.hotAuctionBids, s.kinds[TypeBid], c.HotAuctionRatio)
			hot("bidders", s.hotBidderBids, s.kinds[TypeBid], c.HotBiddersRatio)
			hot("sellers", s.hotSell, s.kinds[TypeAuction], c.HotSellersRatio)
		})
	}
}

// inWindow checks that id is among the newest `window` ids before last
// (a hot id is the start of last's block of 100, which may reach further
// back) or at most lead ids beyond it.
func inWindow(t *testing.T, n uint64, what string, id, last int64, window uint64, lead int64) {
	t.Helper()
	lo := last - int64(max(window, hotIDRatio))
	if id < lo || id > last+lead {
		t.Fatalf("event %d: %s %d outside [%d, %d]", n, what, id, lo, last+lead)
	}
}

// TestEventSizes: the extra field pads events to about the configured
// average sizes.
func TestEventSizes(t *testing.T) {
	c := DefaultConfig()
	c.AvgBidBytes = 300
	g := mustNew(t, c)
	var sum, count [3]int
	for n := uint64(0); n < 50_000; n++ {
		e := &g.raw
		g.generate(n, e)
		size := len(e.extra)
		for _, s := range e.s {
			size += len(s)
		}
		switch e.typ {
		case TypeBid:
			size += 32
		case TypeAuction:
			size += 48
		default:
			size += 8
		}
		sum[e.typ] += size
		count[e.typ]++
	}
	for k, want := range []uint64{c.AvgPersonBytes, c.AvgAuctionBytes, c.AvgBidBytes} {
		avg := float64(sum[k]) / float64(count[k])
		if math.Abs(avg-float64(want)) > 0.1*float64(want) {
			t.Errorf("kind %d: average size %.0f bytes, want about %d", k, avg, want)
		}
	}
}

// TestJSONRoundTrip: AppendJSON's bytes are valid JSON that decodes
// (with no unknown field) to exactly Event(n), for each kind.
func TestJSONRoundTrip(t *testing.T) {
	g := mustNew(t, DefaultConfig())
	seen := map[int]bool{}
	for n := uint64(0); n < 2000; n++ {
		b, ts := g.AppendJSON(nil, n)
		want := g.Event(n)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var got Event
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("event %d: %v: %s", n, err, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("event %d: decoded %+v, want %+v", n, got, want)
		}
		if ts != want.Timestamp() {
			t.Fatalf("event %d: timestamp %d, want dateTime %d", n, ts, want.Timestamp())
		}
		// encoding/json writes the same layout (it escapes & in URLs,
		// which is the same string).
		std, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if string(bytes.ReplaceAll(std, []byte(`\u0026`), []byte("&"))) != string(b) {
			t.Fatalf("event %d: AppendJSON\n%s\nencoding/json\n%s", n, b, std)
		}
		seen[want.Type] = true
	}
	if len(seen) != 3 {
		t.Fatalf("kinds seen: %v, want all 3", seen)
	}
}

// TestDeterministic: an event depends on the configuration and its
// number only — not on the generator instance nor on the order of calls —
// and the seed changes it.
func TestDeterministic(t *testing.T) {
	c := DefaultConfig()
	c.Seed, c.DisorderMs = 9, 100
	a, b := mustNew(t, c), mustNew(t, c)
	const n = 5000
	forward := make([]string, n)
	for i := range uint64(n) {
		v, _ := a.AppendJSON(nil, i)
		forward[i] = string(v)
	}
	for i := n - 1; i >= 0; i-- {
		if v, _ := b.AppendJSON(nil, uint64(i)); string(v) != forward[i] {
			t.Fatalf("event %d differs between generators or call orders", i)
		}
	}
	c.Seed++
	other := mustNew(t, c)
	same := 0
	for i := range uint64(n) {
		if v, _ := other.AppendJSON(nil, i); string(v) == forward[i] {
			same++
		}
	}
	if same > n/100 {
		t.Fatalf("%d of %d events unchanged by another seed", same, n)
	}
}

// TestSplitUnion: subtask i of p taking events i, i+p… yields the same
// union as one subtask, for p = 1 and 3.
func TestSplitUnion(t *testing.T) {
	c := DefaultConfig()
	c.DisorderMs = 50
	const count = 10_007
	union := func(p uint64) map[string]int {
		m := map[string]int{}
		for i := range p {
			g := mustNew(t, c) // one generator per subtask
			for n := i; n < count; n += p {
				v, _ := g.AppendJSON(nil, n)
				m[string(v)]++
			}
		}
		return m
	}
	one, three := union(1), union(3)
	if len(one) != count || !reflect.DeepEqual(one, three) {
		t.Fatalf("parallelism 1: %d distinct events, parallelism 3: %d; want the same %d", len(one), len(three), count)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"zero interval", func(c *Config) { c.IntervalNs = 0 }, "interval must be > 0"},
		{"zero proportion", func(c *Config) { c.BidProportion = 0 }, "nexmark.bid_proportion is 0"},
		{"huge active people", func(c *Config) { c.ActivePeople = 1 << 40 }, "nexmark.active_people is"},
		{"zero hot ratio", func(c *Config) { c.HotSellersRatio = 0 }, "nexmark.hot_sellers_ratio is 0"},
		{"proportions overflow", func(c *Config) { c.PersonProportion, c.AuctionProportion = maxField, maxField }, "add up"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			_, err := New(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("New: %v, want one line mentioning %q", err, tc.want)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
}

func BenchmarkNexmarkModel(b *testing.B) {
	g := mustNew(b, DefaultConfig())
	buf := make([]byte, 0, 1024)
	var n uint64
	var bytesOut int
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = g.AppendJSON(buf[:0], n)
		bytesOut += len(buf)
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(bytesOut)/float64(n), "B/event")
}
