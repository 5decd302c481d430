package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
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
