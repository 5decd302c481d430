package connectors

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/eddy-stream/eddy/connectors/internal/seeded"
	"github.com/eddy-stream/eddy/connectors/nexmark"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// Generator defaults, applied to zero fields of a jobspec.GeneratorSpec.
const (
	// DefaultGeneratorStart is the event time of record 0: a fixed instant,
	// not "now", so that two runs of a job produce the same records.
	DefaultGeneratorStart = "2026-01-01T00:00:00Z"
	// DefaultSequenceInterval is the event-time step of "sequence": 1000
	// records per event-time second.
	DefaultSequenceInterval = time.Millisecond
	// DefaultTransactionsInterval is the event-time step of
	// "transactions": 10 transactions per event-time second, so that the
	// default 1000 cards each pay about once every 100 s and windows of
	// minutes hold a handful of transactions per card.
	DefaultTransactionsInterval = 100 * time.Millisecond
	// DefaultCards is the number of distinct cards of "transactions".
	DefaultCards = 1000
)

// Shape of the generated transactions. They are fixed rather than
// configurable: the demo operators (udfs/) and their tests rely on them.
const (
	merchantCount = 500
	// travelPer10k is how often, in 1/10000, a transaction happens outside
	// its card's home country: rare enough that a country-change detector
	// raises occasional alerts rather than constant ones.
	travelPer10k = 300
)

var countries = [...]string{"DE", "FR", "NL", "ES", "IT", "GB", "US", "PL", "SE", "CH"}

// generatorConfig is a GeneratorSpec with defaults applied and checked.
type generatorConfig struct {
	kind         string
	count        uint64 // 0: unbounded
	rate         float64
	seed         uint64
	cards        uint64
	cardWidth    int   // digits of the card number, zero padded
	startMs      int64 // event time of record 0
	intervalNs   uint64
	disorderMs   uint64
	lateFraction float64
	realtime     bool           // paced by event time, not by rate
	nexmark      nexmark.Config // kind nexmark only
}

// newGeneratorConfig validates spec and fills in the defaults, so that a bad
// spec fails when the job is built rather than when the source first runs.
func newGeneratorConfig(spec *jobspec.GeneratorSpec) (generatorConfig, error) {
	var c generatorConfig
	bad := func(format string, args ...any) (generatorConfig, error) {
		return c, fmt.Errorf("%w: "+format, append([]any{ErrBadSpec}, args...)...)
	}
	var interval time.Duration
	switch spec.Kind {
	case jobspec.GeneratorSequence:
		interval = DefaultSequenceInterval
		if spec.Cards != 0 {
			return bad("cards is only for kind %q", jobspec.GeneratorTransactions)
		}
	case jobspec.GeneratorTransactions:
		interval = DefaultTransactionsInterval
	case jobspec.GeneratorNexmark:
		// Nexmark spaces event times by its event rate: the configured
		// rate when there is one, else Nexmark's default 10,000/s.
		interval = time.Duration(nexmark.DefaultConfig().IntervalNs)
		if spec.Rate > 0 && !math.IsInf(spec.Rate, 0) {
			interval = max(time.Duration(float64(time.Second)/spec.Rate), 1)
		}
		if spec.Cards != 0 {
			return bad("cards is only for kind %q", jobspec.GeneratorTransactions)
		}
		if spec.LateFraction != 0 {
			return bad("late_fraction is not for kind %q (its out-of-order bound is disorder)", jobspec.GeneratorNexmark)
		}
	case "":
		return bad("kind is empty (want %q, %q or %q)", jobspec.GeneratorSequence, jobspec.GeneratorTransactions, jobspec.GeneratorNexmark)
	default:
		return bad("unknown kind %q (want %q, %q or %q)", spec.Kind, jobspec.GeneratorSequence, jobspec.GeneratorTransactions, jobspec.GeneratorNexmark)
	}
	if spec.Nexmark != nil && spec.Kind != jobspec.GeneratorNexmark {
		return bad("nexmark is only for kind %q", jobspec.GeneratorNexmark)
	}
	c.kind = spec.Kind
	if spec.Count < 0 {
		return bad("count is %d, want ≥ 0 (0 is unbounded)", spec.Count)
	}
	c.count = uint64(spec.Count)
	if spec.Rate < 0 || math.IsNaN(spec.Rate) || math.IsInf(spec.Rate, 0) {
		return bad("rate is %v, want a finite number ≥ 0 (0 is as fast as possible)", spec.Rate)
	}
	c.rate = spec.Rate
	c.seed = uint64(spec.Seed)

	c.cards = DefaultCards
	if spec.Cards < 0 {
		return bad("cards is %d, want ≥ 1 (0 is the default %d)", spec.Cards, DefaultCards)
	} else if spec.Cards > 0 {
		c.cards = uint64(spec.Cards)
	}
	c.cardWidth = max(4, len(strconv.FormatUint(c.cards-1, 10)))

	start := spec.Start
	if start == "" {
		start = DefaultGeneratorStart
	}
	t, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		return bad("start %q is not an RFC 3339 time", spec.Start)
	}
	c.startMs = t.UnixMilli()

	switch d := spec.Interval.D(); {
	case d < 0:
		return bad("interval is %v, want > 0", d)
	case d > 0 && spec.Realtime && spec.Rate > 0:
		return bad("realtime with both rate (%v/s) and interval (%v): give one, the other follows", spec.Rate, d)
	case d > 0:
		interval = d
	case spec.Realtime && spec.Rate > 0:
		interval = max(time.Duration(float64(time.Second)/spec.Rate), 1)
	}
	c.intervalNs = uint64(interval)
	if c.realtime = spec.Realtime; c.realtime {
		// The schedule paces; a rate would pace a second time.
		c.rate = 0
	}

	if d := spec.Disorder.D(); d < 0 {
		return bad("disorder is %v, want ≥ 0", d)
	}
	c.disorderMs = uint64(spec.Disorder.D().Milliseconds())
	if lf := spec.LateFraction; lf < 0 || lf > 1 || math.IsNaN(lf) {
		return bad("late_fraction is %v, want 0..1", lf)
	}
	if spec.LateFraction > 0 && c.disorderMs == 0 {
		// Late records are moved back by more than Disorder; with no
		// disorder there is no bound to exceed.
		return bad("late_fraction needs a disorder of at least 1ms")
	}
	c.lateFraction = spec.LateFraction
	if c.kind == jobspec.GeneratorNexmark {
		if c.nexmark, err = nexmarkConfig(c, spec.Nexmark); err != nil {
			return bad("%v", err)
		}
	}
	return c, nil
}

// nexmarkConfig is the Nexmark model of a generator: its seed, start,
// interval and disorder, and the spec's nexmark fields over Nexmark's
// defaults.
func nexmarkConfig(c generatorConfig, spec *jobspec.NexmarkSpec) (nexmark.Config, error) {
	m := nexmark.DefaultConfig()
	m.Seed, m.StartMs, m.IntervalNs, m.DisorderMs = c.seed, c.startMs, c.intervalNs, c.disorderMs
	if spec == nil {
		return m, m.Validate()
	}
	for _, f := range []struct {
		name string
		v    int
		dst  *uint64
	}{
		{"person_proportion", spec.PersonProportion, &m.PersonProportion},
		{"auction_proportion", spec.AuctionProportion, &m.AuctionProportion},
		{"bid_proportion", spec.BidProportion, &m.BidProportion},
		{"hot_auction_ratio", spec.HotAuctionRatio, &m.HotAuctionRatio},
		{"hot_bidders_ratio", spec.HotBiddersRatio, &m.HotBiddersRatio},
		{"hot_sellers_ratio", spec.HotSellersRatio, &m.HotSellersRatio},
		{"in_flight_auctions", spec.InFlightAuctions, &m.InFlightAuctions},
		{"active_people", spec.ActivePeople, &m.ActivePeople},
		{"avg_person_bytes", spec.AvgPersonBytes, &m.AvgPersonBytes},
		{"avg_auction_bytes", spec.AvgAuctionBytes, &m.AvgAuctionBytes},
		{"avg_bid_bytes", spec.AvgBidBytes, &m.AvgBidBytes},
	} {
		switch {
		case f.v < 0:
			return m, fmt.Errorf("nexmark.%s is %d, want ≥ 1 (0 is the default %d)", f.name, f.v, *f.dst)
		case f.v > 0:
			*f.dst = uint64(f.v)
		}
	}
	return m, m.Validate()
}

// generator is one subtask of a generator source. Subtask i of p produces
// records i, i+p, i+2p… of the global sequence; every record is a pure
// function of (seed, record number), so the union over all subtasks is the
// same whatever the parallelism and however Next is called.
type generator struct {
	cfg    generatorConfig
	open   bool
	done   bool
	next   uint64 // global number of the next record
	step   uint64 // parallelism
	left   uint64 // records this subtask still has to produce (bounded only)
	total  uint64 // records this subtask produces in all (bounded only)
	pacer  *pacer
	sched  *schedule // realtime only, in place of pacer
	seedRn uint64    // mixed seed: record streams of nearby seeds are unrelated
	key    []byte    // reused per record: Batch.Add copies
	value  []byte
	nx     *nexmark.Generator // kind nexmark: built by Open
	spare  int                // kind nexmark: arena room asked for an event
}

func newGenerator(cfg generatorConfig) *generator {
	return &generator{cfg: cfg, seedRn: seeded.Mix64(cfg.seed)}
}

func (g *generator) Open(ctx context.Context, info stream.TaskInfo) error {
	subtask, parallelism, err := subtaskOf(info)
	if err != nil {
		return fmt.Errorf("open generator: %w", err)
	}
	if g.cfg.kind == jobspec.GeneratorNexmark && g.nx == nil {
		if g.nx, err = nexmark.New(g.cfg.nexmark); err != nil {
			return fmt.Errorf("open generator: %w: %v", ErrBadSpec, err)
		}
	}
	g.next, g.step = uint64(subtask), uint64(parallelism)
	if g.cfg.count > 0 {
		if g.next < g.cfg.count {
			g.left = (g.cfg.count - g.next + g.step - 1) / g.step
		}
		g.total = g.left
		g.done = g.left == 0
	}
	g.pacer = newPacer(g.cfg.rate / float64(parallelism))
	if g.cfg.realtime {
		g.sched = newSchedule(g.cfg.startMs, g.cfg.intervalNs, g.step)
	}
	g.key = make([]byte, 0, 32)
	g.value = make([]byte, 0, 160)
	g.spare = 512
	g.open = true
	return nil
}

// PendingRecords is what a bounded generator has still to produce (the
// source lag of its metrics); an unbounded one cannot tell.
func (g *generator) PendingRecords() (int64, bool) {
	if g.cfg.count == 0 || !g.open {
		return 0, false
	}
	return int64(g.left), true
}

// Next appends up to limit records. It returns io.EOF together with the last
// records of a bounded generator, and waits (honouring ctx) when a rate
// is set.
func (g *generator) Next(ctx context.Context, b *stream.Batch, limit int) error {
	if !g.open {
		return fmt.Errorf("generator: %w", errNotOpen)
	}
	if g.done {
		return io.EOF
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if limit <= 0 {
		return nil
	}
	n := uint64(limit)
	if g.cfg.count > 0 {
		n = min(n, g.left)
	}
	var taken int
	var err error
	if g.sched != nil {
		taken, err = g.sched.take(ctx, g.next, int(n))
	} else {
		taken, err = g.pacer.take(ctx, int(n))
	}
	if err != nil {
		return err
	}
	for range taken {
		g.add(b, g.next)
		g.next += g.step
	}
	if g.cfg.count > 0 {
		g.left -= uint64(taken)
		if g.left == 0 {
			g.done = true
			return io.EOF
		}
	}
	return nil
}

func (g *generator) Close() error {
	g.open = false
	return nil
}

// Progress is the records this subtask produced of those it will, after
// a restore too (Seek lowers left, not total); a bounded generator only.
func (g *generator) Progress() (done, total int64, ok bool) {
	if !g.open || g.cfg.count == 0 {
		return 0, 0, false
	}
	return int64(g.total - g.left), int64(g.total), true
}

// generatorPositionTag starts a generator position: its format version.
const generatorPositionTag = 'g'

// Position is the global number of the next record and the parallelism.
// Every record is a pure function of (seed, record number), so that is
// the generator's whole state: a subtask that seeks to it produces
// exactly the records it would have produced next.
func (g *generator) Position() ([]byte, error) {
	if !g.open {
		return nil, fmt.Errorf("generator: %w", errNotOpen)
	}
	return encodeGeneratorPosition(g.next, g.step), nil
}

// Seek continues after the records a position says were produced. It
// refuses a position of another subtask or parallelism.
func (g *generator) Seek(pos []byte) error {
	if !g.open {
		return fmt.Errorf("generator: %w", errNotOpen)
	}
	next, step, err := decodeGeneratorPosition(pos)
	if err != nil {
		return fmt.Errorf("generator: %w", err)
	}
	if step != g.step || next%step != g.next%g.step {
		return fmt.Errorf("generator: position of subtask %d of %d, this is subtask %d of %d", next%step, step, g.next%g.step, g.step)
	}
	if next < g.next {
		// Open put g.next at the subtask's first record; nothing is before.
		return fmt.Errorf("generator: position %d is before the first record %d of this subtask", next, g.next)
	}
	g.next = next
	if g.cfg.count > 0 {
		g.left = 0
		if next < g.cfg.count {
			g.left = (g.cfg.count - next + step - 1) / step
		}
		g.done = g.left == 0
	}
	return nil
}

func encodeGeneratorPosition(next, step uint64) []byte {
	b := []byte{generatorPositionTag, 1}
	b = binary.AppendUvarint(b, next)
	return binary.AppendUvarint(b, step)
}

// decodeGeneratorPosition reads what encodeGeneratorPosition wrote; the
// bytes come from checkpoint storage, so anything else is an error.
func decodeGeneratorPosition(pos []byte) (next, step uint64, err error) {
	if len(pos) < 2 || pos[0] != generatorPositionTag || pos[1] != 1 {
		return 0, 0, fmt.Errorf("%w: not a generator position", ErrBadPosition)
	}
	rest := pos[2:]
	next, n := binary.Uvarint(rest)
	if n <= 0 {
		return 0, 0, fmt.Errorf("%w: generator position: bad record number", ErrBadPosition)
	}
	rest = rest[n:]
	step, n = binary.Uvarint(rest)
	if n <= 0 || step == 0 || step > math.MaxInt32 {
		return 0, 0, fmt.Errorf("%w: generator position: bad parallelism", ErrBadPosition)
	}
	if len(rest) != n {
		return 0, 0, fmt.Errorf("%w: generator position: %d trailing bytes", ErrBadPosition, len(rest)-n)
	}
	return next, step, nil
}

func (g *generator) add(b *stream.Batch, n uint64) {
	if g.nx != nil {
		// Nexmark events have no key: its queries key_by their fields.
		// The event is written in the batch's arena, not copied there;
		// the room asked for is the largest event so far, so that an
		// event rarely outgrows it (AddSpare then copies it).
		v, ts := g.nx.AppendJSON(b.Spare(g.spare), n)
		g.spare = max(g.spare, len(v))
		b.AddSpare(v, ts)
		return
	}
	r := g.recordRand(n)
	if g.cfg.kind == jobspec.GeneratorSequence {
		g.key = strconv.AppendUint(g.key[:0], n, 10)
		g.value = append(g.value[:0], `{"seq":`...)
		g.value = strconv.AppendUint(g.value, n, 10)
		g.value = append(g.value, '}')
		b.Add(g.key, g.value, g.eventTime(n, &r))
		return
	}
	card := r.Next() % g.cfg.cards
	country := g.homeCountry(card)
	if r.Next()%10000 < travelPer10k {
		country = (country + 1 + r.Next()%(uint64(len(countries))-1)) % uint64(len(countries))
	}
	cents := amountCents(&r)
	merchant := r.Next() % merchantCount
	ts := g.eventTime(n, &r)

	g.key = append(g.key[:0], "card-"...)
	g.key = appendPadded(g.key, card, g.cfg.cardWidth)
	v := append(g.value[:0], `{"card":"`...)
	v = append(v, g.key...)
	v = append(v, `","amount":`...)
	v = strconv.AppendUint(v, cents/100, 10)
	v = append(v, '.', byte('0'+cents/10%10), byte('0'+cents%10))
	v = append(v, `,"country":"`...)
	v = append(v, countries[country]...)
	v = append(v, `","merchant":"m-`...)
	v = appendPadded(v, merchant, 3)
	v = append(v, `","ts":`...)
	v = strconv.AppendInt(v, ts, 10)
	v = append(v, '}')
	g.value = v
	b.Add(g.key, g.value, ts)
}

// homeCountry is where a card is used almost always; a pure function of
// (seed, card) so that every subtask agrees on it.
func (g *generator) homeCountry(card uint64) uint64 {
	return seeded.Mix64(g.seedRn^(card*0xd6e8feb86659fd93)) % uint64(len(countries))
}

// amountCents draws an amount with a long tail: mostly everyday payments,
// a few large ones for the fraud rules to look at.
func amountCents(r *seeded.Rand) uint64 {
	switch u := r.Next() % 1000; {
	case u < 900:
		return 100 + r.Next()%19_900 // 1.00 – 199.99
	case u < 990:
		return 20_000 + r.Next()%80_000 // 200.00 – 999.99
	default:
		return 100_000 + r.Next()%400_000 // 1000.00 – 4999.99
	}
}

// eventTime is Start + n×Interval, moved back by the disorder: up to
// Disorder for most records, and by more than Disorder (up to 4×Disorder)
// for the LateFraction that should arrive behind the watermark.
func (g *generator) eventTime(n uint64, r *seeded.Rand) int64 {
	ts := seeded.AddClamped(g.cfg.startMs, seeded.MulDivClamped(n, g.cfg.intervalNs, uint64(time.Millisecond)))
	d := g.cfg.disorderMs
	if d == 0 {
		return ts
	}
	back := r.Next() % (d + 1)
	if g.cfg.lateFraction > 0 && float64(r.Next()>>11)/(1<<53) < g.cfg.lateFraction {
		back = d + 1 + r.Next()%(3*d)
	}
	return ts - int64(back)
}

// recordRand is the random stream of record n: seeded from (seed, n) only.
func (g *generator) recordRand(n uint64) seeded.Rand {
	return seeded.At(g.seedRn, n)
}

// appendPadded appends n in decimal, zero padded to width digits.
func appendPadded(dst []byte, n uint64, width int) []byte {
	var tmp [20]byte
	digits := strconv.AppendUint(tmp[:0], n, 10)
	for i := len(digits); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}
