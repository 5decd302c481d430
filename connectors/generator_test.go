package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

var defaultStartMs = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

func genSpec(g jobspec.GeneratorSpec) *jobspec.SourceSpec {
	return &jobspec.SourceSpec{Generator: &g}
}

func TestGeneratorSpecErrors(t *testing.T) {
	tests := []struct {
		name string
		spec jobspec.GeneratorSpec
		want string
	}{
		{"empty kind", jobspec.GeneratorSpec{}, "kind is empty"},
		{"unknown kind", jobspec.GeneratorSpec{Kind: "nexmark2"}, `unknown kind "nexmark2"`},
		{"negative count", jobspec.GeneratorSpec{Kind: "sequence", Count: -1}, "count is -1"},
		{"negative rate", jobspec.GeneratorSpec{Kind: "sequence", Rate: -5}, "rate is -5"},
		{"cards negative", jobspec.GeneratorSpec{Kind: "transactions", Cards: -3}, "cards is -3"},
		{"cards on sequence", jobspec.GeneratorSpec{Kind: "sequence", Cards: 10}, "cards is only for"},
		{"bad start", jobspec.GeneratorSpec{Kind: "sequence", Start: "yesterday"}, `start "yesterday"`},
		{"negative interval", jobspec.GeneratorSpec{Kind: "sequence", Interval: jobspec.Duration(-time.Second)}, "interval is -1s"},
		{"negative disorder", jobspec.GeneratorSpec{Kind: "transactions", Disorder: jobspec.Duration(-time.Second)}, "disorder is -1s"},
		{"late fraction above 1", jobspec.GeneratorSpec{Kind: "transactions", Disorder: jobspec.Duration(time.Second), LateFraction: 1.5}, "late_fraction is 1.5"},
		{"late fraction without disorder", jobspec.GeneratorSpec{Kind: "transactions", LateFraction: 0.1}, "late_fraction needs a disorder"},
		{"realtime with rate and interval", jobspec.GeneratorSpec{Kind: "sequence", Realtime: true, Rate: 100, Interval: jobspec.Duration(time.Millisecond)}, "realtime with both rate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Registry{}.NewSource(genSpec(tc.spec), "")
			if err == nil {
				t.Fatal("NewSource succeeded, want an error")
			}
			if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrBadSpec mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans several lines", err)
			}
		})
	}
}

// The union of all subtasks is the same records whatever the parallelism
// and the batch size.
func TestGeneratorDeterministicAcrossParallelism(t *testing.T) {
	tests := []struct {
		name string
		spec jobspec.GeneratorSpec
	}{
		{"sequence", jobspec.GeneratorSpec{Kind: "sequence", Count: 10_007, Seed: 1}},
		{"sequence with disorder", jobspec.GeneratorSpec{Kind: "sequence", Count: 10_007, Seed: 1,
			Disorder: jobspec.Duration(50 * time.Millisecond), LateFraction: 0.05}},
		{"transactions", jobspec.GeneratorSpec{Kind: "transactions", Count: 10_007, Seed: 7}},
		{"transactions with disorder", jobspec.GeneratorSpec{Kind: "transactions", Count: 10_007, Seed: 7, Cards: 50,
			Disorder: jobspec.Duration(5 * time.Second), LateFraction: 0.02}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			one := drainAll(t, genSpec(tc.spec), "", 1, 100)
			three := drainAll(t, genSpec(tc.spec), "", 3, 37)
			if len(one) != int(tc.spec.Count) {
				t.Fatalf("parallelism 1: %d records, want %d", len(one), tc.spec.Count)
			}
			if !slices.Equal(one, three) {
				t.Fatal("parallelism 1 and 3 produce different records")
			}
			other := tc.spec
			other.Seed++
			if slices.Equal(one, drainAll(t, genSpec(other), "", 1, 100)) && tc.spec.Kind == "transactions" {
				t.Fatal("seed does not change the transactions")
			}
		})
	}
}

func TestGeneratorCounts(t *testing.T) {
	tests := []struct {
		name        string
		count       int64
		parallelism int
		want        []int // records per subtask
	}{
		{"single", 10, 1, []int{10}},
		{"uneven split", 10, 3, []int{4, 3, 3}},
		{"fewer records than subtasks", 2, 4, []int{1, 1, 0, 0}},
		{"one record", 1, 1, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				src, err := Registry{}.NewSource(genSpec(jobspec.GeneratorSpec{Kind: "sequence", Count: tc.count}), "")
				if err != nil {
					t.Fatal(err)
				}
				got := drain(t, src, i, tc.parallelism, 3)
				if len(got) != want {
					t.Fatalf("subtask %d: %d records, want %d", i, len(got), want)
				}
				// Subtask i produces i, i+p, i+2p… in order.
				for k, r := range got {
					if n := strconv.Itoa(i + k*tc.parallelism); r.Key != n {
						t.Fatalf("subtask %d record %d: key %s, want %s", i, k, r.Key, n)
					}
				}
			}
		})
	}
}

func TestGeneratorUnboundedNeverEnds(t *testing.T) {
	src, err := Registry{}.NewSource(genSpec(jobspec.GeneratorSpec{Kind: "transactions"}), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{Subtask: 1, Parallelism: 2}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := stream.NewBatch(1000)
	for range 50 {
		b.Reset()
		if err := src.Next(ctx, b, 1000); err != nil {
			t.Fatalf("Next: %v", err)
		}
		if b.Len() != 1000 {
			t.Fatalf("unpaced Next returned %d records, want a full batch", b.Len())
		}
	}
}

func TestGeneratorSequenceRecords(t *testing.T) {
	spec := jobspec.GeneratorSpec{Kind: "sequence", Count: 3, Start: "2030-05-01T10:00:00Z", Interval: jobspec.Duration(2 * time.Second)}
	src, err := Registry{}.NewSource(genSpec(spec), "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	want := []rec{
		{"0", `{"seq":0}`, start},
		{"1", `{"seq":1}`, start + 2000},
		{"2", `{"seq":2}`, start + 4000},
	}
	if got := drain(t, src, 0, 1, 10); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

var (
	amountRE   = regexp.MustCompile(`"amount":[0-9]+\.[0-9]{2},`)
	merchantRE = regexp.MustCompile(`^m-[0-9]{3}$`)
)

func TestGeneratorTransactionsFormat(t *testing.T) {
	const count, cards = 20_000, 200
	spec := jobspec.GeneratorSpec{Kind: "transactions", Count: count, Seed: 42, Cards: cards}
	recs := drainAll(t, genSpec(spec), "", 1, 512)
	validCountry := map[string]bool{}
	for _, c := range countries {
		validCountry[c] = true
	}
	perCard := map[string]map[string]int{} // card → country → transactions
	for _, r := range recs {
		// Field order is part of the format: decode token by token.
		dec := json.NewDecoder(strings.NewReader(r.Value))
		dec.UseNumber()
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("%s: not an object", r.Value)
		}
		var names []string
		fields := map[string]any{}
		for dec.More() {
			name, _ := dec.Token()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s: %v", r.Value, err)
			}
			names = append(names, name.(string))
			fields[name.(string)] = v
		}
		if want := []string{"card", "amount", "country", "merchant", "ts"}; !slices.Equal(names, want) {
			t.Fatalf("%s: fields %v, want %v", r.Value, names, want)
		}
		if !amountRE.MatchString(r.Value) {
			t.Fatalf("%s: amount does not have two decimals", r.Value)
		}
		amount, _ := fields["amount"].(json.Number).Float64()
		if amount < 1 || amount >= 5000 {
			t.Fatalf("%s: amount out of range", r.Value)
		}
		card := fields["card"].(string)
		if r.Key != card {
			t.Fatalf("%s: key %q, want the card", r.Value, r.Key)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(card, "card-"))
		if !strings.HasPrefix(card, "card-") || len(card) != len("card-0000") || err != nil || n < 0 || n >= cards {
			t.Fatalf("%s: bad card id", r.Value)
		}
		country := fields["country"].(string)
		if !validCountry[country] {
			t.Fatalf("%s: unknown country", r.Value)
		}
		if m := fields["merchant"].(string); !merchantRE.MatchString(m) {
			t.Fatalf("%s: bad merchant", r.Value)
		}
		if ts, _ := fields["ts"].(json.Number).Int64(); ts != r.TS {
			t.Fatalf("%s: ts %d, record timestamp %d", r.Value, ts, r.TS)
		}
		if perCard[card] == nil {
			perCard[card] = map[string]int{}
		}
		perCard[card][country]++
	}
	// Cards mostly stay home, but not always: a country-change detector
	// must find some alerts and not too many.
	home := 0
	for _, byCountry := range perCard {
		home += slices.Max(slicesValues(byCountry))
	}
	if share := float64(home) / count; share < 0.95 || share > 0.99 {
		t.Fatalf("%.3f of transactions in the card's home country, want about 0.97", share)
	}
	if len(perCard) != cards {
		t.Fatalf("%d distinct cards, want %d", len(perCard), cards)
	}
}

func slicesValues(m map[string]int) []int {
	var vs []int
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

func TestGeneratorDisorderBounded(t *testing.T) {
	const count = 20_000
	disorder := 2 * time.Second
	tests := []struct {
		name     string
		kind     string
		interval time.Duration
		late     float64
	}{
		{"sequence, no late records", "sequence", time.Millisecond, 0},
		{"sequence, 10% late", "sequence", time.Millisecond, 0.1},
		{"transactions, 5% late", "transactions", 100 * time.Millisecond, 0.05},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := jobspec.GeneratorSpec{Kind: tc.kind, Count: count, Seed: 3,
				Disorder: jobspec.Duration(disorder), LateFraction: tc.late}
			src, err := Registry{}.NewSource(genSpec(spec), "")
			if err != nil {
				t.Fatal(err)
			}
			late := 0
			// With parallelism 1 records come in sequence order.
			for n, r := range drain(t, src, 0, 1, 256) {
				back := defaultStartMs + int64(n)*tc.interval.Milliseconds() - r.TS
				if back < 0 || back > 4*disorder.Milliseconds() {
					t.Fatalf("record %d moved back %d ms, want 0..%d", n, back, 4*disorder.Milliseconds())
				}
				if back > disorder.Milliseconds() {
					late++
				}
			}
			if got := float64(late) / count; got < tc.late*0.8 || got > tc.late*1.2 {
				t.Fatalf("%.4f of records late, want about %.2f", got, tc.late)
			}
		})
	}
}

// A paced source blocked waiting for tokens returns as soon as ctx is
// cancelled.
func TestGeneratorRateHonoursCancel(t *testing.T) {
	src, err := Registry{}.NewSource(genSpec(jobspec.GeneratorSpec{Kind: "sequence", Rate: 0.001}), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := src.Open(ctx, stream.TaskInfo{}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := stream.NewBatch(10)
	// The bucket starts with one record; the next waits ~1000 s.
	if err := src.Next(ctx, b, 10); err != nil || b.Len() != 1 {
		t.Fatalf("first Next: %d records, %v", b.Len(), err)
	}
	done := make(chan error, 1)
	go func() { done <- src.Next(ctx, b, 10) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next still blocked 5s after cancel")
	}
}

// fakeClock is a clock whose sleeps advance time instantly.
type fakeClock struct {
	now    time.Time
	sleeps int
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		panic("non-positive sleep")
	}
	c.sleeps++
	c.now = c.now.Add(d)
	return ctx.Err()
}

func TestGeneratorRatePacing(t *testing.T) {
	tests := []struct {
		name        string
		rate        float64
		count       int64
		parallelism int
		limit       int
	}{
		{"1000/s", 1000, 5000, 1, 256},
		{"split over 2 subtasks", 1000, 5000, 2, 256},
		{"high rate", 1_000_000, 2_000_000, 1, 1024},
		{"low rate", 5, 20, 1, 1024},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			for i := range tc.parallelism {
				src, err := Registry{}.NewSource(genSpec(jobspec.GeneratorSpec{Kind: "sequence", Count: tc.count, Rate: tc.rate}), "")
				if err != nil {
					t.Fatal(err)
				}
				g := src.(*generator)
				if err := g.Open(ctx, stream.TaskInfo{Subtask: i, Parallelism: tc.parallelism}); err != nil {
					t.Fatal(err)
				}
				clock := &fakeClock{now: time.Unix(1000, 0)}
				g.pacer.now, g.pacer.sleep = clock.Now, clock.Sleep
				start := clock.now
				records, calls := 0, 0
				b := stream.NewBatch(tc.limit)
				for {
					b.Reset()
					err := g.Next(ctx, b, tc.limit)
					records += b.Len()
					calls++
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				// Every subtask gets rate/p; its share of the count takes
				// share/(rate/p) seconds, less the chunk it starts with.
				share := (tc.count - int64(i) + int64(tc.parallelism) - 1) / int64(tc.parallelism)
				want := time.Duration((float64(share) - g.pacer.chunk) / g.pacer.rate * float64(time.Second))
				if got := clock.now.Sub(start); got < want*98/100 || got > want*102/100 {
					t.Fatalf("subtask %d: %d records took %v of clock, want about %v", i, records, got, want)
				}
				// Sleeping is per batch, not per record.
				if clock.sleeps > calls {
					t.Fatalf("%d sleeps for %d Next calls", clock.sleeps, calls)
				}
				if tc.rate >= 1000 && float64(records)/float64(calls) < 5 {
					t.Fatalf("%.1f records per Next at %v/s: batches too small", float64(records)/float64(calls), tc.rate)
				}
			}
		})
	}
}

// A source held back (backpressure) does not flood afterwards: the bucket
// holds at most 100 ms of records.
func TestPacerBurstIsCapped(t *testing.T) {
	p := newPacer(1000)
	clock := &fakeClock{now: time.Unix(1000, 0)}
	p.now, p.sleep = clock.Now, clock.Sleep
	ctx := context.Background()
	if _, err := p.take(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(time.Hour)
	n, err := p.take(ctx, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if n > 100 {
		t.Fatalf("after an hour idle took %d records at once, want at most 100", n)
	}
}

// realtimeGenerator opens subtask i of p of a realtime generator whose
// schedule runs on clock.
func realtimeGenerator(t *testing.T, spec jobspec.GeneratorSpec, i, p int, clock *fakeClock) *generator {
	t.Helper()
	spec.Realtime = true
	src, err := Registry{}.NewSource(genSpec(spec), "")
	if err != nil {
		t.Fatal(err)
	}
	g := src.(*generator)
	if err := g.Open(context.Background(), stream.TaskInfo{Subtask: i, Parallelism: p}); err != nil {
		t.Fatal(err)
	}
	if g.sched == nil {
		t.Fatal("realtime generator has no schedule")
	}
	g.sched.now, g.sched.sleep = clock.Now, clock.Sleep
	return g
}

// A realtime generator produces record n no earlier than start + n×interval
// on the wall clock, whatever the parallelism; a rate with no interval
// sets the interval, and the pacer takes no part.
func TestGeneratorRealtimeNeverEarly(t *testing.T) {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		spec     jobspec.GeneratorSpec
		p        int
		interval time.Duration
	}{
		{"interval 1ms", jobspec.GeneratorSpec{Kind: "sequence", Count: 3000, Interval: jobspec.Duration(time.Millisecond)}, 1, time.Millisecond},
		{"rate 20k/s over 2 subtasks", jobspec.GeneratorSpec{Kind: "sequence", Count: 20000, Rate: 20000}, 2, 50 * time.Microsecond},
		{"nexmark 10k/s over 3 subtasks", jobspec.GeneratorSpec{Kind: "nexmark", Count: 9000, Rate: 10000}, 3, 100 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Start = start.Format(time.RFC3339Nano)
			total := 0
			for i := range tc.p {
				// The job starts a second before the first record is due.
				clock := &fakeClock{now: start.Add(-time.Second)}
				g := realtimeGenerator(t, tc.spec, i, tc.p, clock)
				if g.pacer.rate != 0 {
					t.Fatalf("pacer rate %v beside the schedule", g.pacer.rate)
				}
				b := stream.NewBatch(512)
				n, calls := uint64(i), 0
				for {
					b.Reset()
					err := g.Next(context.Background(), b, 512)
					calls++
					if b.Len() == 0 && err == nil {
						t.Fatal("Next returned no records and no error")
					}
					// The newest record of the batch was due by now.
					n += uint64(b.Len()) * uint64(tc.p)
					if b.Len() > 0 {
						last := n - uint64(tc.p)
						if due := start.Add(time.Duration(last) * tc.interval); clock.now.Before(due) {
							t.Fatalf("subtask %d: record %d produced at %v, due at %v", i, last, clock.now, due)
						}
					}
					total += b.Len()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				// Its last record fell due at the end of the schedule, and
				// the clock stopped there, not a batch later.
				end := start.Add(time.Duration(n-uint64(tc.p)) * tc.interval)
				if got := clock.now.Sub(end); got < 0 || got > 20*time.Millisecond {
					t.Fatalf("subtask %d ended %v after its last record fell due, want 0..20ms", i, got)
				}
				if clock.sleeps > calls {
					t.Fatalf("%d sleeps for %d Next calls", clock.sleeps, calls)
				}
			}
			if total != int(tc.spec.Count) {
				t.Fatalf("%d records, want %d", total, tc.spec.Count)
			}
		})
	}
}

// A realtime generator held back (backpressure, a checkpoint, a slow
// operator) catches up on everything that fell due meanwhile, without
// sleeping: unlike the rate pacer's bucket nothing is dropped, so event
// time keeps to the wall clock and the hold-up shows as latency.
func TestGeneratorRealtimeCatchesUp(t *testing.T) {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	spec := jobspec.GeneratorSpec{Kind: "sequence", Start: start.Format(time.RFC3339Nano), Interval: jobspec.Duration(time.Millisecond)}
	g := realtimeGenerator(t, spec, 1, 2, clock)
	b := stream.NewBatch(1024)
	if err := g.Next(context.Background(), b, 1024); err != nil {
		t.Fatal(err)
	}
	// Held back for 10 s: 5000 of this subtask's records fell due.
	clock.now = clock.now.Add(10 * time.Second)
	sleeps, produced := clock.sleeps, 0
	for produced < 5000 {
		b.Reset()
		if err := g.Next(context.Background(), b, 1024); err != nil {
			t.Fatal(err)
		}
		if clock.sleeps != sleeps {
			t.Fatalf("slept with %d records due", 5000-produced)
		}
		if produced < 4096 && b.Len() != 1024 {
			t.Fatalf("caught up %d records in a Next of 1024 with %d due", b.Len(), 5000-produced)
		}
		produced += b.Len()
	}
	// The next record is not due yet: Next waits for it rather than
	// running ahead of the clock.
	b.Reset()
	if err := g.Next(context.Background(), b, 1024); err != nil {
		t.Fatal(err)
	}
	if clock.sleeps == sleeps {
		t.Fatal("produced records ahead of their due time without sleeping")
	}
	var rec struct{ Seq uint64 }
	if err := json.Unmarshal(b.Records[0].Value, &rec); err != nil {
		t.Fatal(err)
	}
	if due := start.Add(time.Duration(rec.Seq) * time.Millisecond); clock.now.Before(due) {
		t.Fatalf("record %d produced at %v, due at %v", rec.Seq, clock.now, due)
	}
}

// Cancelling the context stops a realtime generator waiting for a start
// an hour away.
func TestGeneratorRealtimeHonoursCancel(t *testing.T) {
	start := time.Now().Add(time.Hour)
	spec := jobspec.GeneratorSpec{Kind: "sequence", Start: start.Format(time.RFC3339Nano)}
	spec.Realtime = true
	src, err := Registry{}.NewSource(genSpec(spec), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), stream.TaskInfo{Subtask: 0, Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b := stream.NewBatch(16)
	if err := src.Next(ctx, b, 16); !errors.Is(err, context.DeadlineExceeded) || b.Len() != 0 {
		t.Fatalf("Next = %v with %d records, want the deadline and none", err, b.Len())
	}
}

func BenchmarkGeneratorTransactions(b *testing.B) {
	spec := jobspec.GeneratorSpec{Kind: "transactions", Seed: 1, Disorder: jobspec.Duration(5 * time.Second), LateFraction: 0.01}
	src, err := Registry{}.NewSource(genSpec(spec), "")
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
	records := 0
	var bytesOut int
	for b.Loop() {
		out.Reset()
		if err := src.Next(ctx, out, batch); err != nil {
			b.Fatal(err)
		}
		records += out.Len()
		bytesOut += out.Bytes()
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(bytesOut)/float64(records), "B/record")
}
