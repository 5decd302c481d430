package jobspec

import (
	"strings"
	"testing"
)

// TestParseNexmark: the nexmark block of a generator parses into
// NexmarkSpec, and a misspelt field is refused on its line with the
// closest name.
func TestParseNexmark(t *testing.T) {
	const good = `name: nx
nodes:
  - name: events
    source:
      generator:
        kind: nexmark
        count: 1000
        nexmark: {bid_proportion: 40, hot_auction_ratio: 3, in_flight_auctions: 50}
  - name: out
    input: events
    sink: {discard: {}}
`
	s, err := Parse([]byte(good), "nx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g := s.Nodes[0].Source.Generator
	if g.Kind != GeneratorNexmark || g.Nexmark == nil || *g.Nexmark != (NexmarkSpec{BidProportion: 40, HotAuctionRatio: 3, InFlightAuctions: 50}) {
		t.Fatalf("generator %+v, nexmark %+v", g, g.Nexmark)
	}
	bad := strings.Replace(good, "hot_auction_ratio", "hot_auction_ration", 1)
	_, err = Parse([]byte(bad), "nx.yaml")
	if err == nil || !strings.Contains(err.Error(), `nx.yaml:8: unknown field "hot_auction_ration"`) || !strings.Contains(err.Error(), "hot_auction_ratio") {
		t.Fatalf("misspelt field: %v", err)
	}
}
