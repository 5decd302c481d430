package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// The Kafka end-to-end tests: a real broker process (cmd/eddy-kafka), input
// produced and output read by kcat (librdkafka), one coordinator and two
// worker processes. The job counts each card's transactions with the Wasm
// counter (keyed state) and writes {"key","count"} to Kafka exactly once;
// the output read with isolation.level=read_committed must be, for every
// card with n transactions, the counts 1..n once each.

// kafkaGroup is the group to which the job's sources commit the offsets of
// every completed checkpoint: in Kafka, it shows how far the job's
// checkpoints have read.
const kafkaGroup = "eddy-e2e"

const kafkaJob = `name: kafka-eos
parallelism: 2
checkpoint: {interval: 300ms, timeout: 5s, storage: "file://$OUT/checkpoints"}
nodes:
  - name: txns
    parallelism: 2
    source: {kafka: {brokers: [BROKERS], topics: [txns], start: earliest, group: ` + kafkaGroup + `}}
  - name: counts
    input: txns
    key_by: card
    wasm: {module: counter}
  - name: out
    input: counts
    sink: {kafka: {brokers: [BROKERS], topic: counts, delivery: DELIVERY, transaction_timeout: 2m}}
`

// kafkaInput is n transactions of cards card-0…card-(cards-1), keyed by
// card so that a card's transactions stay in one partition, in order.
func kafkaInput(n, cards, from int) (lines []string, perCard map[string]int) {
	perCard = map[string]int{}
	for i := from; i < from+n; i++ {
		card := fmt.Sprintf("card-%d", (i*7919)%cards)
		perCard[card]++
		lines = append(lines, fmt.Sprintf(`%s:{"card":%q,"amount":%d,"i":%d}`, card, card, i%997, i))
	}
	return lines, perCard
}

// expectedCounts is the counter's output for perCard, sorted.
func expectedCounts(perCard map[string]int) []string {
	var out []string
	for card, n := range perCard {
		for i := 1; i <= n; i++ {
			out = append(out, fmt.Sprintf(`{"key":%q,"count":%d}`, card, i))
		}
	}
	slices.Sort(out)
	return out
}

// kafkaFixture is the broker, the cluster with the counter module, and
// the job's spec.
type kafkaFixture struct {
	br   *kafkatest.Broker
	c    *ftCluster
	spec string
}

func startKafkaFixture(t *testing.T, delivery string) *kafkaFixture {
	t.Helper()
	kafkatest.Kcat(t)
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"txns": 4, "counts": 3}})
	c := startFT(t, nil, 8)
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	if r := c.client(t, "module", "upload", module, "--name", "counter"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	text := strings.NewReplacer("BROKERS", br.Bootstrap(), "DELIVERY", delivery).Replace(kafkaJob)
	spec, _ := inlineSpec(t, text)
	return &kafkaFixture{br: br, c: c, spec: spec}
}

func (f *kafkaFixture) submit(t *testing.T) string {
	t.Helper()
	r := f.c.client(t, "job", "submit", f.spec)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// produceOver writes chunks of input with kcat, one every gap, in the
// background; the returned function waits for the last and returns the
// per-card counts of everything produced.
func (f *kafkaFixture) produceOver(t *testing.T, chunks, size int, gap time.Duration) func() map[string]int {
	kcat := kafkatest.Kcat(t)
	total := map[string]int{}
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range chunks {
			lines, per := kafkaInput(size, 300, k*size)
			if err = f.br.ProduceLines(kcat, "txns", lines, true); err != nil {
				return
			}
			for c, n := range per {
				total[c] += n
			}
			time.Sleep(gap)
		}
	}()
	return func() map[string]int {
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return total
	}
}

// waitOutput waits until the job's committed output can change no more
// and compares it with want: equal for exactly-once; for at-least-once,
// every record of want at least once and nothing else. The output is final
// once
//   - the job runs at one attempt and has completed a checkpoint triggered
//     after the test saw that attempt run: no restart is pending (the tasks
//     of a killed worker acknowledge nothing), so nothing will be replayed;
//   - its sources committed the end of every partition of txns to
//     kafkaGroup: a completed checkpoint covers the whole input, so every
//     output record was flushed (at-least-once) or is in a transaction a
//     checkpoint staged (exactly-once);
//   - no transaction holds records of counts open (on every partition the
//     last stable offset is the high watermark): what was staged is
//     committed.
func (f *kafkaFixture) waitOutput(t *testing.T, id string, want []string, within time.Duration, exact bool) {
	t.Helper()
	attempt, since := 0, int64(0) // the attempt seen running, the newest checkpoint then
	testkit.Eventually(t, within, "the job's output in Kafka to be final", func() bool {
		state, a, st := f.c.status(t, id)
		switch {
		case state != "RUNNING":
			attempt = 0
			return false
		case a != attempt:
			attempt, since = a, newestCheckpoint(st)
			return false
		case !checkpointCompletedAfter(st, since):
			return false
		}
		for _, o := range f.br.Offsets(t, "txns", kafkaGroup) {
			if o.Committed != o.HighWatermark {
				return false
			}
		}
		for _, o := range f.br.Offsets(t, "counts", "") {
			if o.LastStable != o.HighWatermark {
				return false
			}
		}
		return true
	})
	got := f.br.ReadCommitted(t, "counts", "%s")
	slices.Sort(got)
	if !exact {
		dups := len(got)
		got = slices.Compact(got)
		t.Logf("at-least-once: %d records for %d distinct", dups, len(got))
	}
	if !slices.Equal(got, want) {
		missing, extra := diffSorted(want, got)
		t.Fatalf("read_committed output has %d records, want %d: %d missing (e.g. %q), %d extra (e.g. %q)",
			len(got), len(want), len(missing), missing[:min(3, len(missing))], len(extra), extra[:min(3, len(extra))])
	}
}

var checkpointRow = regexp.MustCompile(`(?m)^(\d+)\s+(?:CHECKPOINT|SAVEPOINT)\s+(\w+)`)

// newestCheckpoint is the id of the newest checkpoint or savepoint that
// `job status` lists, in any state; 0 if none.
func newestCheckpoint(status string) int64 {
	var newest int64
	for _, m := range checkpointRow.FindAllStringSubmatch(status, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		newest = max(newest, id)
	}
	return newest
}

// checkpointCompletedAfter reports whether `job status` lists a completed
// checkpoint or savepoint newer than id.
func checkpointCompletedAfter(status string, id int64) bool {
	for _, m := range checkpointRow.FindAllStringSubmatch(status, -1) {
		if n, _ := strconv.ParseInt(m[1], 10, 64); n > id && m[2] == "COMPLETED" {
			return true
		}
	}
	return false
}

// pendingByTask reads the PENDING column of `job status`, by task.
func pendingByTask(status string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && strings.HasSuffix(f[0], "]") {
			out[f[0]] = f[6]
		}
	}
	return out
}

// diffSorted returns what is in a and not in b, and what is in b and not
// in a, as multisets.
func diffSorted(a, b []string) (onlyA, onlyB []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			onlyA = append(onlyA, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			onlyB = append(onlyB, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return onlyA, onlyB
}

// TestKafkaUnderKills kills a worker three times while input arrives:
// exactly once, the committed output is exact; at least once, it has
// every record (duplicates allowed).
func TestKafkaUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, delivery := range []string{"exactly_once", "at_least_once"} {
		t.Run(delivery, func(t *testing.T) {
			f := startKafkaFixture(t, delivery)
			id := f.submit(t)
			wait := f.produceOver(t, 40, 500, 250*time.Millisecond) // 20,000 records over about 12 s
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
			for range 3 {
				f.c.waitState(t, id, "RUNNING", time.Minute)
				time.Sleep(time.Duration(800+rng.IntN(2000)) * time.Millisecond) // the random moment is the point
				w := rng.IntN(2)
				f.c.workers[w].kill(t)
				f.c.workers[w] = f.c.startWorker(t, w)
			}
			want := expectedCounts(wait())
			f.waitOutput(t, id, want, 2*time.Minute, delivery == "exactly_once")
			state, attempt, st := f.c.status(t, id)
			t.Logf("3 kills: %s at attempt %d, %d checkpoints completed (of the recent ones listed)", state, attempt, completedCheckpoints(st))
			if attempt < 2 {
				t.Errorf("attempt %d after 3 kills", attempt)
			}
			if r := f.c.client(t, "job", "cancel", id); r.code != 0 {
				t.Fatal(r.stderr)
			}
		})
	}
}

// TestKafkaSavepointRescale stops the job with a savepoint while input
// arrives and submits it again from the savepoint at parallelism 3 (the
// source stays at 2): the new job commits what the savepoint staged,
// fences the old transactional ids and continues; the output is exact.
func TestKafkaSavepointRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	f := startKafkaFixture(t, "exactly_once")
	id := f.submit(t)
	wait := f.produceOver(t, 30, 500, 200*time.Millisecond)
	f.c.waitState(t, id, "RUNNING", time.Minute)
	time.Sleep(2 * time.Second) // mid-input: the scenario
	r := f.c.client(t, "savepoint", "create", id, "--stop")
	if r.code != 0 {
		t.Fatalf("savepoint: %s", r.stderr)
	}
	path := strings.TrimSpace(lastLine(r.stdout))
	f.c.waitState(t, id, "CANCELED", time.Minute)
	text, err := os.ReadFile(f.spec)
	if err != nil {
		t.Fatal(err)
	}
	spec3 := filepath.Join(filepath.Dir(f.spec), "job3.yaml")
	if err := os.WriteFile(spec3, []byte(strings.Replace(string(text), "parallelism: 2\ncheckpoint", "parallelism: 3\ncheckpoint", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = f.c.client(t, "job", "submit", spec3, "--from-savepoint", path)
	if r.code != 0 {
		t.Fatalf("submit from savepoint: %s", r.stderr)
	}
	id3 := strings.TrimSpace(r.stdout)
	f.waitOutput(t, id3, expectedCounts(wait()), 2*time.Minute, true)
	if r := f.c.client(t, "job", "cancel", id3); r.code != 0 {
		t.Fatal(r.stderr)
	}
}

// TestKafkaBrokerOutages: the job starts while the broker is down and
// waits for it (retrying with backoff, no crash); later the broker is
// restarted between two runs of input. The committed output is exact.
//
// The restart is a clean stop (SIGTERM): kfake aborts the transactions
// open at a SIGKILL when it starts again, where Kafka keeps them (its
// transaction log is replicated), so a pre-committed transaction would
// be lost to the fake, not to Eddy. The input is produced while the
// broker is up: kcat gives up on a broker that stays down.
func TestKafkaBrokerOutages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	f := startKafkaFixture(t, "exactly_once")
	f.br.Stop()
	id := f.submit(t)
	// The job's tasks keep trying to reach the broker (their connections
	// are refused, or here hung up on) and the job has not failed.
	f.br.AwaitDials(t, 8)
	if state, _, st := f.c.status(t, id); state == "FAILED" {
		t.Fatalf("job failed while the broker was down:\n%s", st)
	}
	f.br.Start()
	first := f.produceOver(t, 10, 500, 200*time.Millisecond)()
	f.c.waitState(t, id, "RUNNING", time.Minute)
	// The outage comes while the job works: some of its output committed.
	testkit.Eventually(t, time.Minute, "output committed before the outage", func() bool {
		return len(f.br.ReadCommitted(t, "counts", "%s")) > 0
	})
	f.br.Stop()
	f.br.AwaitDials(t, 8) // the job's clients retry against the stopped broker
	f.br.Start()
	lines, second := kafkaInput(5000, 300, 5000)
	f.br.Produce(t, "txns", lines, true)
	for c, n := range second {
		first[c] += n
	}
	f.waitOutput(t, id, expectedCounts(first), 2*time.Minute, true)
	state, attempt, _ := f.c.status(t, id)
	t.Logf("after the outages: %s at attempt %d", state, attempt)
	// Everything read: `job status` shows no pending records for the
	// source tasks (and "-" for the others, which have no source).
	testkit.Eventually(t, 10*time.Second, "the sources' pending records at 0", func() bool {
		_, _, st := f.c.status(t, id)
		p := pendingByTask(st)
		return p["txns[0]"] == "0" && p["txns[1]"] == "0" && p["counts[0]"] == "-"
	})
	if r := f.c.client(t, "job", "cancel", id); r.code != 0 {
		t.Fatal(r.stderr)
	}
}

// TestKafkaUnknownTopic: a job reading a topic the cluster does not have
// fails with one clear line.
func TestKafkaUnknownTopic(t *testing.T) {
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"txns": 1}})
	spec, _ := inlineSpec(t, fmt.Sprintf(`name: nope
nodes:
  - name: in
    source: {kafka: {brokers: [%q], topics: [nope]}}
  - name: out
    input: in
    sink: {stdout: {}}
`, br.Bootstrap()))
	r := eddy(t, "run", spec)
	if r.code == 0 || !strings.Contains(r.stderr, `unknown topic "nope"`) {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestKafkaBoundedRun: with stop_at: latest the Kafka source ends at the
// end the topic had when the job started, so `eddy run` finishes by
// itself, every window and timer fired, with the exact output.
func TestKafkaBoundedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	kafkatest.Kcat(t)
	br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"txns": 4, "counts": 2}})
	lines, perCard := kafkaInput(3000, 100, 0)
	br.Produce(t, "txns", lines, true)
	spec, _ := inlineSpec(t, fmt.Sprintf(`name: bounded
parallelism: 2
nodes:
  - name: txns
    source: {kafka: {brokers: [%[1]q], topics: [txns], stop_at: latest}}
  - name: counts
    input: txns
    key_by: card
    wasm: {module: %[2]q}
  - name: out
    input: counts
    sink: {kafka: {brokers: [%[1]q], topic: counts}}
`, br.Bootstrap(), filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")))
	if r := eddy(t, "run", spec); r.code != 0 {
		t.Fatalf("eddy run: exit %d\n%s", r.code, r.stderr)
	}
	got := br.ReadCommitted(t, "counts", "%s")
	slices.Sort(got)
	if want := expectedCounts(perCard); !slices.Equal(got, want) {
		missing, extra := diffSorted(want, got)
		t.Fatalf("%d records, want %d: %d missing, %d extra", len(got), len(want), len(missing), len(extra))
	}
}
