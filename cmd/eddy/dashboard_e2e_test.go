package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dashboard/dashboardtest"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// dashboardJob is keyed, checkpointed and unbounded: it runs until the
// test ends, with a Wasm node (counter) to show in the modules table.
const dashboardJob = `name: dash
parallelism: 2
checkpoint: {interval: 500ms}
nodes:
  - name: txns
    source: {generator: {kind: transactions, rate: 300, cards: 50, seed: 3}}
  - name: counts
    input: txns
    key_by: card
    wasm: {module: counter}
  - name: out
    input: counts
    sink: {file: {path: $OUT/counts.jsonl}}
`

// TestDashboard drives the dashboard in Chromium against a real cluster (a
// coordinator serving --http, two workers), as tenant acme's developer
// would: a wrong token is refused at the login with nothing shown; the
// job appears in the list; its graph shows its three nodes; a checkpoint
// appears in the history; a savepoint started with the page's button
// completes and is listed (and `eddy job status` lists it too, so the
// click really took one); a hot swap of counts to counter-v2@1 made with
// the page's form ends SWAPPED (and the CLI sees it); the cluster page refuses a tenant; tenant beta's
// developer sees neither the job in the list nor its page, and when the
// admin revokes beta's token the open page falls back to the login with
// the refusal. Then the admin
// picks tenant acme in the jobs list and sees the cluster: the leader and
// both workers. Screenshots: $EDDY_DASHBOARD_ARTIFACTS, else the test's
// temporary directory (the path is logged).
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes and a browser")
	}
	dashboardtest.Require(t)
	c := &cluster{dir: t.TempDir()}
	coord := startProc(t, c.dir, "c1", "coordinator", "--id", "c1", "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--data-dir", filepath.Join(c.dir, "c1"), "--blobs", filepath.Join(c.dir, "blobs"), "--bootstrap",
		"--heartbeat-interval", "200ms", "--heartbeat-timeout", "5s")
	c.coords = append(c.coords, coord)
	c.apis = append(c.apis, coord.addr(t, coordinatorLine))
	url := coord.addr(t, httpLine)
	for i := range 2 {
		c.workers = append(c.workers, startProc(t, c.dir, fmt.Sprintf("w%d", i+1), "worker", "--id", fmt.Sprintf("w%d", i+1),
			"--coordinator", c.apis[0], "--slots", "4", "--data-dir", filepath.Join(c.dir, fmt.Sprintf("w%d", i+1))))
	}
	testkit.Eventually(t, 30*time.Second, "two workers alive", func() bool {
		return strings.Count(c.as(t, testToken, 0, "cluster info").stdout, "ALIVE") == 2
	})
	admin := func(args ...string) string {
		t.Helper()
		r := c.as(t, testToken, 0, args...)
		if r.code != 0 {
			t.Fatalf("eddy %s: %s", args[0], r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	admin("tenant create", "acme")
	admin("tenant create", "beta")
	devA := admin("token create", "--tenant", "acme", "--role", "developer", "--description", "dashboard test")
	devB := admin("token create", "--tenant", "beta", "--role", "developer", "--description", "dashboard test")
	for _, m := range []struct{ file, name string }{{"counter-c.wasm", "counter"}, {"counter-v2-c.wasm", "counter-v2"}} {
		if r := c.as(t, devA, 0, "module upload", filepath.Join(repoRoot(t), "udfs/build", m.file), "--name", m.name); r.code != 0 {
			t.Fatalf("upload %s: %s", m.file, r.stderr)
		}
	}
	spec, _ := inlineSpec(t, dashboardJob)
	r := c.as(t, devA, 0, "job submit", spec)
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	job := strings.TrimSpace(r.stdout)
	testkit.Eventually(t, time.Minute, "the job running", func() bool {
		return strings.Contains(c.as(t, devA, 0, "job status", job).stdout, "RUNNING")
	})

	t.Run("tenant", func(t *testing.T) {
		dashboardtest.Run(t, dashboardtest.Options{URL: url, Token: devA, BadToken: devA[:len(devA)-1] + "0", OtherToken: devB,
			Job: job, Nodes: []string{"txns", "counts", "out"}, SwapNode: "counts", SwapModule: "counter-v2@1", ClusterRefused: true, AdminToken: testToken})
		st := c.as(t, devA, 0, "job status", job).stdout
		if !regexp.MustCompile(`(?m)^\d+\s+SAVEPOINT\s+COMPLETED.*tenants/acme/savepoints/` + regexp.QuoteMeta(job) + `-\d+`).MatchString(st) {
			t.Fatalf("job status lists no savepoint after the page's:\n%s", st)
		}
		if !strings.Contains(st, "counter-v2@1") {
			t.Fatalf("job status does not show the page's swap to counter-v2@1:\n%s", st)
		}
	})
	t.Run("admin", func(t *testing.T) {
		dashboardtest.Run(t, dashboardtest.Options{URL: url, Token: testToken, Tenant: "acme", Job: job,
			Steps: []string{"jobs", "cluster"}})
	})
}
