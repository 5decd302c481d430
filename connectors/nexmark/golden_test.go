package nexmark

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from the current generator")

// goldenEvents is how many events of each configuration the golden hashes
// cover: every kind many times over, hot and cold choices, the disorder.
const goldenEvents = 200_000

// goldenConfigs are the configurations whose events are pinned: the
// default, one with a seed and a disorder bound, and one that changes every
// proportion, ratio and size (persons there are larger than their average,
// so their extra is empty).
var goldenConfigs = []struct {
	name string
	edit func(*Config)
}{
	{"default", func(*Config) {}},
	{"seed 42 disorder 4s", func(c *Config) { c.Seed, c.DisorderMs = 42, 4000 }},
	{"changed", func(c *Config) {
		c.Seed = 0xdeadbeef
		c.PersonProportion, c.AuctionProportion, c.BidProportion = 2, 5, 13
		c.HotAuctionRatio, c.HotBiddersRatio, c.HotSellersRatio = 5, 2, 10
		c.InFlightAuctions, c.ActivePeople = 300, 50
		c.IntervalNs = 1_000_000
		c.DisorderMs = 250
		c.AvgPersonBytes, c.AvgAuctionBytes, c.AvgBidBytes = 40, 900, 300
	}},
}

// goldenRanges are the event numbers pinned: the first events, and a few
// far on, where ids and times have more digits and, at 2⁶², times clamp.
var goldenRanges = []struct{ from, count uint64 }{
	{0, goldenEvents},
	{1e12, 20_000},
	{1 << 62, 5_000},
}

// goldenHash is the sha256 of the JSON and timestamp of the events of
// goldenRanges, in event order, event n made by the generator of subtask n mod p (one
// generator per subtask, each seeing only its own events, in order, as the
// source's subtasks do), into a reused buffer as the source does.
func goldenHash(t testing.TB, c Config, p uint64) string {
	gens := make([]*Generator, p)
	for i := range gens {
		gens[i] = mustNew(t, c)
	}
	h := sha256.New()
	var buf []byte
	for _, r := range goldenRanges {
		for n := r.from; n < r.from+r.count; n++ {
			var ts int64
			buf, ts = gens[n%p].AppendJSON(buf[:0], n)
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, ts, 10)
			buf = append(buf, '\n')
			h.Write(buf)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestGolden pins the generated events byte for byte: the queries'
// reference implementations regenerate them and a restored source resumes
// from an event number, so a generator change that moves a single byte of
// a single event is a bug, however harmless it looks. The hashes were
// computed from the generator before its optimisations; regenerate them
// (-update) only for an intended change of the model.
func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "golden.txt")
	want := map[string]string{}
	if !*update {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			name, hash, ok := strings.Cut(strings.TrimSpace(line), ": ")
			if ok {
				want[name] = hash
			}
		}
	}
	var out strings.Builder
	for _, tc := range goldenConfigs {
		c := DefaultConfig()
		tc.edit(&c)
		got := goldenHash(t, c, 1)
		// The same events split over 3 subtasks.
		if split := goldenHash(t, c, 3); split != got {
			t.Errorf("%s: events split over 3 subtasks hash to %s, in one to %s", tc.name, split, got)
		}
		fmt.Fprintf(&out, "%s: %s\n", tc.name, got)
		if !*update && got != want[tc.name] {
			t.Errorf("%s: the pinned events hash to %s, want %s: the generated events changed", tc.name, got, want[tc.name])
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
