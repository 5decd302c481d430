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
// The paced source is a realtime generator: record n has event time
// start + n/rate and is produced no earlier than that on the wall clock,
// and a source held back catches up on what fell due meanwhile rather
// than dropping it, so event time stays the wall clock and a pipeline
// that falls behind shows as latency. Latency is the time from the moment
// a window's end E passes on the wall clock to its result's arrival at
// the sink (the worker's stdout, read here line by line as it is
// written): arrival − E. It so includes the watermark's bound of
// out-of-orderness (soakOutOfOrder: the window fires once a record
// 200 ms past its end is read), the buffer timeout and the window's
// firing. To say where latency goes, every sample also reads each
// task's metrics: how far each source subtask is behind its schedule,
// how far each window subtask's watermark is behind the wall clock, and
// each task's backpressure.
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
      generator: {kind: transactions, count: COUNT, rate: RATE, cards: 1000, seed: 11, start: "START", interval: INTERVAL, realtime: REALTIME}
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
// RUNNING. An interval of 0 runs the source unpaced with event times
// 50 µs apart; else it is realtime, one record per interval.
func (s *soakCluster) submit(b *testing.B, interval time.Duration, start time.Time) (string, time.Time) {
	b.Helper()
	realtime := interval > 0
	if !realtime {
		interval = 50 * time.Microsecond
	}
	text := strings.NewReplacer("COUNT", "0", "RATE", "0", "REALTIME", strconv.FormatBool(realtime),
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
	id, _ := s.submit(b, 0, time.Now())
	time.Sleep(warm)
	from, t0 := s.status(b, id).produced(), time.Now()
	time.Sleep(measure)
	to, t1 := s.status(b, id).produced(), time.Now()
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
	rss         map[string][]int64 // process → samples
	latencies   []time.Duration
	checkpoints []time.Duration
	// behind is, per source subtask, how far it was behind its schedule
	// at each sample: the sample's time less the due time of the newest
	// record it had produced (by its metrics, which are up to a heartbeat
	// old).
	behind map[string][]time.Duration
	// watermarkLag is, per window subtask, the sample's time less its
	// watermark: at least soakOutOfOrder plus the source's lag.
	watermarkLag map[string][]time.Duration
	backpressure map[string][]float64 // task → samples of its ratio
}

type soakResult struct {
	rate         float64
	d            time.Duration
	names        []string
	tasks        []string
	first, last  soakMinute
	results      int
	checkpointed int
}

// soakSampled is one sample of the soak.
type soakSampled struct {
	at       time.Time
	rss      map[string]int64
	arrivals []soakArrival
	tasks    map[string]soakTask
}

// soak runs the paced job for d, sampling every soakSample, and returns
// the first and the last minute. The source's schedule starts a few
// seconds after the submission, so that deployment does not count as
// the source falling behind.
func (s *soakCluster) soak(b *testing.B, rate float64, d time.Duration) *soakResult {
	b.Helper()
	interval := max(time.Duration(float64(time.Second)/rate), 1)
	start := time.Now().Add(5 * time.Second).Truncate(time.Millisecond)
	id, running := s.submit(b, interval, start)
	res := &soakResult{rate: float64(time.Second) / float64(interval), d: d}
	for _, p := range s.procs {
		res.names = append(res.names, p.name)
	}
	var samples []soakSampled
	seen := map[time.Time]soakCheckpoint{}
	origin := start
	if running.After(start) {
		origin = running
	}
	end := origin.Add(d)
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
		sm.tasks = st.tasks
		for _, cp := range st.checkpoints {
			seen[cp.triggered] = cp
		}
		samples = append(samples, sm)
	}
	if r := s.c.eddyOK(b, "job cancel", id); r.code != 0 {
		b.Fatal(r.stderr)
	}
	for t := range samples[len(samples)-1].tasks {
		res.tasks = append(res.tasks, t)
	}
	slices.Sort(res.tasks)
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
				m.m.latencies = append(m.m.latencies, a.at.Sub(time.UnixMilli(a.windowEnd)))
			}
			for name, t := range sm.tasks {
				m.m.backpressure[name] = append(m.m.backpressure[name], t.backpressure)
				switch {
				case strings.HasPrefix(name, "txns["):
					if lag, ok := sourceBehind(sm.at, start, interval, name, t.recordsIn, len(sm.tasks)); ok {
						m.m.behind[name] = append(m.m.behind[name], lag)
					}
				case strings.HasPrefix(name, "stats[") && t.watermarkMs > 0:
					m.m.watermarkLag[name] = append(m.m.watermarkLag[name], sm.at.Sub(time.UnixMilli(t.watermarkMs)))
				}
			}
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

// sourceBehind is how far source subtask task ("txns[i]") was behind its
// schedule at at, having produced n records: subtask i of p produces
// records i, i+p, …, record k due at start + k×interval. Only
// the txns subtasks count towards p, which sourceBehind finds from
// tasks, the number of all tasks: the job has p txns, p stats and one
// out.
func sourceBehind(at, start time.Time, interval time.Duration, task string, n uint64, tasks int) (time.Duration, bool) {
	i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(task, "txns["), "]"))
	p := (tasks - 1) / 2
	if err != nil || n == 0 || p < 1 {
		return 0, false
	}
	newest := uint64(i) + (n-1)*uint64(p)
	return at.Sub(start.Add(time.Duration(newest) * interval)), true
}

func newSoakMinute() soakMinute {
	return soakMinute{rss: map[string][]int64{}, behind: map[string][]time.Duration{},
		watermarkLag: map[string][]time.Duration{}, backpressure: map[string][]float64{}}
}

type soakCheckpoint struct {
	triggered time.Time
	duration  time.Duration
}

// soakStatus is what the soak reads of a job's status.
type soakStatus struct {
	state       string
	attempt     int
	tasks       map[string]soakTask
	checkpoints []soakCheckpoint
}

// produced is the records the source subtasks produced.
func (st soakStatus) produced() uint64 {
	var n uint64
	for name, t := range st.tasks {
		if strings.HasPrefix(name, "txns[") {
			n += t.recordsIn
		}
	}
	return n
}

// soakTask is what the soak reads of a task's metrics.
type soakTask struct {
	recordsIn    uint64 // a source's: records it produced
	watermarkMs  int64
	backpressure float64
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
				RecordsIn         string  `json:"recordsIn"`
				WatermarkMs       string  `json:"watermarkMs"`
				BackpressureRatio float64 `json:"backpressureRatio"`
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
	out := soakStatus{state: st.Job.State, attempt: st.Job.Attempt, tasks: map[string]soakTask{}}
	for _, t := range st.Tasks {
		n, _ := strconv.ParseUint(t.Metrics.RecordsIn, 10, 64)
		wm, _ := strconv.ParseInt(t.Metrics.WatermarkMs, 10, 64)
		out.tasks[t.TaskID] = soakTask{recordsIn: n, watermarkMs: wm, backpressure: t.Metrics.BackpressureRatio}
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
	for _, t := range r.tasks {
		if v := r.first.behind[t]; len(v) > 0 {
			fmt.Printf("  %-9s behind      %8.0f ms  → %8.0f ms   (its schedule, mean of the samples; max %.0f → %.0f)\n", t,
				ms(meanDur(v)), ms(meanDur(r.last.behind[t])), ms(slices.Max(v)), ms(maxDur(r.last.behind[t])))
		}
		if v := r.first.watermarkLag[t]; len(v) > 0 {
			fmt.Printf("  %-9s watermark   %8.0f ms  → %8.0f ms   (behind the wall clock, mean of the samples)\n", t,
				ms(meanDur(v)), ms(meanDur(r.last.watermarkLag[t])))
		}
	}
	for _, t := range r.tasks {
		fmt.Printf("  %-9s backpressure %7.2f     → %8.2f\n", t, meanFloat(r.first.backpressure[t]), meanFloat(r.last.backpressure[t]))
	}
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

func maxDur(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}

func meanFloat(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(max(len(v), 1))
}

// TestSourceBehind: the soak finds a source subtask's newest record from
// its count and the parallelism.
func TestSourceBehind(t *testing.T) {
	start := time.Unix(1000, 0)
	// Subtask 1 of 2 produced 10 records: 1, 3, …, 19, the newest due at
	// start + 19 ms; 5 tasks are 2 txns, 2 stats and out.
	got, ok := sourceBehind(start.Add(25*time.Millisecond), start, time.Millisecond, "txns[1]", 10, 5)
	if !ok || got != 6*time.Millisecond {
		t.Fatalf("sourceBehind = %v, %v; want 6ms", got, ok)
	}
	if _, ok := sourceBehind(start, start, time.Millisecond, "txns[0]", 0, 5); ok {
		t.Fatal("a subtask that produced nothing has no newest record")
	}
}
