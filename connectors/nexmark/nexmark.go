// Package nexmark is the Nexmark benchmark's event model: people, auctions
// and bids of an online auction site, generated the way the Nexmark
// generator (Apache Beam's and nexmark/nexmark's NexmarkGenerator) does —
// proportions 1:3:46, hot auctions, sellers and bidders, bids going to
// in-flight auctions and auctions to recently active people, event times
// spaced by the event rate.
//
// Every event is a pure function of (configuration, event number): the
// generator source splits event numbers over parallel subtasks and resumes
// from a checkpointed event number, and the Nexmark queries' reference
// implementations regenerate the same events in Go without running a job.
package nexmark

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/eddy-stream/eddy/connectors/internal/seeded"
)

// Event types, as the event_type column of Flink's Nexmark table.
const (
	TypePerson  = 0
	TypeAuction = 1
	TypeBid     = 2
)

// Model constants: fixed by the Nexmark generator, not configurable there
// either.
const (
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
	NumCategories   = 5

	// personIDLead and auctionIDLead let a bid or auction name an id a
	// little beyond the newest one (the Nexmark model does: events of
	// several generators are not perfectly ordered).
	personIDLead  = 10
	auctionIDLead = 10
	// hotIDRatio groups ids into blocks of 100: a hot auction, seller or
	// bidder is the first id of the newest block.
	hotIDRatio = 100
	// hotChannelsRatio: 1 bid in 2 comes from one of the 4 hot channels.
	hotChannelsRatio = 2
	channelsNumber   = 10_000
	minStringLength  = 3
)

// Config is the model's configuration. Zero fields of a Config passed to
// New are not defaults: use DefaultConfig and change what differs.
type Config struct {
	// Seed varies every random choice; the same seed gives the same events.
	Seed uint64
	// StartMs is the event time (ms since the epoch) of event 0.
	StartMs int64
	// IntervalNs is the event-time step between consecutive events: the
	// inverse of Nexmark's event rate (10,000/s by default: 100µs).
	IntervalNs uint64
	// DisorderMs moves each event's dateTime back by a random amount up to
	// this bound, so that events arrive out of event-time order.
	DisorderMs uint64

	PersonProportion  uint64
	AuctionProportion uint64
	BidProportion     uint64

	// Hot ratios: a bid goes to the hot auction with probability
	// 1 − 1/HotAuctionRatio, and similarly for bidders and sellers.
	HotAuctionRatio uint64
	HotBiddersRatio uint64
	HotSellersRatio uint64

	// InFlightAuctions is how many of the newest auctions bids go to.
	InFlightAuctions uint64
	// ActivePeople is how many of the newest people bid and sell.
	ActivePeople uint64

	// Average event sizes in bytes: the extra field pads events to them.
	AvgPersonBytes  uint64
	AvgAuctionBytes uint64
	AvgBidBytes     uint64
}

// DefaultConfig is Nexmark's default configuration.
func DefaultConfig() Config {
	return Config{
		StartMs:           1767225600000, // 2026-01-01T00:00:00Z
		IntervalNs:        100_000,       // 10,000 events per second
		PersonProportion:  1,
		AuctionProportion: 3,
		BidProportion:     46,
		HotAuctionRatio:   2,
		HotBiddersRatio:   4,
		HotSellersRatio:   4,
		InFlightAuctions:  100,
		ActivePeople:      1000,
		AvgPersonBytes:    200,
		AvgAuctionBytes:   500,
		AvgBidBytes:       100,
	}
}

// maxField bounds the counts and sizes, so that products of them cannot
// overflow and a typo does not allocate gigabytes.
const maxField = 1 << 30

// Validate reports the first field out of range, in one line naming the
// spec field (the job spec uses these names).
func (c Config) Validate() error {
	if c.IntervalNs == 0 {
		return errors.New("interval must be > 0")
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{
		{"person_proportion", c.PersonProportion},
		{"auction_proportion", c.AuctionProportion},
		{"bid_proportion", c.BidProportion},
		{"hot_auction_ratio", c.HotAuctionRatio},
		{"hot_bidders_ratio", c.HotBiddersRatio},
		{"hot_sellers_ratio", c.HotSellersRatio},
		{"in_flight_auctions", c.InFlightAuctions},
		{"active_people", c.ActivePeople},
		{"avg_person_bytes", c.AvgPersonBytes},
		{"avg_auction_bytes", c.AvgAuctionBytes},
		{"avg_bid_bytes", c.AvgBidBytes},
	} {
		if f.v == 0 || f.v > maxField {
			return fmt.Errorf("nexmark.%s is %d, want 1..%d", f.name, f.v, maxField)
		}
	}
	if c.PersonProportion+c.AuctionProportion+c.BidProportion > maxField {
		return fmt.Errorf("nexmark proportions add up to more than %d", maxField)
	}
	return nil
}

// Person is a person event: someone who sells or bids.
type Person struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     int64  `json:"dateTime"`
	Extra        string `json:"extra"`
}

// Auction is an auction event: an item put up for sale by a seller.
type Auction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"`
	Expires     int64  `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

// Bid is a bid event: a bidder's price for an auction.
type Bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Event is one of the three kinds; the JSON layout is Flink's Nexmark
// row (event_type and a column per kind) with the absent kinds left out.
type Event struct {
	Type    int      `json:"event_type"`
	Person  *Person  `json:"person,omitempty"`
	Auction *Auction `json:"auction,omitempty"`
	Bid     *Bid     `json:"bid,omitempty"`
}

// Timestamp is the event's dateTime in ms: the record timestamp.
func (e Event) Timestamp() int64 {
	switch {
	case e.Person != nil:
		return e.Person.DateTime
	case e.Auction != nil:
		return e.Auction.DateTime
	case e.Bid != nil:
		return e.Bid.DateTime
	}
	return 0
}

// Generator makes the events of one Config. Its tables (the channel URLs,
// the pool extra strings are cut from) are derived from the seed, so two
// generators of one Config agree. Not safe for concurrent use (it reuses
// a scratch buffer): make one per goroutine.
type Generator struct {
	cfg     Config
	total   uint64
	seedMix uint64
	// extraPool is random letters that extra fields are slices of, as
	// Nexmark cuts them from one reusable string: padding need not be
	// generated byte by byte.
	extraPool []byte
	hotURLs   [4]string
	channels  []channel
	scratch   []byte
	raw       rawEvent
	// The decimal forms of the last dateTime, bid auction and bidder:
	// consecutive events of a subtask mostly share them (ten events a ms,
	// the hot auction and bidder), and formatting integers was a third of
	// AppendJSON's time.
	tsDigits, auctionDigits, bidderDigits digits
}

// digits caches the decimal form of the last value appended through it.
type digits struct {
	v int64
	n uint8 // 0: nothing cached yet
	b [20]byte
}

func (d *digits) append(dst []byte, v int64) []byte {
	if v != d.v || d.n == 0 {
		d.v = v
		d.n = uint8(len(strconv.AppendInt(d.b[:0], v, 10)))
	}
	return append(dst, d.b[:d.n]...)
}

// channel is the name and URL of one of the channelsNumber channels,
// packed in 32 bytes: bids pick channels at random, and as 20,000
// separate strings (1.2 MB scattered over the heap) they missed the cache
// on almost every bid; as one array of 320 KB they mostly hit it.
type channel struct {
	// path is the URL's random part, between urlPrefix and urlSuffix:
	// three segments of 3 or 4 letters or '_', each with its '/'.
	path    [15]byte
	pathLen uint8
	// id is the digits of the URL's channel_id parameter; idLen 0: the URL
	// has none.
	id    [10]byte
	idLen uint8
	// number is the digits of n in the name "channel-n".
	number    [4]byte
	numberLen uint8
}

const (
	urlPrefix = "https://www.nexmark.com/"
	urlSuffix = "item.htm?query=1"
	channelID = "&channel_id="
)

// appendURL appends the channel's URL (appendBaseURL's, and its id).
func (ch *channel) appendURL(dst []byte) []byte {
	dst = append(dst, urlPrefix...)
	dst = append(dst, ch.path[:ch.pathLen]...)
	dst = append(dst, urlSuffix...)
	if ch.idLen > 0 {
		dst = append(dst, channelID...)
		dst = append(dst, ch.id[:ch.idLen]...)
	}
	return dst
}

func (ch *channel) appendName(dst []byte) []byte {
	dst = append(dst, "channel-"...)
	return append(dst, ch.number[:ch.numberLen]...)
}

var hotChannels = [4]string{"Google", "Facebook", "Baidu", "Apple"}

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

// New checks c and builds its generator.
func New(c Config) (*Generator, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:     c,
		total:   c.PersonProportion + c.AuctionProportion + c.BidProportion,
		seedMix: seeded.Mix64(c.Seed ^ 0x6e65786d61726b), // "nexmark": unrelated to the other generators' streams
	}
	// The pool must be longer than the longest extra (about 1.2 × the
	// largest average size) so that a random offset fits.
	poolLen := 2*max(c.AvgPersonBytes, c.AvgAuctionBytes, c.AvgBidBytes) + 4096
	r := seeded.New(g.seedMix ^ 0x706f6f6c)
	g.extraPool = make([]byte, poolLen)
	for i := range g.extraPool {
		g.extraPool[i] = byte('a' + r.Intn(26))
	}
	for i := range g.hotURLs {
		g.hotURLs[i] = string(appendBaseURL(nil, &r))
	}
	g.channels = make([]channel, channelsNumber)
	for i := range g.channels {
		ch := &g.channels[i]
		u := appendBaseURL(nil, &r)
		ch.pathLen = uint8(copy(ch.path[:], u[len(urlPrefix):len(u)-len(urlSuffix)]))
		if r.Intn(10) > 0 {
			id := strconv.AppendUint(nil, uint64(bits.Reverse32(uint32(i))&math.MaxInt32), 10)
			ch.idLen = uint8(copy(ch.id[:], id))
		}
		ch.numberLen = uint8(copy(ch.number[:], strconv.Itoa(i)))
	}
	g.scratch = make([]byte, 0, 512)
	return g, nil
}

// Config is the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// Type is the kind of event n, without generating it.
func (g *Generator) Type(n uint64) int { return g.typeAt(g.placeOf(n)) }

// BaseTime is event n's event time before the disorder: StartMs + n ×
// IntervalNs, in ms. Events' dateTime is at most DisorderMs earlier.
func (g *Generator) BaseTime(n uint64) int64 {
	if hi, lo := bits.Mul64(n, g.cfg.IntervalNs); hi == 0 {
		// MulDivClamped's value when the product fits in 64 bits (always,
		// but for events trillions of years on), by a constant divisor,
		// which compiles to a multiplication instead of a 128-bit division.
		return seeded.AddClamped(g.cfg.StartMs, int64(lo/1e6))
	}
	return seeded.AddClamped(g.cfg.StartMs, seeded.MulDivClamped(n, g.cfg.IntervalNs, 1e6))
}

// Event is event n.
func (g *Generator) Event(n uint64) Event {
	e := &g.raw
	g.generate(n, e)
	ev := Event{Type: e.typ}
	switch e.typ {
	case TypePerson:
		ev.Person = &Person{ID: e.id, Name: string(e.s[0]), EmailAddress: string(e.s[1]), CreditCard: string(e.s[2]),
			City: string(e.s[3]), State: string(e.s[4]), DateTime: e.ts, Extra: string(e.extra)}
	case TypeAuction:
		ev.Auction = &Auction{ID: e.id, ItemName: string(e.s[0]), Description: string(e.s[1]), InitialBid: e.initialBid,
			Reserve: e.reserve, DateTime: e.ts, Expires: e.expires, Seller: e.seller, Category: e.category, Extra: string(e.extra)}
	default:
		var name, url string
		if h := e.hotChannel; h >= 0 {
			name, url = hotChannels[h], g.hotURLs[h]
		} else {
			ch := &g.channels[e.channel]
			name, url = string(ch.appendName(nil)), string(ch.appendURL(nil))
		}
		ev.Bid = &Bid{Auction: e.auction, Bidder: e.bidder, Price: e.price, Channel: name, URL: url,
			DateTime: e.ts, Extra: string(e.extra)}
	}
	return ev
}

// AppendJSON appends event n as JSON (the layout of Event's JSON tags)
// and returns its dateTime: the generator source's fast path, without
// building an Event.
func (g *Generator) AppendJSON(dst []byte, n uint64) ([]byte, int64) {
	e := &g.raw
	g.generate(n, e)
	switch e.typ {
	case TypePerson:
		dst = append(dst, `{"event_type":0,"person":{"id":`...)
		dst = appendInt(dst, e.id)
		dst = appendStr(dst, `,"name":`, e.s[0])
		dst = appendStr(dst, `,"emailAddress":`, e.s[1])
		dst = appendStr(dst, `,"creditCard":`, e.s[2])
		dst = appendStr(dst, `,"city":`, e.s[3])
		dst = appendStr(dst, `,"state":`, e.s[4])
		dst = append(dst, `,"dateTime":`...)
		dst = g.tsDigits.append(dst, e.ts)
	case TypeAuction:
		dst = append(dst, `{"event_type":1,"auction":{"id":`...)
		dst = appendInt(dst, e.id)
		dst = appendStr(dst, `,"itemName":`, e.s[0])
		dst = appendStr(dst, `,"description":`, e.s[1])
		dst = append(dst, `,"initialBid":`...)
		dst = appendInt(dst, e.initialBid)
		dst = append(dst, `,"reserve":`...)
		dst = appendInt(dst, e.reserve)
		dst = append(dst, `,"dateTime":`...)
		dst = g.tsDigits.append(dst, e.ts)
		dst = append(dst, `,"expires":`...)
		dst = appendInt(dst, e.expires)
		dst = append(dst, `,"seller":`...)
		dst = appendInt(dst, e.seller)
		dst = append(dst, `,"category":`...)
		dst = appendInt(dst, e.category)
	default:
		dst = append(dst, `{"event_type":2,"bid":{"auction":`...)
		dst = g.auctionDigits.append(dst, e.auction)
		dst = append(dst, `,"bidder":`...)
		dst = g.bidderDigits.append(dst, e.bidder)
		dst = append(dst, `,"price":`...)
		dst = appendInt(dst, e.price)
		if h := e.hotChannel; h >= 0 {
			dst = appendStr(dst, `,"channel":`, hotChannels[h])
			dst = appendStr(dst, `,"url":`, g.hotURLs[h])
		} else {
			ch := &g.channels[e.channel]
			dst = append(dst, `,"channel":"`...)
			dst = ch.appendName(dst)
			dst = append(dst, `","url":"`...)
			dst = ch.appendURL(dst)
			dst = append(dst, '"')
		}
		dst = append(dst, `,"dateTime":`...)
		dst = g.tsDigits.append(dst, e.ts)
	}
	dst = appendStr(dst, `,"extra":`, e.extra)
	return append(dst, "}}"...), e.ts
}
