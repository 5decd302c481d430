// Package nexmark runs the Nexmark queries of this directory (q0.yaml …)
// and checks their output against a reference computed in plain Go from
// the same generated events, without Eddy: its tests do it at parallelism
// 1 and 3, and `make bench-nexmark` (cmd/eddy-bench -only nexmark) for
// every run it measures.
package nexmark

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	gen "github.com/eddy-stream/eddy/connectors/nexmark"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// Queries are the queries with a spec here, in Nexmark's order.
var Queries = []string{"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11", "q12"}

// Load reads query's spec from dir (the directory of this file) for a run
// of events events: every node at parallelism p but the sink (1), which
// writes to out, or discards what it gets when out is "" (as Nexmark's
// blackhole sink).
func Load(dir, query string, events int64, p int, out string) (*jobspec.Spec, error) {
	spec, err := jobspec.Load(filepath.Join(dir, query+".yaml"))
	if err != nil {
		return nil, err
	}
	spec.Parallelism = p
	for i := range spec.Nodes {
		n := &spec.Nodes[i]
		n.Parallelism = 0
		switch {
		case n.Source != nil && n.Source.Generator != nil:
			n.Source.Generator.Count = events
		case n.Sink != nil:
			n.Parallelism = 1
			n.Sink = &jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: out}}
			if out == "" {
				n.Sink = &jobspec.SinkSpec{Discard: &jobspec.DiscardSpec{}}
			}
		}
	}
	return spec, nil
}

// Model is the event model of a spec's Nexmark source: Nexmark's defaults
// with the spec's seed, disorder and interval (the queries' specs set no
// other generator field).
func Model(spec *jobspec.Spec) (gen.Config, error) {
	for _, n := range spec.Nodes {
		if g := n.Source; g != nil && g.Generator != nil && g.Generator.Kind == jobspec.GeneratorNexmark {
			s := g.Generator
			if s.Nexmark != nil || s.Rate != 0 || s.Start != "" {
				return gen.Config{}, fmt.Errorf("source %s: the reference knows only seed, disorder and interval", n.Name)
			}
			c := gen.DefaultConfig()
			c.Seed, c.DisorderMs = uint64(s.Seed), uint64(s.Disorder.D().Milliseconds())
			if s.Interval > 0 {
				c.IntervalNs = uint64(s.Interval.D().Nanoseconds())
			}
			return c, nil
		}
	}
	return gen.Config{}, fmt.Errorf("job %s has no nexmark source", spec.Name)
}

// Check compares a query's output lines with the reference's for events
// 0 … events−1 of the model: as multisets of JSON values, except q4,
// whose running averages come in an order that depends on the run (see
// checkQ4), and q12, whose windows of processing time depend on the run,
// where the counts of each bidder must add up to its bids in whole
// windows of 10 s. The error names the first difference.
func Check(query string, model gen.Config, events uint64, got [][]byte) error {
	g, err := gen.New(model)
	if err != nil {
		return err
	}
	var lines []string
	for _, l := range got {
		c, err := canonical(l)
		if err != nil {
			return fmt.Errorf("%s: output line %q: %v", query, l, err)
		}
		lines = append(lines, c)
	}
	slices.Sort(lines)
	switch query {
	case "q12":
		return checkQ12(g, events, lines)
	case "q4":
		return checkQ4(g, events, lines)
	}
	rows, err := reference(query, g, events)
	if err != nil {
		return err
	}
	var want []string
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		want = append(want, string(b))
	}
	slices.Sort(want)
	return diff(query, want, lines)
}

// diff reports the first line in one sorted list and not the other.
func diff(query string, want, got []string) error {
	i, j := 0, 0
	for i < len(want) && j < len(got) && want[i] == got[j] {
		i, j = i+1, j+1
	}
	switch {
	case i == len(want) && j == len(got):
		return nil
	case j == len(got) || i < len(want) && want[i] < got[j]:
		return fmt.Errorf("%s: %d lines, the reference %d; missing %s", query, len(got), len(want), want[i])
	default:
		return fmt.Errorf("%s: %d lines, the reference %d; unexpected %s", query, len(got), len(want), got[j])
	}
}

// canonical is a JSON value re-encoded with sorted keys and numbers as
// written.
func canonical(line []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

type row = map[string]any

func bidRow(b *gen.Bid) row {
	return row{"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "dateTime": b.DateTime, "extra": b.Extra}
}

// floorTo is the start of the window of size that holds ts.
func floorTo(ts, size int64) int64 { return ts - ((ts%size)+size)%size }

// reference is what Flink's SQL of each query gives, computed directly.
func reference(query string, g *gen.Generator, events uint64) ([]row, error) {
	var out []row
	each := func(f func(e gen.Event)) {
		for n := range events {
			f(g.Event(n))
		}
	}
	switch query {
	case "q0", "q1", "q2":
		each(func(e gen.Event) {
			b := e.Bid
			switch {
			case b == nil:
			case query == "q0":
				out = append(out, bidRow(b))
			case query == "q1":
				r := bidRow(b)
				r["price"] = json.Number(fmt.Sprintf("%d.%03d", b.Price*908/1000, b.Price*908%1000))
				out = append(out, r)
			case b.Auction%123 == 0:
				out = append(out, row{"auction": b.Auction, "price": b.Price})
			}
		})
	case "q3": // people of OR, ID, CA joined with their auctions of category 10
		people := map[int64]*gen.Person{}
		var auctions []*gen.Auction
		each(func(e gen.Event) {
			switch {
			case e.Person != nil && (e.Person.State == "OR" || e.Person.State == "ID" || e.Person.State == "CA"):
				people[e.Person.ID] = e.Person
			case e.Auction != nil && e.Auction.Category == 10:
				auctions = append(auctions, e.Auction)
			}
		})
		for _, a := range auctions {
			if p := people[a.Seller]; p != nil {
				out = append(out, row{"name": p.Name, "city": p.City, "state": p.State, "id": a.ID})
			}
		}
	case "q5": // HOP(dateTime, 2 s, 10 s), count per auction, the top auctions per window
		type wa struct{ start, auction int64 }
		counts := map[wa]int64{}
		each(func(e gen.Event) {
			if b := e.Bid; b != nil {
				for s := floorTo(b.DateTime, 2000); s > b.DateTime-10000; s -= 2000 {
					counts[wa{s, b.Auction}]++
				}
			}
		})
		best := map[int64]int64{}
		for k, c := range counts {
			best[k.start] = max(best[k.start], c)
		}
		for k, c := range counts {
			if c == best[k.start] {
				out = append(out, row{"auction": k.auction, "num": c, "window_end": k.start + 10000})
			}
		}
	case "q7": // the bids at the highest price of each 10 s tumbling window
		type top struct {
			price int64
			bids  []*gen.Bid
		}
		windows := map[int64]*top{}
		each(func(e gen.Event) {
			b := e.Bid
			if b == nil {
				return
			}
			w := floorTo(b.DateTime, 10000)
			t := windows[w]
			switch {
			case t == nil || b.Price > t.price:
				windows[w] = &top{b.Price, []*gen.Bid{b}}
			case b.Price == t.price:
				t.bids = append(t.bids, b)
			}
		})
		for _, t := range windows {
			for _, b := range t.bids {
				out = append(out, bidRow(b))
			}
		}
	case "q8": // people who opened an auction in the 10 s window they joined in
		type pw struct{ person, start int64 }
		sold := map[pw]bool{}
		var people []*gen.Person
		each(func(e gen.Event) {
			switch {
			case e.Person != nil:
				people = append(people, e.Person)
			case e.Auction != nil:
				sold[pw{e.Auction.Seller, floorTo(e.Auction.DateTime, 10000)}] = true
			}
		})
		for _, p := range people {
			if w := floorTo(p.DateTime, 10000); sold[pw{p.ID, w}] {
				out = append(out, row{"id": p.ID, "name": p.Name, "starttime": w})
			}
		}
	case "q11": // bids per bidder and session of 10 s gap (Flink merges windows that touch)
		times := map[int64][]int64{}
		each(func(e gen.Event) {
			if b := e.Bid; b != nil {
				times[b.Bidder] = append(times[b.Bidder], b.DateTime)
			}
		})
		for bidder, ts := range times {
			slices.Sort(ts)
			start, end, n := ts[0], ts[0]+10000, 0
			for _, t := range ts {
				if t > end {
					out = append(out, row{"key": strconv.FormatInt(bidder, 10), "window_start": start, "window_end": end, "count": n})
					start, n = t, 0
				}
				end, n = t+10000, n+1
			}
			out = append(out, row{"key": strconv.FormatInt(bidder, 10), "window_start": start, "window_end": end, "count": n})
		}
	default:
		return nil, fmt.Errorf("no reference for query %q", query)
	}
	return out, nil
}

// checkQ4: the closing price of an auction is its highest bid from its
// dateTime to its expires; each category's lines are its running average
// (integer, Flink's AVG of BIGINT) after 1, 2, … n closed auctions, whose
// order depends on the run, so only the last average is compared, and
// that there is one line per closed auction.
func checkQ4(g *gen.Generator, events uint64, lines []string) error {
	auctions := map[int64]*gen.Auction{}
	var bids []*gen.Bid
	for n := range events {
		switch e := g.Event(n); {
		case e.Auction != nil:
			auctions[e.Auction.ID] = e.Auction
		case e.Bid != nil:
			bids = append(bids, e.Bid)
		}
	}
	final := map[int64]int64{}
	for _, b := range bids {
		if a := auctions[b.Auction]; a != nil && b.DateTime >= a.DateTime && b.DateTime <= a.Expires {
			if p, ok := final[a.ID]; !ok || b.Price > p {
				final[a.ID] = b.Price
			}
		}
	}
	type agg struct{ sum, n int64 }
	want := map[int64]*agg{}
	for id, p := range final {
		c := auctions[id].Category
		if want[c] == nil {
			want[c] = &agg{}
		}
		want[c].sum += p
		want[c].n++
	}
	seen := map[[2]int64]bool{}
	last := map[int64]int64{}
	for _, l := range lines {
		var r struct {
			Category *int64 `json:"category"`
			Avg      *int64 `json:"avg"`
			Auctions *int64 `json:"auctions"`
		}
		d := json.NewDecoder(strings.NewReader(l))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil || r.Category == nil || r.Avg == nil || r.Auctions == nil {
			return fmt.Errorf("q4: line %s is not {category, avg, auctions} (%v)", l, err)
		}
		w := want[*r.Category]
		k := [2]int64{*r.Category, *r.Auctions}
		switch {
		case w == nil:
			return fmt.Errorf("q4: line %s: category %d has no closed auction", l, *r.Category)
		case *r.Auctions < 1 || *r.Auctions > w.n || seen[k]:
			return fmt.Errorf("q4: line %s: category %d closed %d auctions, each once", l, *r.Category, w.n)
		}
		seen[k] = true
		if *r.Auctions == w.n {
			last[*r.Category] = *r.Avg
		}
	}
	for c, w := range want {
		avg, ok := last[c]
		switch {
		case !ok:
			return fmt.Errorf("q4: category %d: no line after its %d closed auctions", c, w.n)
		case avg != w.sum/w.n:
			return fmt.Errorf("q4: category %d: average %d after %d auctions, the reference %d", c, avg, w.n, w.sum/w.n)
		}
	}
	return nil
}

// checkQ12: every line is {bidder, bid_count, starttime, endtime} of a
// whole 10 s window, a bidder's windows are distinct, and its counts add
// up to its bids.
func checkQ12(g *gen.Generator, events uint64, lines []string) error {
	bids := map[int64]int64{}
	for n := range events {
		if b := g.Event(n).Bid; b != nil {
			bids[b.Bidder]++
		}
	}
	got := map[int64]int64{}
	seen := map[[2]int64]bool{}
	for _, l := range lines {
		var r struct {
			Bidder    *int64 `json:"bidder"`
			BidCount  *int64 `json:"bid_count"`
			Starttime *int64 `json:"starttime"`
			Endtime   *int64 `json:"endtime"`
		}
		d := json.NewDecoder(strings.NewReader(l))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil || r.Bidder == nil || r.BidCount == nil || r.Starttime == nil || r.Endtime == nil {
			return fmt.Errorf("q12: line %s is not {bidder, bid_count, starttime, endtime} (%v)", l, err)
		}
		if *r.Endtime-*r.Starttime != 10000 || *r.Starttime%10000 != 0 || *r.BidCount < 1 {
			return fmt.Errorf("q12: line %s is not a count of a whole 10 s window", l)
		}
		w := [2]int64{*r.Bidder, *r.Starttime}
		if seen[w] {
			return fmt.Errorf("q12: bidder %d has window %d twice", *r.Bidder, *r.Starttime)
		}
		seen[w] = true
		got[*r.Bidder] += *r.BidCount
	}
	for bidder, n := range bids {
		if got[bidder] != n {
			return fmt.Errorf("q12: bidder %d: %d bids counted, the events have %d", bidder, got[bidder], n)
		}
	}
	if len(got) != len(bids) {
		return fmt.Errorf("q12: %d bidders counted, the events have %d", len(got), len(bids))
	}
	return nil
}
