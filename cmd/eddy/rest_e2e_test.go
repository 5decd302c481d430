package main

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// The REST tests drive the coordinator's --http listener with plain
// net/http requests and JSON, as curl or the dashboard would.

// httpLine is what a server prints once its --http listener serves.
var httpLine = regexp.MustCompile(`(?m)^http API on (https?://\S+) \(OpenAPI at /openapi.json\)\n`)

// restJob runs the echo module on an unbounded generator: it stays
// RUNNING until it is canceled.
const restJob = `name: rest
parallelism: 2
nodes:
  - name: txns
    source: {generator: {kind: transactions, rate: 200, seed: 7}}
  - name: op
    input: txns
    wasm: {module: echo}
  - name: out
    input: op
    sink: {file: {path: $OUT/out.jsonl}}
`

// restClient calls one REST API with one token ("" for none).
type restClient struct {
	t     *testing.T
	base  string
	token string
}

// call sends method path with body (nil: none) encoded as JSON and
// decodes the JSON answer into a map; it returns the HTTP status.
func (c restClient) call(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("%s %s: %d, not a JSON object: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// ok is call that fails the test unless the answer is 200.
func (c restClient) ok(method, path string, body any) map[string]any {
	c.t.Helper()
	code, out := c.call(method, path, body)
	if code != http.StatusOK {
		c.t.Fatalf("%s %s: %d %v", method, path, code, out)
	}
	return out
}

// refused is call that fails the test unless the answer is want with a
// one-line message containing msg.
func (c restClient) refused(want int, msg, method, path string, body any) {
	c.t.Helper()
	code, out := c.call(method, path, body)
	m, _ := out["message"].(string)
	if code != want || !strings.Contains(m, msg) || strings.Contains(m, "\n") {
		c.t.Fatalf("%s %s: %d %v, want %d with a one-line message containing %q", method, path, code, out, want, msg)
	}
}

func (c restClient) as(token string) restClient { c.token = token; return c }

// restStandalone starts a standalone with --http and returns its REST
// base URL and a CLI bound to it.
func restStandalone(t *testing.T, args ...string) (string, func(args ...string) result) {
	t.Helper()
	dir := t.TempDir()
	p, cli := standaloneProc(t, dir, append([]string{"--data-dir", filepath.Join(dir, "data"), "--http", "127.0.0.1:0"}, args...)...)
	return p.addr(t, httpLine), cli
}

// restState is the state field of a JobStatus answer.
func restState(st map[string]any) string {
	job, _ := st["job"].(map[string]any)
	s, _ := job["state"].(string)
	return s
}

// uploadEcho uploads host/testdata/echo.wasm as "echo" through REST.
func uploadEcho(t *testing.T, c restClient, tenant string) map[string]any {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join(repoRoot(t), "host", "testdata", "echo.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return c.ok("POST", "/v1/modules", map[string]any{"tenant": tenant, "name": "echo", "wasm": base64.StdEncoding.EncodeToString(wasm)})
}

// submitRESTJob submits restJob through REST and returns its id.
func submitRESTJob(t *testing.T, c restClient, tenant string) string {
	t.Helper()
	spec, _ := inlineSpec(t, restJob)
	yaml, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := c.ok("POST", "/v1/jobs", map[string]any{"tenant": tenant, "specYaml": base64.StdEncoding.EncodeToString(yaml)})
	id, _ := out["jobId"].(string)
	if id == "" {
		t.Fatalf("submit: no jobId in %v", out)
	}
	return id
}

// TestRESTRoundTrip uploads a module, submits a job that runs it, follows
// it to RUNNING with its tasks listed, cancels it and follows it to
// CANCELED, all through the REST API of a standalone; the CLI sees the
// same job.
func TestRESTRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	base, cli := restStandalone(t)
	c := restClient{t: t, base: base, token: testToken}

	up := uploadEcho(t, c, "")
	mod, _ := up["module"].(map[string]any)
	if mod["name"] != "echo" || mod["version"] != float64(1) || len(fmt.Sprint(mod["sha256"])) != 64 {
		t.Fatalf("upload: %v", up)
	}
	if got := c.ok("GET", "/v1/modules/echo?metadata_only=true", nil); fmt.Sprint(got["module"].(map[string]any)["sha256"]) != mod["sha256"] {
		t.Fatalf("get module: %v", got)
	}
	if mods, _ := c.ok("GET", "/v1/modules", nil)["modules"].([]any); len(mods) != 1 {
		t.Fatalf("list modules: %v", mods)
	}

	id := submitRESTJob(t, c, "")
	var st map[string]any
	testkit.Eventually(t, time.Minute, "the job to run", func() bool {
		st = c.ok("GET", "/v1/jobs/"+id, nil)
		return restState(st) == "JOB_STATE_RUNNING"
	})
	tasks, _ := st["tasks"].([]any)
	if len(tasks) == 0 {
		t.Fatalf("status of a running job lists no task: %v", st)
	}
	for _, task := range tasks {
		task := task.(map[string]any)
		if task["taskId"] == "" || task["workerId"] == "" || task["state"] == "" {
			t.Fatalf("task without id, worker or state: %v", task)
		}
	}
	if nodes, _ := st["nodes"].([]any); len(nodes) != 1 || !strings.HasPrefix(fmt.Sprint(nodes[0].(map[string]any)["module"]), "echo") {
		t.Fatalf("nodes: %v", st["nodes"])
	}
	jobs, _ := c.ok("GET", "/v1/jobs", nil)["jobs"].([]any)
	if len(jobs) != 1 || jobs[0].(map[string]any)["jobId"] != id {
		t.Fatalf("list jobs: %v", jobs)
	}
	if r := cli("job", "status", id); r.code != 0 || !strings.Contains(r.stdout, "RUNNING") {
		t.Fatalf("the CLI does not see the REST job running: %d %s %s", r.code, r.stdout, r.stderr)
	}

	if out := c.ok("POST", "/v1/jobs/"+id+":cancel", map[string]any{}); out["state"] != "JOB_STATE_CANCELING" && out["state"] != "JOB_STATE_CANCELED" {
		t.Fatalf("cancel: %v", out)
	}
	testkit.Eventually(t, time.Minute, "the job to be canceled", func() bool {
		return restState(c.ok("GET", "/v1/jobs/"+id, nil)) == "JOB_STATE_CANCELED"
	})
	c.refused(http.StatusNotFound, "not found", "GET", "/v1/jobs/no-such-job", nil)
	c.refused(http.StatusBadRequest, "", "POST", "/v1/jobs", map[string]any{"specYaml": base64.StdEncoding.EncodeToString([]byte("nodes: [}"))})
}

// TestRESTAuth: the REST API authenticates and authorizes as the gRPC
// API does, because it is the gRPC API. For each class of protected
// operation: no token, a malformed token and a wrong secret are 401; a
// token of another tenant is told the job (or token) does not exist
// (404) and changes nothing; a viewer may not change its tenant's jobs (403); a
// developer may not make admin calls (403).
func TestRESTAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	base, _ := restStandalone(t)
	admin := restClient{t: t, base: base, token: testToken}
	token := func(tenant, role string) string {
		t.Helper()
		out := admin.ok("POST", "/v1/tokens", map[string]any{"tenant": tenant, "role": role, "description": "rest test"})
		s, _ := out["secret"].(string)
		if !strings.HasPrefix(s, "eddy_") {
			t.Fatalf("create token: %v", out)
		}
		return s
	}
	for _, id := range []string{"acme", "rival"} {
		if out := admin.ok("POST", "/v1/tenants", map[string]any{"id": id}); out["tenant"].(map[string]any)["id"] != id {
			t.Fatalf("create tenant: %v", out)
		}
	}
	dev := admin.as(token("acme", "ROLE_DEVELOPER"))
	viewer := admin.as(token("acme", "ROLE_VIEWER"))
	rival := admin.as(token("rival", "ROLE_DEVELOPER"))
	if who := dev.ok("GET", "/v1/whoami", nil); who["token"].(map[string]any)["tenant"] != "acme" {
		t.Fatalf("whoami: %v", who)
	}
	uploadEcho(t, dev, "")
	id := submitRESTJob(t, dev, "")
	testkit.Eventually(t, time.Minute, "acme's job to run", func() bool {
		return restState(dev.ok("GET", "/v1/jobs/"+id, nil)) == "JOB_STATE_RUNNING"
	})

	job := "/v1/jobs/" + id
	viewerID, _ := viewer.ok("GET", "/v1/whoami", nil)["token"].(map[string]any)["id"].(string)
	ops := []struct {
		class        string
		method, path string
		body         any
		admin        bool // an admin call: a developer is refused
		acme         bool // on an object of acme: rival is told it does not exist
		mutates      bool // a viewer is refused
	}{
		{"read a job", "GET", job, nil, false, true, false},
		{"read a job's logs", "GET", job + "/logs", nil, false, true, false},
		{"cancel a job", "POST", job + ":cancel", map[string]any{}, false, true, true},
		{"take a savepoint", "POST", job + "/savepoints", map[string]any{}, false, true, true},
		{"swap a module", "POST", job + "/swaps", map[string]any{"node": "op", "module": "echo"}, false, true, true},
		{"list jobs", "GET", "/v1/jobs", nil, false, false, false},
		{"submit a job", "POST", "/v1/jobs", map[string]any{"specYaml": base64.StdEncoding.EncodeToString([]byte(restJob))}, false, false, true},
		{"upload a module", "POST", "/v1/modules", map[string]any{"name": "x", "wasm": "AGFzbQEAAAA="}, false, false, true},
		{"read a module", "GET", "/v1/modules/echo", nil, false, false, false},
		{"create a tenant", "POST", "/v1/tenants", map[string]any{"id": "intruder"}, true, false, true},
		{"delete a tenant", "DELETE", "/v1/tenants/rival", nil, true, false, true},
		{"set a quota", "PATCH", "/v1/tenants/acme/quota", map[string]any{"slots": 100}, true, false, true},
		{"list tenants", "GET", "/v1/tenants", nil, true, false, false},
		{"read the audit log", "GET", "/v1/audit", nil, true, false, false},
		{"read the cluster", "GET", "/v1/cluster", nil, false, false, false},
		{"revoke a token", "DELETE", "/v1/tokens/" + viewerID, nil, false, true, true},
		{"list tokens", "GET", "/v1/tokens", nil, false, false, false},
		{"create a token", "POST", "/v1/tokens", map[string]any{"tenant": "acme", "role": "ROLE_VIEWER"}, false, false, true},
		{"who am I", "GET", "/v1/whoami", nil, false, false, false},
	}
	wrongSecret := "eddy_" + strings.Repeat("e", 16) + "_" + strings.Repeat("0", 64)
	for _, op := range ops {
		t.Run(op.class, func(t *testing.T) {
			anon := restClient{t: t, base: base}
			anon.refused(http.StatusUnauthorized, "needs an API token", op.method, op.path, op.body)
			anon.as(wrongSecret).refused(http.StatusUnauthorized, "invalid API token", op.method, op.path, op.body)
			anon.as("not-a-token").refused(http.StatusUnauthorized, "", op.method, op.path, op.body)
			if op.acme {
				restClient{t: t, base: base, token: rival.token}.refused(http.StatusNotFound, "not found", op.method, op.path, op.body)
			}
			if op.admin {
				restClient{t: t, base: base, token: dev.token}.refused(http.StatusForbidden, "needs the admin role", op.method, op.path, op.body)
			}
			if op.mutates {
				restClient{t: t, base: base, token: viewer.token}.refused(http.StatusForbidden, "may not call", op.method, op.path, op.body)
			}
		})
	}
	// Nothing refused changed anything: the job runs, no tenant came or
	// went, the viewer's token works.
	if st := restState(dev.ok("GET", job, nil)); st != "JOB_STATE_RUNNING" {
		t.Fatalf("acme's job is %s after the refused calls", st)
	}
	viewer.ok("GET", "/v1/whoami", nil)
	tenants, _ := admin.ok("GET", "/v1/tenants", nil)["tenants"].([]any)
	if len(tenants) != 3 {
		t.Fatalf("tenants after the refused calls: %v", tenants)
	}
	// The refused mutating calls of known tokens are in the audit log.
	entries, _ := admin.ok("GET", "/v1/audit?tenant=rival&limit=1000", nil)["entries"].([]any)
	var denied int
	for _, e := range entries {
		if strings.HasPrefix(fmt.Sprint(e.(map[string]any)["outcome"]), "NotFound") {
			denied++
		}
	}
	if denied < 3 {
		t.Fatalf("audit of rival's refused calls: %v", entries)
	}
}

// TestRESTOpenAPI: /openapi.json is JSON and lists the job routes.
func TestRESTOpenAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	base, _ := restStandalone(t)
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Swagger string                    `json:"swagger"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("openapi.json: %d %v", resp.StatusCode, err)
	}
	for path, method := range map[string]string{"/v1/jobs": "post", "/v1/jobs/{jobId}": "get", "/v1/jobs/{jobId}:cancel": "post", "/v1/modules": "post"} {
		if doc.Paths[path][method] == nil {
			t.Errorf("openapi.json has no %s %s (paths: %v)", method, path, doc.Paths)
		}
	}
}

// TestRESTTLS: with TLS flags --http serves HTTPS with the member's
// certificate, and a REST call is authenticated by its token alone, with
// or without a client certificate.
func TestRESTTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if r := eddy(t, "certs", "init", certs); r.code != 0 {
		t.Fatalf("certs init: %s", r.stderr)
	}
	p := startProc(t, dir, "standalone", "standalone", "--api", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--certs", certs)
	base := p.addr(t, httpLine)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("--http with --certs serves %s, want https", base)
	}
	member, err := tls.LoadX509KeyPair(filepath.Join(certs, "node.pem"), filepath.Join(certs, "node-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := loadPool(t, filepath.Join(certs, "ca.pem"))
	for name, cfg := range map[string]*tls.Config{
		"no client certificate":     {RootCAs: roots},
		"member client certificate": {RootCAs: roots, Certificates: []tls.Certificate{member}},
	} {
		t.Run(name, func(t *testing.T) {
			old := http.DefaultClient
			http.DefaultClient = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			defer func() { http.DefaultClient = old }()
			c := restClient{t: t, base: base, token: testToken}
			if who := c.ok("GET", "/v1/whoami", nil); who["token"].(map[string]any)["role"] != "ROLE_ADMIN" {
				t.Fatalf("whoami: %v", who)
			}
			// The certificate (or its absence) grants nothing: a call
			// without a token is refused.
			c.as("").refused(http.StatusUnauthorized, "needs an API token", "GET", "/v1/cluster", nil)
		})
	}
	// Plain HTTP to the HTTPS listener gets no API.
	resp, err := http.Get("http://" + strings.TrimPrefix(base, "https://") + "/v1/whoami")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered on the HTTPS listener")
		}
	}
	// And a client that does not trust the cluster CA does not connect.
	if _, err := http.Get(base + "/v1/whoami"); err == nil {
		t.Fatal("a client without the cluster CA connected")
	}
}

// TestRESTListenBeyondLoopback: a plaintext --http beyond loopback is
// refused before the server starts, like the other listeners.
func TestRESTListenBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"standalone", "--api", "127.0.0.1:0", "--http", "0.0.0.0:0"},
		{"coordinator", "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap", "--http", ":0"},
	} {
		r := eddy(t, append(args, "--data-dir", filepath.Join(dir, "refused"))...)
		if r.code != 2 || !strings.Contains(r.stderr, "--http "+args[len(args)-1]+": refusing to listen beyond loopback without TLS") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("eddy %s: exit %d, stderr %q; want 2 and one line refusing --http", args[0], r.code, r.stderr)
		}
	}
}

// TestRESTFollower: the REST API of a follower serves the same calls, by
// the gRPC API's forwarding to the leader: a module uploaded and a job
// submitted through the follower's --http run on the cluster, and a bad
// token is refused there too.
func TestRESTFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dir := t.TempDir()
	hb := []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "5s"}
	coord := func(name string, extra ...string) *proc {
		args := append([]string{"coordinator", "--id", name, "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0",
			"--data-dir", filepath.Join(dir, name), "--blobs", filepath.Join(dir, "blobs")}, hb...)
		return startProc(t, dir, name, append(args, extra...)...)
	}
	c1 := coord("c1", "--bootstrap")
	api1 := c1.addr(t, coordinatorLine)
	cli := func(args ...string) result {
		return eddy(t, append(args, "--coordinator", api1, "--timeout", "10s")...)
	}
	testkit.Eventually(t, 20*time.Second, "c1 leads", func() bool {
		return strings.Contains(cli("cluster", "info").stdout, "LEADER")
	})
	c2 := coord("c2", "--join", api1, "--http", "127.0.0.1:0")
	base := c2.addr(t, httpLine)
	startProc(t, dir, "w1", "worker", "--id", "w1", "--coordinator", api1, "--slots", "4", "--data-dir", filepath.Join(dir, "w1"))

	c := restClient{t: t, base: base, token: testToken}
	testkit.Eventually(t, 30*time.Second, "c2 to follow c1 and the worker to be alive", func() bool {
		code, info := c.call("GET", "/v1/cluster", nil)
		if code != http.StatusOK || info["leaderId"] != "c1" {
			return false
		}
		workers, _ := info["workers"].([]any)
		return len(workers) == 1 && workers[0].(map[string]any)["state"] == "WORKER_STATE_ALIVE"
	})
	restClient{t: t, base: base, token: "eddy_" + strings.Repeat("e", 16) + "_" + strings.Repeat("0", 64)}.
		refused(http.StatusUnauthorized, "invalid API token", "GET", "/v1/jobs", nil)

	uploadEcho(t, c, "")
	id := submitRESTJob(t, c, "")
	testkit.Eventually(t, time.Minute, "the job to run on w1", func() bool {
		st := c.ok("GET", "/v1/jobs/"+id, nil)
		tasks, _ := st["tasks"].([]any)
		return restState(st) == "JOB_STATE_RUNNING" && len(tasks) > 0 && tasks[0].(map[string]any)["workerId"] == "w1"
	})
	c.ok("POST", "/v1/jobs/"+id+":cancel", map[string]any{})
	testkit.Eventually(t, time.Minute, "the job to be canceled", func() bool {
		return strings.Contains(cli("job", "status", id).stdout, "CANCELED")
	})
}
