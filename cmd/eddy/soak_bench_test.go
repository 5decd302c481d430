package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// BenchmarkSoak is `make soak`: a keyed window job with a Wasm aggregate
// and checkpoints runs on a cluster of one coordinator and two worker
// processes, first unpaced for a minute (its maximum rate: what the
// source sustained over the last 40 s of it, $EDDY_SOAK_CALIBRATE), then
// paced at soakLoad of that rate for $EDDY_SOAK_FOR
// (make soak: 10m). It prints, for the first and the last minute of the
// paced run, each process's resident memory, the p99 end-to-end latency
// of the window results and the duration of the checkpoints, and how
// much each moved; it fails if the job restarted, failed, or stopped
// producing results or completing checkpoints.
//
// Latency is the time from the moment a window's end passes on the wall
// clock to its result's arrival at the sink (the worker's stdout, read
// here line by line as it is written). The generator's event time runs
// with the wall clock: record n has event time start + n/rate, and the
// paced source produces it n/rate after the job started, so a window
// ending at event time E ends on the wall clock at origin + (E − start),
// where origin is when the source started on the wall clock, derived from
// the first sample's produced records (see soak).
// The latency so includes the watermark's bound of out-of-orderness
// (soakOutOfOrder), the buffer timeout and the window's firing.
//
// It is skipped unless $EDDY_SOAK_FOR is set: the run takes that long.
func BenchmarkSoak(b *testing.B) {
	d, err := time.ParseDuration(os.Getenv("EDDY_SOAK_FOR"))
	if err != nil {
		b.Skip("make soak runs this (EDDY_SOAK_FOR=10m): a soak of that long")
	}
	if d < 2*time.Minute {
		b.Fatalf("EDDY_SOAK_FOR=%v: the soak compares its first and last minute, it needs at least 2m", d)
	}
	// The calibration: 20 s to warm up, then 40 s measured (four
	// checkpoints, forty window firings).
	warm, measure := 20*time.Second, 40*time.Second
	if v := os.Getenv("EDDY_SOAK_CALIBRATE"); v != "" {
		if measure, err = time.ParseDuration(v); err != nil || measure < 10*time.Second {
			b.Fatalf("EDDY_SOAK_CALIBRATE=%q: want how long to measure the maximum rate, at least 10s", v)
		}
	}
	for b.Loop() {
		s := startSoakCluster(b)
		max := s.maxRate(b, warm, measure)
		rate := soakLoad * max
		fmt.Printf("soak: maximum rate %.0f records/s (unpaced, sustained over %v after %v); soaking at %.0f%% of it, %.0f records/s, for %v\n",
			max, measure, warm, soakLoad*100, rate, d)
		s.soak(b, rate, d).print()
	}
}

const (
	// soakLoad is the share of the measured maximum rate the soak runs at.
	soakLoad       = 0.8
	soakOutOfOrder = 200 * time.Millisecond
	soakSample     = 5 * time.Second
	soakLinePrefix = "SOAK "
)

// soakSpec is the job: transactions keyed by card into one-second
// tumbling windows folded by the card-stats aggregate (C), checkpointed
// every 10 s to a directory, results to the workers' stdout. COUNT 0 and
// a RATE make it unbounded and paced.
const soakSpec = `name: soak
parallelism: 2
state_backend: pebble
checkpoint: {interval: 10s, storage: "file://$OUT/checkpoints"}
nodes:
  - name: txns
    source:
      generator: {kind: transactions, count: COUNT, rate: RATE, cards: 1000, seed: 11, start: "START", interval: INTERVAL}
    event_time: {max_out_of_orderness: OOO}
  - name: stats
    input: txns
    key_by: card
    window: {tumbling: 1s}
    aggregate: {wasm: {module: card-stats}, name: stats}
  - name: out
    input: stats
    parallelism: 1
    sink: {stdout: {prefix: "SOAK "}}
`

type soakCluster struct {
	c     *cluster
	http  string
	procs []*soakProc
}

// soakProc is one server process of the soak, whose stdout the harness
// reads as it comes: the sink's lines are timestamped on arrival, the
// rest go to the process's log.
type soakProc struct {
	name string
	cmd  *exec.Cmd
	log  string

	mu       sync.Mutex
	arrivals []soakArrival
}

type soakArrival struct {
	at        time.Time
	windowEnd int64
}

func startSoakCluster(b *testing.B) *soakCluster {
	b.Helper()
	s := &soakCluster{c: &cluster{dir: b.TempDir()}}
	c := s.c
	co := s.start(b, "c1", "coordinator", "--id", "c1", "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--data-dir", filepath.Join(c.dir, "c1"), "--blobs", filepath.Join(c.dir, "blobs"), "--bootstrap",
		"--heartbeat-interval", "200ms", "--heartbeat-timeout", "5s")
	p := &proc{name: co.name, cmd: co.cmd, log: co.log}
	c.coords = append(c.coords, p)
	c.apis = append(c.apis, p.addr(b, coordinatorLine))
	s.http = p.addr(b, httpLine)
	for i := range 2 {
		name := fmt.Sprintf("w%d", i+1)
		w := s.start(b, name, "worker", "--id", name, "--coordinator", c.apis[0], "--slots", "4",
			"--data-dir", filepath.Join(c.dir, name))
		c.workers = append(c.workers, &proc{name: w.name, cmd: w.cmd, log: w.log})
	}
	testkit.Eventually(b, 30*time.Second, "two workers alive", func() bool {
		return strings.Count(c.eddyOK(b, "cluster info").stdout, "ALIVE") == 2
	})
	if r := c.eddyOK(b, "module upload", repoRoot(b)+"/udfs/build/card-stats-c.wasm", "--name", "card-stats"); r.code != 0 {
		b.Fatal(r.stderr)
	}
	return s
}

func (s *soakCluster) start(b *testing.B, name string, args ...string) *soakProc {
	b.Helper()
	logPath := filepath.Join(s.c.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(eddyBin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache"))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &soakProc{name: name, cmd: cmd, log: logPath}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		p.read(out, f)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-done
		if b.Failed() {
			raw, _ := os.ReadFile(logPath)
			b.Logf("---- %s log (last 3000 bytes) ----\n%s", name, tail(string(raw), 3000))
		}
	})
	s.procs = append(s.procs, p)
	return p
}

// read timestamps the sink's lines of r and copies every other line to
// log, until r ends.
func (p *soakProc) read(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := strings.CutPrefix(string(line), soakLinePrefix)
		if !ok {
			log.Write(append(line, '\n'))
			continue
		}
		at := time.Now()
		var v struct {
			WindowEnd int64 `json:"window_end"`
		}
		if json.Unmarshal([]byte(rest), &v) != nil || v.WindowEnd == 0 {
			fmt.Fprintf(log, "soak: unreadable result line %q\n", rest)
			continue
		}
		p.mu.Lock()
		p.arrivals = append(p.arrivals, soakArrival{at, v.WindowEnd})
		p.mu.Unlock()
	}
}

// take returns and forgets the arrivals so far.
func (p *soakProc) take() []soakArrival {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.arrivals
	p.arrivals = nil
	return a
}

// rssBytes is the process's resident set (VmRSS).
func (p *soakProc) rssBytes(b *testing.B) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("%s: VmRSS %q", p.name, v)
			}
			return kb << 10
		}
	}
	b.Fatalf("%s: no VmRSS in /proc status", p.name)
	return 0
}

// submit submits the job and returns its id and when it was first seen
// RUNNING.
func (s *soakCluster) submit(b *testing.B, count int64, rate float64, start time.Time) (string, time.Time) {
	b.Helper()
	interval := time.Duration(float64(time.Second) / max(rate, 1))
	if rate == 0 {
		interval = 50 * time.Microsecond
	}
	text := strings.NewReplacer("COUNT", strconv.FormatInt(count, 10), "RATE", strconv.FormatFloat(rate, 'f', 0, 64),
		"START", start.UTC().Format(time.RFC3339Nano), "INTERVAL", strconv.FormatInt(int64(interval), 10)+"ns",
		"OOO", soakOutOfOrder.String()).Replace(soakSpec)
	spec, _ := inlineSpec(b, text)
	r := s.c.eddyOK(b, "job submit", spec)
	if r.code != 0 {
		b.Fatal(r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	var running time.Time
	testkit.Eventually(b, time.Minute, "job "+id+" running", func() bool {
		state, _, out := s.c.jobState(b, id)
		if state == "FAILED" {
			b.Fatal(out)
		}
		running = time.Now()
		return state == "RUNNING" || state == "FINISHED"
	})
	return id, running
}

// maxRate runs the job unpaced and unbounded and returns the records/s
// its source sustained from warm to warm+measure (with the checkpoints,
// window firings and backpressure of that stretch), then cancels it.
func (s *soakCluster) maxRate(b *testing.B, warm, measure time.Duration) float64 {
	b.Helper()
	id, _ := s.submit(b, 0, 0, time.Now())
	time.Sleep(warm)
	from, t0 := s.status(b, id).produced, time.Now()
	time.Sleep(measure)
	to, t1 := s.status(b, id).produced, time.Now()
	if r := s.c.eddyOK(b, "job cancel", id); r.code != 0 {
		b.Fatal(r.stderr)
	}
	testkit.Eventually(b, time.Minute, "calibration job "+id+" canceled", func() bool {
		state, _, _ := s.c.jobState(b, id)
		return state == "CANCELED"
	})
	if to <= from {
		b.Fatalf("calibration: the source produced %d records, then %d", from, to)
	}
	for _, p := range s.procs {
		p.take()
	}
	return float64(to-from) / t1.Sub(t0).Seconds()
}

// soakMinute is what one minute of the soak measured.
type soakMinute struct {
	rss       map[string][]int64 // process → samples
	latencies []time.Duration
	// produced is the latency from when the source actually produced a
	// window's end rather than from its schedule: what the pipeline adds,
	// without the source's lag behind its schedule (behind).
	produced    []time.Duration
	checkpoints []time.Duration
	// behind is how far the source was behind its schedule at each
	// sample: the records it should have produced by then at the rate
	// and did not, in seconds of the rate.
	behind []time.Duration
}

type soakResult struct {
	rate         float64
	d            time.Duration
	names        []string
	first, last  soakMinute
	results      int
	checkpointed int
}

// soakSampled is one sample of the soak.
type soakSampled struct {
	at       time.Time
	rss      map[string]int64
	arrivals []soakArrival
	produced uint64 // records the source subtasks produced so far
}

// soak runs the paced job for d, sampling every soakSample, and returns
// the first and the last minute.
//
// The latencies need when the source started on the wall clock (origin):
// record n is due at origin + n/rate. The first sample gives it: the
// source had produced P records by then, so origin = then − P/rate, to
// within the pacer's burst (100 ms) if it kept up so far.
func (s *soakCluster) soak(b *testing.B, rate float64, d time.Duration) *soakResult {
	b.Helper()
	start := time.Now()
	id, running := s.submit(b, 0, rate, start)
	res := &soakResult{rate: rate, d: d}
	for _, p := range s.procs {
		res.names = append(res.names, p.name)
	}
	var samples []soakSampled
	seen := map[time.Time]soakCheckpoint{}
	end := running.Add(d)
	for time.Now().Before(end) {
		time.Sleep(min(soakSample, time.Until(end)))
		sm := soakSampled{at: time.Now(), rss: map[string]int64{}}
		for _, p := range s.procs {
			sm.rss[p.name] = p.rssBytes(b)
			sm.arrivals = append(sm.arrivals, p.take()...)
		}
		st := s.status(b, id)
		if st.state != "JOB_STATE_RUNNING" || st.attempt != 1 {
			b.Fatalf("soak job is %s (attempt %d) after %v", st.state, st.attempt, time.Since(running).Round(time.Second))
		}
		sm.produced = st.produced
		for _, cp := range st.checkpoints {
			seen[cp.triggered] = cp
		}
		samples = append(samples, sm)
	}
	if r := s.c.eddyOK(b, "job cancel", id); r.code != 0 {
		b.Fatal(r.stderr)
	}
	if samples[0].produced == 0 {
		b.Fatalf("the source produced nothing in the first %v", soakSample)
	}
	origin := samples[0].at.Add(-time.Duration(float64(samples[0].produced) / rate * float64(time.Second)))
	first, last := newSoakMinute(), newSoakMinute()
	firstEnd, lastStart := origin.Add(time.Minute), end.Add(-time.Minute)
	for _, sm := range samples {
		for _, m := range []struct {
			in bool
			m  *soakMinute
		}{{!sm.at.After(firstEnd), &first}, {sm.at.After(lastStart), &last}} {
			if !m.in {
				continue
			}
			for name, v := range sm.rss {
				m.m.rss[name] = append(m.m.rss[name], v)
			}
			for _, a := range sm.arrivals {
				ends := origin.Add(time.Duration(a.windowEnd-start.UnixMilli()) * time.Millisecond)
				m.m.latencies = append(m.m.latencies, a.at.Sub(ends))
				n := float64(a.windowEnd-start.UnixMilli()) / 1000 * rate
				m.m.produced = append(m.m.produced, a.at.Sub(producedAt(origin, samples, n)))
			}
			due := sm.at.Sub(origin).Seconds() * rate
			m.m.behind = append(m.m.behind, time.Duration((due-float64(sm.produced))/rate*float64(time.Second)))
		}
		res.results += len(sm.arrivals)
	}
	for _, cp := range seen {
		res.checkpointed++
		switch {
		case cp.triggered.After(origin) && !cp.triggered.After(firstEnd):
			first.checkpoints = append(first.checkpoints, cp.duration)
		case cp.triggered.After(lastStart):
			last.checkpoints = append(last.checkpoints, cp.duration)
		}
	}
	for _, m := range []*soakMinute{&first, &last} {
		if len(m.latencies) == 0 || len(m.checkpoints) == 0 {
			b.Fatalf("a minute of the soak had %d results and %d completed checkpoints: the job stalled", len(m.latencies), len(m.checkpoints))
		}
	}
	res.first, res.last = first, last
	return res
}

// producedAt is when the source had produced n records, interpolated
// between the samples of its count (origin counts as 0); after the last
// sample, at the pace of the last two.
func producedAt(origin time.Time, samples []soakSampled, n float64) time.Time {
	at, count := origin, 0.0
	for i, sm := range samples {
		c := float64(sm.produced)
		if c >= n || i == len(samples)-1 {
			if c == count {
				return sm.at
			}
			return at.Add(time.Duration((n - count) / (c - count) * float64(sm.at.Sub(at))))
		}
		at, count = sm.at, c
	}
	return at
}

func newSoakMinute() soakMinute { return soakMinute{rss: map[string][]int64{}} }

type soakCheckpoint struct {
	triggered time.Time
	duration  time.Duration
}

// soakStatus is what the soak reads of a job's status.
type soakStatus struct {
	state       string
	attempt     int
	produced    uint64 // records out of the source subtasks
	checkpoints []soakCheckpoint
}

// status reads the job's status from the REST API: its completed
// checkpoints (the newest, a bounded number: soak reads them every
// sample and keeps them all) and its source's records.
func (s *soakCluster) status(b *testing.B, id string) soakStatus {
	b.Helper()
	req, err := http.NewRequest("GET", s.http+"/v1/jobs/"+id, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	// protojson: 64-bit integers are strings.
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	var st struct {
		Job struct {
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		} `json:"job"`
		Tasks []struct {
			TaskID  string `json:"taskId"`
			Metrics struct {
				RecordsIn string `json:"recordsIn"`
			} `json:"metrics"`
		} `json:"tasks"`
		Checkpoints []struct {
			State           string `json:"state"`
			TriggeredUnixMs string `json:"triggeredUnixMs"`
			DurationMs      string `json:"durationMs"`
		} `json:"checkpoints"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET /v1/jobs/%s: status %d, %v", id, resp.StatusCode, err)
	}
	out := soakStatus{state: st.Job.State, attempt: st.Job.Attempt}
	for _, t := range st.Tasks {
		if strings.HasPrefix(t.TaskID, "txns[") { // the source's subtasks
			n, _ := strconv.ParseUint(t.Metrics.RecordsIn, 10, 64)
			out.produced += n
		}
	}
	for _, c := range st.Checkpoints {
		if c.State != "CHECKPOINT_STATE_COMPLETED" {
			continue
		}
		trig, err1 := strconv.ParseInt(c.TriggeredUnixMs, 10, 64)
		dur, err2 := strconv.ParseInt(c.DurationMs, 10, 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("checkpoint times %q, %q", c.TriggeredUnixMs, c.DurationMs)
		}
		out.checkpoints = append(out.checkpoints, soakCheckpoint{time.UnixMilli(trig), time.Duration(dur) * time.Millisecond})
	}
	return out
}

func (r *soakResult) print() {
	fmt.Printf("soak: %d window results, %d checkpoints listed; first minute → last minute (change)\n", r.results, r.checkpointed)
	change := func(a, b float64) string {
		if a == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%+.0f%%", (b-a)/a*100)
	}
	for _, name := range r.names {
		a, b := meanInt(r.first.rss[name]), meanInt(r.last.rss[name])
		fmt.Printf("  RSS %-4s            %8.1f MiB → %8.1f MiB  (%s)\n", name, a/(1<<20), b/(1<<20), change(a, b))
	}
	a, b := pct(r.first.latencies, 99), pct(r.last.latencies, 99)
	fmt.Printf("  p50 latency          %8.0f ms  → %8.0f ms\n", ms(pct(r.first.latencies, 50)), ms(pct(r.last.latencies, 50)))
	fmt.Printf("  p99 latency          %8.0f ms  → %8.0f ms   (%s; %d and %d results)\n", ms(a), ms(b), change(ms(a), ms(b)), len(r.first.latencies), len(r.last.latencies))
	a, b = pct(r.first.produced, 99), pct(r.last.produced, 99)
	fmt.Printf("  p99 from production  %8.0f ms  → %8.0f ms   (%s; the latency from when the source produced a window's end, without its lag)\n", ms(a), ms(b), change(ms(a), ms(b)))
	a, b = meanDur(r.first.behind), meanDur(r.last.behind)
	fmt.Printf("  source behind        %8.0f ms  → %8.0f ms   (its schedule at the rate, mean of the samples)\n", ms(a), ms(b))
	a, b = meanDur(r.first.checkpoints), meanDur(r.last.checkpoints)
	fmt.Printf("  checkpoint duration  %8.0f ms  → %8.0f ms   (%s; mean of %d and %d)\n", ms(a), ms(b), change(ms(a), ms(b)), len(r.first.checkpoints), len(r.last.checkpoints))
}

func meanInt(v []int64) float64 {
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(max(len(v), 1))
}

func meanDur(v []time.Duration) time.Duration {
	var s time.Duration
	for _, x := range v {
		s += x
	}
	return s / time.Duration(max(len(v), 1))
}

func pct(v []time.Duration, p int) time.Duration {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[min(len(v)-1, len(v)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestProducedAt: the soak's production clock interpolates between its
// samples and extrapolates past the last at the last pace.
func TestProducedAt(t *testing.T) {
	o := time.Unix(1000, 0)
	samples := []soakSampled{{at: o.Add(5 * time.Second), produced: 500}, {at: o.Add(10 * time.Second), produced: 1500}}
	for n, want := range map[float64]time.Duration{0: 0, 250: 2500 * time.Millisecond, 1000: 7500 * time.Millisecond, 2000: 12500 * time.Millisecond} {
		if got := producedAt(o, samples, n).Sub(o); got != want {
			t.Errorf("producedAt(%v) = %v, want %v", n, got, want)
		}
	}
}
