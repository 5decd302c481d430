package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// The metrics tests scrape the --metrics listeners of real eddy processes
// running real jobs, and read what they serve with the Prometheus text
// parser.

var metricsLine = regexp.MustCompile(`(?m)^(?:coordinator|worker|standalone) metrics on https?://(\S+)/metrics\n`)

// meteredJob has a Wasm operator with keyed state, a keyed window and
// checkpoints; its generator is bounded but far from its end, so that it
// reports what it has still to produce.
const meteredJob = `name: metered
parallelism: 1
checkpoint: {interval: 300ms}
nodes:
  - name: txns
    source: {generator: {kind: transactions, count: 100000000, cards: 50, seed: 3, rate: 400}}
    event_time: {max_out_of_orderness: 1s}
  - name: counts
    input: txns
    key_by: card
    wasm: {module: counter}
  - name: per_card
    input: txns
    key_by: card
    window: {tumbling: 1s}
    aggregate: [count]
  - name: count_out
    input: counts
    sink: {file: {path: $OUT/counts.jsonl}}
  - name: window_out
    input: per_card
    sink: {file: {path: $OUT/windows.jsonl}}
`

// get fetches url with token (none when empty).
func get(t testing.TB, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape fetches and parses addr's /metrics.
func scrape(t testing.TB, addr, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, "http://"+addr+"/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", addr, code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("scrape %s: parse: %v", addr, err)
	}
	return mfs
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// series returns the series of family name whose labels include want.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range mfs[name].GetMetric() {
		ls := labels(m)
		ok := true
		for k, v := range want {
			if ls[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value sums the series of name matching want (counter, gauge, or a
// histogram's count).
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	sum := 0.0
	for _, m := range series(mfs, name, want) {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// TestMetricsCluster: a worker started before its coordinator is live but
// not ready until it registers; a coordinator alone without a group is
// not ready; a job of each of two tenants runs and every family is
// served with its labels and values that move; a tenant's token sees its
// own series only, a missing or wrong token none.
func TestMetricsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts eddy processes")
	}
	dir := t.TempDir()
	api := freeAddr(t)

	w := startProc(t, dir, "w1", "worker", "--id", "w1", "--coordinator", api, "--slots", "8",
		"--data-dir", filepath.Join(dir, "w1"), "--metrics", "127.0.0.1:0")
	wm := w.addr(t, metricsLine)
	if code, body := get(t, "http://"+wm+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("worker /healthz before registering: %d %s", code, body)
	}
	if code, body := get(t, "http://"+wm+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "not registered") || strings.Count(strings.TrimSpace(body), "\n") > 0 {
		t.Fatalf("worker /readyz before registering: %d %q, want 503 and one line", code, body)
	}

	// A coordinator that neither bootstraps nor joins has no leader.
	lone := startProc(t, dir, "lone", "coordinator", "--id", "lone", "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "lone"), "--metrics", "127.0.0.1:0")
	lm := lone.addr(t, metricsLine)
	if code, body := get(t, "http://"+lm+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "no known Raft leader") {
		t.Fatalf("lone coordinator /readyz: %d %q, want 503", code, body)
	}
	if code, _ := get(t, "http://"+lm+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("lone coordinator /healthz: %d", code)
	}
	lone.kill(t)

	c := startProc(t, dir, "c1", "coordinator", "--id", "c1", "--api", api, "--raft", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "c1"), "--bootstrap", "--heartbeat-interval", "200ms", "--metrics", "127.0.0.1:0")
	cm := c.addr(t, metricsLine)
	testkit.Eventually(t, 30*time.Second, "the coordinator ready", func() bool {
		code, _ := get(t, "http://"+cm+"/readyz", "")
		return code == http.StatusOK
	})
	testkit.Eventually(t, 30*time.Second, "the worker ready", func() bool {
		code, _ := get(t, "http://"+wm+"/readyz", "")
		return code == http.StatusOK
	})

	cl := &cluster{dir: dir, apis: []string{api}, coords: []*proc{c}}
	admin := func(args ...string) string {
		t.Helper()
		r := cl.as(t, testToken, 0, args...)
		if r.code != 0 {
			t.Fatalf("eddy %s: %s", args[0], r.stderr)
		}
		return r.stdout
	}
	admin("tenant create", "acme")
	admin("tenant create", "beta")
	token := func(tenant string) string {
		return strings.TrimSpace(admin("token create", "--tenant", tenant, "--role", "developer", "--description", "metrics"))
	}
	devA, devB := token("acme"), token("beta")
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	jobs := map[string]string{}
	for tenant, tok := range map[string]string{"acme": devA, "beta": devB} {
		if r := cl.as(t, tok, 0, "module upload", module, "--name", "counter"); r.code != 0 {
			t.Fatalf("%s upload: %s", tenant, r.stderr)
		}
		spec, _ := inlineSpec(t, meteredJob)
		r := cl.as(t, tok, 0, "job submit", spec)
		if r.code != 0 {
			t.Fatalf("%s submit: %s", tenant, r.stderr)
		}
		jobs[tenant] = strings.TrimSpace(r.stdout)
	}
	acme := map[string]string{"tenant": "acme", "job": jobs["acme"]}

	// Checkpoints complete and the job's tasks count records.
	var cmf map[string]*dto.MetricFamily
	testkit.Eventually(t, 60*time.Second, "a completed checkpoint of acme's job", func() bool {
		cmf = scrape(t, cm, testToken)
		return value(cmf, "eddy_job_checkpoints_completed_total", acme) >= 1
	})
	for _, name := range []string{"eddy_job_checkpoints_completed_total", "eddy_job_checkpoints_failed_total", "eddy_job_restarts_total",
		"eddy_job_last_checkpoint_duration_seconds", "eddy_job_last_checkpoint_size_bytes", "eddy_job_running"} {
		if got := series(cmf, name, acme); len(got) != 1 || labels(got[0])["name"] != "metered" {
			t.Errorf("coordinator: %s of acme's job: %v", name, got)
		}
	}
	if v := value(cmf, "eddy_job_last_checkpoint_size_bytes", acme); v <= 0 {
		t.Errorf("last checkpoint size %v, want > 0", v)
	}
	if got := series(cmf, "eddy_job_swaps_total", acme); len(got) != 4 {
		t.Errorf("swaps by outcome: %v", got)
	}
	if v := value(cmf, "eddy_raft_state", map[string]string{"node": "c1", "state": "Leader"}); v != 1 {
		t.Errorf("eddy_raft_state{state=Leader} = %v", v)
	}
	if v := value(cmf, "eddy_raft_leader_changes_total", map[string]string{"node": "c1"}); v < 1 {
		t.Errorf("leader changes %v, want ≥ 1", v)
	}
	if v := value(cmf, "eddy_fsm_apply_duration_seconds", nil); v < 1 {
		t.Errorf("FSM applies %v, want ≥ 1", v)
	}

	// The worker: every task family, labelled, and moving.
	first := scrape(t, wm, "")
	taskFamilies := []string{"eddy_task_records_in_total", "eddy_task_records_out_total", "eddy_task_bytes_in_total", "eddy_task_bytes_out_total",
		"eddy_task_busy_seconds_total", "eddy_task_idle_seconds_total", "eddy_task_backpressured_seconds_total",
		"eddy_task_input_watermark_milliseconds", "eddy_task_output_watermark_milliseconds", "eddy_task_late_records_dropped_total"}
	for _, name := range taskFamilies {
		got := series(first, name, acme)
		if len(got) == 0 {
			t.Errorf("worker: no %s of acme's job", name)
			continue
		}
		for _, m := range got {
			ls := labels(m)
			if ls["node"] == "" || ls["subtask"] != "0" || ls["worker"] != "w1" {
				t.Errorf("worker: %s labels %v", name, ls)
			}
		}
	}
	source := map[string]string{"tenant": "acme", "job": jobs["acme"], "node": "txns"}
	if v := value(first, "eddy_task_source_pending_records", source); v <= 0 {
		t.Errorf("source pending records %v, want > 0", v)
	}
	wasm := map[string]string{"tenant": "acme", "job": jobs["acme"], "node": "counts", "export": "eddy_process"}
	for _, name := range []string{"eddy_wasm_calls_total", "eddy_wasm_call_duration_seconds", "eddy_wasm_traps_total", "eddy_wasm_deadline_exceeded_total"} {
		if len(series(first, name, wasm)) != 1 {
			t.Errorf("worker: %s of counts' eddy_process: %v", name, series(first, name, wasm))
		}
	}
	if v := value(first, "eddy_wasm_instance_memory_bytes", map[string]string{"tenant": "acme", "node": "counts"}); v <= 0 {
		t.Errorf("instance memory %v, want > 0", v)
	}
	in0 := value(first, "eddy_task_records_in_total", source)
	calls0 := value(first, "eddy_wasm_calls_total", wasm)
	testkit.Eventually(t, 30*time.Second, "records_in and wasm calls to grow", func() bool {
		next := scrape(t, wm, "")
		return value(next, "eddy_task_records_in_total", source) > in0 && value(next, "eddy_wasm_calls_total", wasm) > calls0
	})
	if calls0 <= 0 {
		t.Errorf("wasm calls %v, want > 0", calls0)
	}

	// Who sees what at the coordinator.
	for _, tc := range []struct{ name, token, want string }{
		{"no token", "", "needs an API token"},
		{"malformed token", "nope", "not an Eddy API token"},
		{"unknown token", "eddy_" + strings.Repeat("0", 16) + "_" + strings.Repeat("1", 64), "invalid API token"},
	} {
		code, body := get(t, "http://"+cm+"/metrics", tc.token)
		if code != http.StatusUnauthorized || !strings.Contains(body, tc.want) || strings.Count(strings.TrimSpace(body), "\n") > 0 || strings.Contains(body, "# TYPE") {
			t.Errorf("%s: %d %q, want 401 and one line with %q", tc.name, code, body, tc.want)
		}
	}
	all := scrape(t, cm, testToken)
	for _, tenant := range []string{"acme", "beta"} {
		if len(series(all, "eddy_job_checkpoints_completed_total", map[string]string{"tenant": tenant})) != 1 {
			t.Errorf("admin does not see %s's job", tenant)
		}
	}
	if _, ok := all["go_goroutines"]; !ok {
		t.Error("admin does not see the process's own series")
	}
	var onlyA map[string]*dto.MetricFamily
	// Its tasks too, as the worker reported them with its heartbeats.
	testkit.Eventually(t, 30*time.Second, "acme's token to see its tasks' records", func() bool {
		onlyA = scrape(t, cm, devA)
		return value(onlyA, "eddy_job_task_records_in_total", map[string]string{"tenant": "acme", "task": "txns[0]", "worker": "w1"}) > 0
	})
	if len(series(onlyA, "eddy_job_checkpoints_completed_total", map[string]string{"tenant": "acme"})) != 1 {
		t.Error("acme's token does not see acme's job")
	}
	if v := value(onlyA, "eddy_job_task_bytes_in_total", map[string]string{"tenant": "acme", "task": "txns[0]"}); v <= 0 {
		t.Errorf("acme's reported source bytes %v, want > 0", v)
	}
	if len(series(all, "eddy_job_task_records_in_total", map[string]string{"tenant": "beta"})) == 0 {
		t.Error("admin does not see beta's tasks")
	}
	for name, mf := range onlyA {
		for _, m := range mf.GetMetric() {
			if labels(m)["tenant"] != "acme" {
				t.Errorf("acme's token sees %s %v", name, labels(m))
			}
		}
	}
	// A revoked token is refused.
	id := regexp.MustCompile(`eddy_([0-9a-f]{16})_`).FindStringSubmatch(devB)
	if id == nil {
		t.Fatalf("token %q", devB)
	}
	admin("token revoke", id[1])
	if code, body := get(t, "http://"+cm+"/metrics", devB); code != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
		t.Errorf("revoked token: %d %q", code, body)
	}
	// Health needs no token even with authentication on.
	if code, _ := get(t, "http://"+cm+"/healthz", ""); code != http.StatusOK {
		t.Errorf("coordinator /healthz: %d", code)
	}
}

// TestMetricsStandalone: one listener serves the coordinator's, the
// worker's and the Wasm series of a standalone process, behind the same
// token check; --metrics with a bad address is one line.
func TestMetricsStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	p, cli := standaloneProc(t, dir, "--data-dir", filepath.Join(dir, "data"), "--metrics", "127.0.0.1:0")
	addr := p.addr(t, metricsLine)
	testkit.Eventually(t, 30*time.Second, "standalone ready", func() bool {
		code, _ := get(t, "http://"+addr+"/readyz", "")
		return code == http.StatusOK
	})
	if r := cli("module", "upload", filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm"), "--name", "counter"); r.code != 0 {
		t.Fatalf("upload: %s", r.stderr)
	}
	spec, _ := inlineSpec(t, meteredJob)
	r := cli("job", "submit", spec)
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	job := map[string]string{"tenant": "default", "job": strings.TrimSpace(r.stdout)}
	testkit.Eventually(t, 60*time.Second, "task, Wasm and checkpoint series", func() bool {
		mfs := scrape(t, addr, testToken)
		return value(mfs, "eddy_task_records_in_total", job) > 0 && value(mfs, "eddy_wasm_calls_total", job) > 0 &&
			value(mfs, "eddy_job_checkpoints_completed_total", job) > 0 && value(mfs, "eddy_worker_registered", nil) == 1
	})
	if code, body := get(t, "http://"+addr+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", code, body)
	}

	bad := eddy(t, "standalone", "--data-dir", filepath.Join(dir, "bad"), "--api", "127.0.0.1:0", "--data", "127.0.0.1:0", "--metrics", "127.0.0.1:99999")
	if bad.code == 0 || !strings.Contains(bad.stderr, "metrics: listen on 127.0.0.1:99999") || strings.Count(strings.TrimSpace(bad.stderr), "\n") > 0 {
		t.Fatalf("bad --metrics: %d %q", bad.code, bad.stderr)
	}
}

// TestMetricsListener: plaintext --metrics beyond loopback is refused with
// one line before anything starts; with the cluster's TLS the listener
// serves HTTPS with the member certificate, and the token check stands.
func TestMetricsListener(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"worker", "--metrics", "0.0.0.0:0"},
		{"coordinator", "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap", "--metrics", ":0"},
		{"standalone", "--api", "127.0.0.1:0", "--metrics", "0.0.0.0:0"},
	} {
		r := eddy(t, append(args, "--data-dir", filepath.Join(dir, "refused"))...)
		if r.code != 2 || !strings.Contains(r.stderr, "--metrics") || !strings.Contains(r.stderr, "refusing to listen beyond loopback without TLS") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line", args[0], r.code, r.stderr)
		}
	}

	certs := filepath.Join(dir, "certs")
	if r := eddy(t, "certs", "init", certs); r.code != 0 {
		t.Fatal(r.stderr)
	}
	p := startProc(t, dir, "standalone", "standalone", "--api", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--certs", certs, "--metrics", "127.0.0.1:0")
	b, _ := waitLog(t, p, metricsLine)
	if !strings.Contains(b, "standalone metrics on https://") {
		t.Fatalf("not HTTPS: %s", b)
	}
	addr := p.addr(t, metricsLine)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: loadPool(t, filepath.Join(certs, "ca.pem"))}}}
	fetch := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testkit.Eventually(t, 30*time.Second, "ready over HTTPS", func() bool { return fetch("/readyz", "") == http.StatusOK })
	if code := fetch("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("HTTPS /metrics without a token: %d", code)
	}
	if code := fetch("/metrics", testToken); code != http.StatusOK {
		t.Errorf("HTTPS /metrics with the admin token: %d", code)
	}
	// A plaintext request gets net/http's 400 for HTTP to an HTTPS server.
	if code, _ := get(t, "http://"+addr+"/healthz", ""); code != http.StatusBadRequest {
		t.Errorf("the TLS listener answered plaintext with %d", code)
	}
}

// waitLog returns p's log once re matches it.
func waitLog(t testing.TB, p *proc, re *regexp.Regexp) (string, []string) {
	t.Helper()
	p.addr(t, re)
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), re.FindStringSubmatch(string(b))
}
