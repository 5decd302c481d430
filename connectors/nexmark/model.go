package nexmark

import (
	"math"
	"strconv"

	"github.com/eddy-stream/eddy/connectors/internal/seeded"
)

// rawEvent is one generated event before it becomes an Event or JSON. Its
// byte slices point into the generator's scratch buffer or extra pool, so
// that the source's path allocates nothing per event.
type rawEvent struct {
	typ int
	ts  int64
	// s holds the string fields of a person (name, email, credit card,
	// city, state) or an auction (item name, description).
	s     [5][]byte
	extra []byte

	id, seller, category   int64
	initialBid, reserve    int64
	expires                int64
	auction, bidder, price int64
	// hotChannel is the bid's hot channel, or −1 if it is channels[channel].
	hotChannel, channel int
}

// generate fills e with event n. Every random choice comes from a stream
// seeded by (seed, n) alone: the event does not depend on any other.
func (g *Generator) generate(n uint64, e *rawEvent) {
	c := &g.cfg
	r := seeded.At(g.seedMix, n)
	at := g.placeOf(n)
	e.typ = g.typeAt(at)
	base := g.BaseTime(n)
	e.ts = base
	if c.DisorderMs > 0 {
		e.ts -= int64(r.Intn(c.DisorderMs + 1))
	}
	buf := g.scratch[:0]
	// field appends to buf and returns the new bytes. buf's capacity (512)
	// exceeds the longest event's strings (about 130 bytes), so appends
	// never move it and earlier fields stay valid.
	field := func(f func([]byte) []byte) []byte {
		start := len(buf)
		buf = f(buf)
		return buf[start:len(buf):len(buf)]
	}
	switch e.typ {
	case TypePerson:
		e.id = g.lastPersonID(at) + FirstPersonID
		e.s[0] = field(func(b []byte) []byte {
			b = append(b, firstNames[r.Intn(uint64(len(firstNames)))]...)
			b = append(b, ' ')
			return append(b, lastNames[r.Intn(uint64(len(lastNames)))]...)
		})
		e.s[1] = field(func(b []byte) []byte {
			b = appendString(b, &r, 7, ' ')
			b = append(b, '@')
			b = appendString(b, &r, 5, ' ')
			return append(b, ".com"...)
		})
		e.s[2] = field(func(b []byte) []byte {
			for i := range 4 {
				if i > 0 {
					b = append(b, ' ')
				}
				b = appendPadded4(b, r.Intn(10000))
			}
			return b
		})
		e.s[3] = field(func(b []byte) []byte { return append(b, usCities[r.Intn(uint64(len(usCities)))]...) })
		e.s[4] = field(func(b []byte) []byte { return append(b, usStates[r.Intn(uint64(len(usStates)))]...) })
		size := 8 + len(e.s[0]) + len(e.s[1]) + len(e.s[2]) + len(e.s[3]) + len(e.s[4])
		e.extra = g.nextExtra(&r, size, c.AvgPersonBytes)
	case TypeAuction:
		e.id = g.lastAuctionID(at) + FirstAuctionID
		if r.Intn(c.HotSellersRatio) > 0 {
			e.seller = g.lastPersonID(at) / hotIDRatio * hotIDRatio
		} else {
			e.seller = g.nextPersonID(at, &r)
		}
		e.seller += FirstPersonID
		e.category = FirstCategoryID + int64(r.Intn(NumCategories))
		e.initialBid = nextPrice(&r)
		e.reserve = e.initialBid + nextPrice(&r)
		e.expires = e.ts + g.auctionLengthMs(n, base, &r)
		e.s[0] = field(func(b []byte) []byte { return appendString(b, &r, 20, ' ') })
		e.s[1] = field(func(b []byte) []byte { return appendString(b, &r, 100, ' ') })
		size := 8 + len(e.s[0]) + len(e.s[1]) + 8 + 8 + 8 + 8 + 8
		e.extra = g.nextExtra(&r, size, c.AvgAuctionBytes)
	default:
		if r.Intn(c.HotAuctionRatio) > 0 {
			e.auction = g.lastAuctionID(at) / hotIDRatio * hotIDRatio
		} else {
			e.auction = g.nextAuctionID(at, &r)
		}
		e.auction += FirstAuctionID
		if r.Intn(c.HotBiddersRatio) > 0 {
			e.bidder = g.lastPersonID(at)/hotIDRatio*hotIDRatio + 1
		} else {
			e.bidder = g.nextPersonID(at, &r)
		}
		e.bidder += FirstPersonID
		e.price = nextPrice(&r)
		if r.Intn(hotChannelsRatio) > 0 {
			e.hotChannel = int(r.Intn(uint64(len(hotChannels))))
		} else {
			e.hotChannel, e.channel = -1, int(r.Intn(channelsNumber))
		}
		e.s[0], e.s[1] = nil, nil
		e.extra = g.nextExtra(&r, 8+8+8+8, c.AvgBidBytes)
	}
	g.scratch = buf[:0]
}

// place is where an event falls in the repeating blocks of total events
// (persons first, then auctions, then bids): the block and the offset in
// it. generate computes it once per event for the helpers below, which
// each divided by total, a slow instruction, on their own before.
type place struct{ epoch, offset uint64 }

func (g *Generator) placeOf(n uint64) place { return place{n / g.total, n % g.total} }

func (g *Generator) typeAt(at place) int {
	switch {
	case at.offset < g.cfg.PersonProportion:
		return TypePerson
	case at.offset < g.cfg.PersonProportion+g.cfg.AuctionProportion:
		return TypeAuction
	}
	return TypeBid
}

// lastPersonID is the base-0 id of the newest person at an event: persons
// are the first PersonProportion events of every block of total.
func (g *Generator) lastPersonID(at place) int64 {
	epoch, offset := at.epoch, at.offset
	if offset >= g.cfg.PersonProportion {
		offset = g.cfg.PersonProportion - 1
	}
	return int64(epoch*g.cfg.PersonProportion + offset)
}

// lastAuctionID is the base-0 id of the newest auction at an event; −1
// before the first auction.
func (g *Generator) lastAuctionID(at place) int64 {
	p, a := g.cfg.PersonProportion, g.cfg.AuctionProportion
	epoch, offset := int64(at.epoch), at.offset
	switch {
	case offset < p:
		epoch--
		offset = a - 1
	case offset >= p+a:
		offset = a - 1
	default:
		offset -= p
	}
	return epoch*int64(a) + int64(offset)
}

// nextPersonID is a random active person: one of the newest ActivePeople,
// or a few ids ahead.
func (g *Generator) nextPersonID(at place, r *seeded.Rand) int64 {
	people := uint64(g.lastPersonID(at)) + 1
	active := min(people, g.cfg.ActivePeople)
	return int64(people - active + r.Intn(active+personIDLead))
}

// nextAuctionID is a random in-flight auction: one of the newest
// InFlightAuctions, or a few ids ahead.
func (g *Generator) nextAuctionID(at place, r *seeded.Rand) int64 {
	hi := max(g.lastAuctionID(at), 0)
	lo := max(hi-int64(g.cfg.InFlightAuctions), 0)
	return lo + int64(r.Intn(uint64(hi-lo)+1+auctionIDLead))
}

// auctionLengthMs is how long an auction runs: up to twice the event time
// it takes for InFlightAuctions new auctions to open, so that about that
// many are open at any time.
func (g *Generator) auctionLengthMs(n uint64, base int64, r *seeded.Rand) int64 {
	events := g.cfg.InFlightAuctions * g.total / g.cfg.AuctionProportion
	horizon := g.BaseTime(n+events) - base
	return 1 + int64(r.Intn(uint64(max(2*horizon, 1))))
}

// nextPrice is a price in cents, log-uniform between $1 and $1,000,000:
// 10^(6u) dollars, computed as e^(6u·ln 10), which costs half of Pow.
// (A table of e^(i/128) and a degree-5 series, with math.Exp only near a
// half cent, gave the same prices but was no faster: math.Exp is ~15 ns.)
func nextPrice(r *seeded.Rand) int64 {
	return int64(math.Round(math.Exp(r.Float()*(6*math.Ln10)) * 100))
}

// appendString appends 3..maxLen−1 random lower-case letters, 1 in 13 of
// them special instead; a space special is trimmed off both ends, as the
// model trims its strings.
func appendString(dst []byte, r *seeded.Rand, maxLen uint64, special byte) []byte {
	l := minStringLength + r.Intn(maxLen-minStringLength)
	start := len(dst)
	for range l {
		v := r.Next()
		if v%13 == 0 {
			if special == ' ' && len(dst) == start {
				continue // a leading space would be trimmed
			}
			dst = append(dst, special)
		} else {
			dst = append(dst, byte('a'+(v>>8)%26))
		}
	}
	for special == ' ' && len(dst) > start && dst[len(dst)-1] == ' ' {
		dst = dst[:len(dst)-1]
	}
	return dst
}

// appendBaseURL is a random item URL of the site.
func appendBaseURL(dst []byte, r *seeded.Rand) []byte {
	dst = append(dst, urlPrefix...)
	for range 3 {
		dst = appendString(dst, r, 5, '_')
		dst = append(dst, '/')
	}
	return append(dst, urlSuffix...)
}

// nextExtra pads an event of size bytes to about avg (±20 %) with random
// letters, cut from the pool.
func (g *Generator) nextExtra(r *seeded.Rand, size int, avg uint64) []byte {
	if uint64(size) > avg {
		return g.extraPool[:0]
	}
	rest := avg - uint64(size)
	delta := uint64(math.Round(float64(rest) * 0.2))
	want := rest - delta
	if delta > 0 {
		want += r.Intn(2 * delta)
	}
	off := r.Intn(uint64(len(g.extraPool)) - want)
	return g.extraPool[off : off+want : off+want]
}

func appendPadded4(dst []byte, v uint64) []byte {
	return append(dst, byte('0'+v/1000%10), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

// appendStr appends a key and a JSON string. The model's strings are
// letters, digits, spaces and URL punctuation: nothing JSON must escape.
func appendStr[S ~string | ~[]byte](dst []byte, key string, s S) []byte {
	dst = append(dst, key...)
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
