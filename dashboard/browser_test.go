package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/eddy-stream/eddy/dashboard"
	"github.com/eddy-stream/eddy/dashboard/dashboardtest"
)

// fixtureAPI answers the REST routes the page calls with protojson-shaped
// fixtures (64-bit integers as strings, zero values left out), refusing
// any token but "good" with a 401 as the gateway does ("other" is another
// tenant's: it sees no jobs, until "admin" revokes it). Records grow on
// each status call; a savepoint POST adds a savepoint to the history.
type fixtureAPI struct {
	mu struct {
		sync.Mutex
		polls     int
		savepoint bool
		swapped   bool
		revoked   bool
	}
}

func (f *fixtureAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == "DELETE" && r.URL.Path == "/v1/tokens/other" && r.Header.Get("Authorization") == "Bearer admin" {
		f.mu.Lock()
		f.mu.revoked = true
		f.mu.Unlock()
		w.Write([]byte(`{}`))
		return
	}
	f.mu.Lock()
	revoked := f.mu.revoked
	f.mu.Unlock()
	if revoked && r.Header.Get("Authorization") == "Bearer other" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"code":16,"message":"token other was revoked","details":[]}`))
		return
	}
	if r.Header.Get("Authorization") == "Bearer other" {
		// Another tenant's token: no jobs, and acme's job is not found.
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs":
			w.Write([]byte(`{}`))
		case "/v1/whoami":
			w.Write([]byte(`{"token":{"tenant":"beta","role":"ROLE_DEVELOPER"}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"code":5,"message":"job acme-1 not found in tenant beta","details":[]}`))
		}
		return
	}
	if r.Header.Get("Authorization") != "Bearer good" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"code":16,"message":"invalid token","details":[]}`))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	type m = map[string]any
	var body any
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/whoami":
		body = m{"token": m{"id": "t1", "tenant": "acme", "role": "ROLE_DEVELOPER"}}
	case "GET /v1/jobs":
		body = m{"jobs": []m{{"jobId": "acme-1", "tenant": "acme", "name": "counter", "state": "JOB_STATE_RUNNING", "attempt": 1, "submittedUnixMs": "1764650000000"}}}
	case "GET /v1/modules":
		body = m{"modules": []m{{"name": "counter", "version": 1}, {"name": "counter", "version": 2}}}
	case "GET /v1/cluster":
		body = m{"leaderId": "c1", "coordinators": []m{{"nodeId": "c1", "role": "COORDINATOR_ROLE_LEADER", "voter": true, "apiAddress": "127.0.0.1:1"}},
			"workers": []m{{"workerId": "w1", "slotsTotal": 4, "slotsUsed": 3, "state": "WORKER_STATE_ALIVE", "lastHeartbeatUnixMs": "1764650000000"}}}
	case "GET /v1/jobs/acme-1/logs":
		body = m{"lines": []m{{"seq": "1", "entry": m{"task": "count[0]", "level": "INFO", "stream": "log", "message": "hello"}}}, "nextSeq": "1", "epoch": "9"}
	case "POST /v1/jobs/acme-1/savepoints":
		f.mu.savepoint = true
		body = m{"path": "tenants/acme/savepoints/acme-1-7", "checkpointId": "7"}
	case "POST /v1/jobs/acme-1/swaps":
		var req struct{ Node, Module string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Node != "count" || req.Module != "counter@2" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"code":3,"message":"unexpected swap request"}`))
			return
		}
		f.mu.swapped = true
		body = m{"swap": m{"swapId": "2", "node": "count", "fromModule": "counter@1", "toModule": "counter@2", "state": "SWAP_STATE_SWAPPED"}}
	case "GET /v1/jobs/acme-1":
		f.mu.polls++
		out := strconv.Itoa(1000 * f.mu.polls)
		task := func(id, chain string, bp float64) m {
			return m{"taskId": id, "chain": chain, "state": "TASK_STATE_RUNNING", "workerId": "w1",
				"metrics": m{"recordsIn": out, "recordsOut": out, "backpressureRatio": bp, "watermarkMs": "-9223372036854775808"}}
		}
		cps := []m{{"checkpointId": "6", "kind": "CHECKPOINT_KIND_CHECKPOINT", "state": "CHECKPOINT_STATE_COMPLETED", "durationMs": "120", "fullSizeBytes": "4096", "incrementalSizeBytes": "1024"}}
		if f.mu.savepoint {
			cps = append([]m{{"checkpointId": "7", "kind": "CHECKPOINT_KIND_SAVEPOINT", "state": "CHECKPOINT_STATE_COMPLETED", "durationMs": "80", "fullSizeBytes": "4096", "path": "tenants/acme/savepoints/acme-1-7"}}, cps...)
		}
		module := "counter@1"
		swaps := []m{{"swapId": "1", "node": "count", "fromModule": "counter@1", "toModule": "counter@2", "state": "SWAP_STATE_REFUSED", "reason": "state schema differs"}}
		if f.mu.swapped {
			module = "counter@2"
			swaps = append(swaps, m{"swapId": "2", "node": "count", "fromModule": "counter@1", "toModule": "counter@2", "state": "SWAP_STATE_SWAPPED"})
		}
		body = m{
			"job":         m{"jobId": "acme-1", "tenant": "acme", "name": "counter", "state": "JOB_STATE_RUNNING", "attempt": 1},
			"tasks":       []m{task("src[0]", "src", 0.7), task("count[0]", "count -> out", 0.05)},
			"checkpoints": cps,
			"nodes":       []m{{"name": "count", "module": module, "sha256": "abcdef0123456789"}},
			"swaps":       swaps,
			"graph": m{
				"nodes": []m{{"name": "src", "kind": "source", "parallelism": 1, "chainHead": "src"},
					{"name": "count", "kind": "wasm", "parallelism": 1, "chainHead": "count"},
					{"name": "out", "kind": "sink", "parallelism": 1, "chainHead": "count"}},
				"edges": []m{{"from": "src", "to": "count", "kind": "hash"}, {"from": "count", "to": "out", "kind": "forward", "chained": true}},
			},
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

// TestBrowserFixture renders every page in Chromium against fixtures: the
// page's side of the contract, without a cluster (TestDashboard in
// cmd/eddy runs the same script against real processes).
func TestBrowserFixture(t *testing.T) {
	dashboardtest.Require(t)
	mux := http.NewServeMux()
	mux.Handle("/v1/", &fixtureAPI{})
	mux.Handle("/", dashboard.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dashboardtest.Run(t, dashboardtest.Options{URL: srv.URL, Token: "good", BadToken: "bad", OtherToken: "other", AdminToken: "admin", Job: "acme-1", Nodes: []string{"src", "count", "out"},
		SwapNode: "count", SwapModule: "counter@2"})
}
