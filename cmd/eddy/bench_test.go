package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/storage"
	"github.com/eddy-stream/eddy/storage/s3test"
)

// BenchmarkClusterThroughput is the throughput of a keyed job (a generator
// at parallelism 4 → key_by card → a Wasm operator with keyed state and a
// tumbling window → files) spread over two worker processes, against the
// same job on the embedded standalone (`eddy run`, one process). Records
// cross processes over the Exchange gRPC streams in the cluster and local
// queues standalone. Each iteration runs both once; the figures are
// records/s of the source and their ratio.
func BenchmarkClusterThroughput(b *testing.B) {
	const records = 400_000
	module := repoRoot(b) + "/udfs/build/counter-c.wasm"
	c := startCluster(b, 16)
	if r := c.eddyOK(b, "module upload", module, "--name", "counter"); r.code != 0 {
		b.Fatal(r.stderr)
	}
	job := strings.Replace(clusterJob, "count: 40000", "count: "+strconv.Itoa(records), 1)
	var cluster, standalone time.Duration
	for b.Loop() {
		spec, _ := inlineSpec(b, strings.NewReplacer("RATE", "0", "MODULE", module).Replace(job))
		// The job's own time, from submission, as the cluster's below:
		// not the process start.
		standalone += runElapsed(b, spec)

		spec, _ = inlineSpec(b, strings.NewReplacer("RATE", "0", "MODULE", "counter").Replace(job))
		start := time.Now()
		r := c.eddyOK(b, "job submit", spec)
		if r.code != 0 {
			b.Fatal(r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		for {
			state, _, out := c.jobState(b, id)
			if state == "FINISHED" {
				break
			}
			if state == "FAILED" {
				b.Fatal(out)
			}
			time.Sleep(20 * time.Millisecond)
		}
		cluster += time.Since(start)
	}
	n := float64(b.N) * records
	b.ReportMetric(n/cluster.Seconds(), "cluster-rec/s")
	b.ReportMetric(n/standalone.Seconds(), "standalone-rec/s")
	b.ReportMetric(standalone.Seconds()/cluster.Seconds(), "cluster/standalone")
}

// BenchmarkLeaderFailover is the time from kill -9 of the leading
// coordinator of three to the first `cluster info` answered by a new
// leader (raft election and heartbeat timeouts of 1 s, the defaults).
func BenchmarkLeaderFailover(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		c := startCluster(b, 1)
		l := c.leader(b)
		b.StartTimer()
		start := time.Now()
		c.coords[l].kill(b)
		for {
			r := c.eddyOK(b, "cluster info")
			if r.code == 0 && strings.Contains(r.stdout, "LEADER") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		total += time.Since(start)
		b.StopTimer()
		for _, p := range append(c.coords, c.workers...) {
			p.kill(b)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
}

// BenchmarkCheckpointOverhead runs the fault-tolerance job (keyed window
// and Wasm counter, 60k records, exactly-once file sinks) standalone with
// checkpoints every 300 ms to file:// against the same job without
// checkpoints; the ratio is the throughput kept with checkpointing.
func BenchmarkCheckpointOverhead(b *testing.B) {
	module := repoRoot(b) + "/udfs/build/counter-c.wasm"
	var with, without time.Duration
	for b.Loop() {
		spec, _ := ftSpec(b, 2, 0, module, "")
		without += runElapsed(b, spec)
		spec, _ = ftSpec(b, 2, 0, module, "file://"+b.TempDir())
		with += runElapsed(b, spec)
	}
	b.ReportMetric(60000*float64(b.N)/without.Seconds(), "plain-rec/s")
	b.ReportMetric(60000*float64(b.N)/with.Seconds(), "checkpointed-rec/s")
	b.ReportMetric(without.Seconds()/with.Seconds(), "checkpointed/plain")
}

// BenchmarkCheckpointOverheadSlowS3 is BenchmarkCheckpointOverhead with
// the checkpoints on s3:// (versitygw) behind a proxy that holds every
// PUT for slowPut before passing it on, as a distant or throttled object
// store would: the throughput kept with checkpoints every 300 ms when
// uploads are slow, which is what asynchronous snapshots are for.
//
// paced offers 2000 records/s (60k records, 30 s): the ratio is the share
// of that rate the job sustains, and every second the stream stands still
// is lost (the source's token bucket holds 100 ms). It is the figure that
// means something on a loaded machine: unpaced (300k records, as fast as
// possible) is CPU-bound there, and a task that waits for storage leaves
// its CPU to the others, which hides the stall.
func BenchmarkCheckpointOverheadSlowS3(b *testing.B) {
	const slowPut = 500 * time.Millisecond
	module := repoRoot(b) + "/udfs/build/counter-c.wasm"
	srv := s3test.Start(b)
	cfg := storage.DefaultConfig()
	cfg.AccessKey, cfg.SecretKey, cfg.CreateBucket = srv.AccessKey, srv.SecretKey, true
	st, err := storage.Open(context.Background(), srv.URL("checkpoints", ""), cfg)
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	proxy := slowPuts(b, srv.Endpoint, slowPut)
	b.Setenv(storage.EnvAccessKey, srv.AccessKey)
	b.Setenv(storage.EnvSecretKey, srv.SecretKey)
	run := 0
	for _, bc := range []struct {
		name          string
		records, rate int
	}{
		{"paced", 60_000, 2000},
		{"unpaced", 300_000, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			job := strings.NewReplacer("count: 60000", "count: "+strconv.Itoa(bc.records),
				"PAR", "2", "RATE", strconv.Itoa(bc.rate), "MODULE", module,
				// A slow checkpoint is not a failed one here.
				"timeout: 3s", "timeout: 30s").Replace(ftJob)
			var with, without time.Duration
			checkpoints := 0
			for b.Loop() {
				spec, _ := inlineSpec(b, strings.Replace(job, "checkpoint: {interval: 300ms, timeout: 30s, storage: \"STORAGE\"}\n", "", 1))
				without += runElapsed(b, spec)
				// A prefix per run: content-addressed state files of an
				// earlier run would not be uploaded again.
				run++
				url := fmt.Sprintf("s3://checkpoints/run-%d?endpoint=%s&tls=false", run, proxy)
				spec, _ = inlineSpec(b, strings.Replace(job, "STORAGE", url, 1))
				with += runElapsed(b, spec)
				// Checkpoint ids count up from 1; the leader deletes
				// old checkpoints and keeps the last ones.
				dirs, _ := filepath.Glob(filepath.Join(srv.Dir, "checkpoints", fmt.Sprintf("run-%d", run), "tenants/*/jobs/*/chk/*"))
				last := 0
				for _, d := range dirs {
					if id, err := strconv.Atoi(filepath.Base(d)); err == nil {
						last = max(last, id)
					}
				}
				checkpoints += last
			}
			n := float64(bc.records) * float64(b.N)
			b.ReportMetric(n/without.Seconds(), "plain-rec/s")
			b.ReportMetric(n/with.Seconds(), "checkpointed-rec/s")
			b.ReportMetric(without.Seconds()/with.Seconds(), "checkpointed/plain")
			b.ReportMetric(float64(checkpoints)/float64(b.N), "checkpoints/run")
		})
	}
}

// slowPuts serves on 127.0.0.1 a reverse proxy to the S3 endpoint target
// that delays each PUT (an object or a part of one) by delay, and returns
// its address. Requests keep their Host header, which their signature
// covers.
func slowPuts(b *testing.B, target string, delay time.Duration) string {
	b.Helper()
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// BenchmarkRecovery is the time from kill -9 of a worker running part of a
// checkpointing job to the job running again (a new attempt, restored from
// its latest checkpoint, every task RUNNING), with a heartbeat timeout of
// 2 s and a restart delay of 300 ms (see startFT).
func BenchmarkRecovery(b *testing.B) {
	module := repoRoot(b) + "/udfs/build/counter-c.wasm"
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		c := startFTB(b, nil, 8)
		if r := c.client(b, "module", "upload", module, "--name", "counter"); r.code != 0 {
			b.Fatal(r.stderr)
		}
		spec, _ := ftSpec(b, 2, 2000, "counter", "file://"+b.TempDir())
		r := c.client(b, "job", "submit", spec)
		if r.code != 0 {
			b.Fatal(r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		testkit.Eventually(b, time.Minute, "a completed checkpoint", func() bool {
			_, _, st := c.status(b, id)
			return len(checkpointIDs(st)) > 0
		})
		b.StartTimer()
		start := time.Now()
		c.workers[1].kill(b)
		testkit.Eventually(b, time.Minute, "running again", func() bool {
			state, attempt, st := c.status(b, id)
			return state == "RUNNING" && attempt >= 2 && !strings.Contains(st, "DEPLOYING")
		})
		total += time.Since(start)
		b.StopTimer()
		c.coord.kill(b)
		for _, w := range c.workers {
			w.kill(b)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/recovery")
}

// BenchmarkCheckpointLargeState is the throughput overhead of checkpoints
// (every 500 ms, to file://) on a job whose keyed state grows to tens of
// MB (a retained checkpoint of the memory backend is ~28 MB at the end): a
// window function (udfs/top-n) over a 7-day tumbling window, which keeps
// every element of the window in list state until the end.
// On Pebble checkpoints are incremental (new SST files only), on the
// memory backend full; each is compared with the same job unchecked.
func BenchmarkCheckpointLargeState(b *testing.B) {
	const records = 400_000 // × ~250 bytes of element state
	module := repoRoot(b) + "/udfs/build/top-n-c.wasm"
	job := `name: big-state
parallelism: 2
state_backend: BACKEND
CHECKPOINT
nodes:
  - name: txns
    source: {generator: {kind: transactions, count: ` + strconv.Itoa(records) + `, cards: 1000, seed: 9}}
    event_time: {max_out_of_orderness: 5s}
  - name: top
    input: txns
    key_by: card
    window: {tumbling: 168h}
    aggregate: {apply: {module: ` + module + `, config: {n: 3, field: amount}}}
  - name: out
    input: top
    sink: {discard: {}}
`
	for _, backend := range []string{"pebble", "memory"} {
		b.Run(backend, func(b *testing.B) {
			var with, without time.Duration
			for b.Loop() {
				text := strings.NewReplacer("BACKEND", backend, "CHECKPOINT\n", "").Replace(job)
				spec, _ := inlineSpec(b, text)
				without += runElapsed(b, spec)
				text = strings.NewReplacer("BACKEND", backend, "CHECKPOINT", "checkpoint: {interval: 500ms, storage: \"file://"+b.TempDir()+"\"}").Replace(job)
				spec, _ = inlineSpec(b, text)
				with += runElapsed(b, spec)
			}
			b.ReportMetric(records*float64(b.N)/without.Seconds(), "plain-rec/s")
			b.ReportMetric(records*float64(b.N)/with.Seconds(), "checkpointed-rec/s")
			b.ReportMetric(without.Seconds()/with.Seconds(), "checkpointed/plain")
		})
	}
}

// runElapsed runs `eddy run spec` and returns the job's own time, from
// submission to its end, as the summary reports it.
func runElapsed(b *testing.B, spec string) time.Duration {
	b.Helper()
	r := eddy(b, "run", spec)
	if r.code != 0 {
		b.Fatal(r.stderr)
	}
	m := regexp.MustCompile(`finished in (\S+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		b.Fatalf("no elapsed time in\n%s", r.stderr)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		b.Fatal(err)
	}
	return d
}
