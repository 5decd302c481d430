package coordinator

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-stream/eddy/internal/metricsrv"
	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// TestAuthorizeMetrics: at the leader and at a follower, a scrape's token
// is checked as a Control call's: admin → everything, a tenant's token →
// its tenant, and no token, a malformed, an unknown or a revoked one →
// an error of one line without the token.
func TestAuthorizeMetrics(t *testing.T) {
	members := threeCoordinators(t)
	c1, c2 := members[0], members[1]
	ctx := callCtx(t)
	if _, err := c1.propose(ctx, &fsm.CreateTenant{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	admin := control(t, c1.Addr())
	viewA, _ := newToken(t, admin, "acme", eddyv1.Role_ROLE_VIEWER, 0)
	gone, goneInfo := newToken(t, admin, "acme", eddyv1.Role_ROLE_DEVELOPER, 0)
	if _, err := admin.RevokeToken(ctx, &eddyv1.RevokeTokenRequest{Id: goneInfo.GetId()}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the follower to apply the revocation", func() bool {
		tok, err := c2.FSM().Token(goneInfo.GetId())
		return err == nil && !tok.Revoked.IsZero()
	})
	unknown := "eddy_" + strings.Repeat("0", 16) + "_" + strings.Repeat("1", 64)
	for _, c := range []*Coordinator{c1, c2} {
		for _, tc := range []struct {
			name   string
			header []string
			want   metricsrv.Scope
			err    string
		}{
			{"admin", []string{"Bearer " + testAdminToken}, metricsrv.Scope{All: true}, ""},
			{"viewer of acme", []string{"Bearer " + viewA}, metricsrv.Scope{Tenant: "acme"}, ""},
			{"no token", nil, metricsrv.Scope{}, "this call needs an API token"},
			{"two headers", []string{"Bearer " + viewA, "Bearer " + viewA}, metricsrv.Scope{}, "more than one authorization"},
			{"not bearer", []string{"Basic " + viewA}, metricsrv.Scope{}, "not \"Bearer <token>\""},
			{"malformed", []string{"Bearer nope"}, metricsrv.Scope{}, "not an Eddy API token"},
			{"unknown", []string{"Bearer " + unknown}, metricsrv.Scope{}, "invalid API token"},
			{"revoked", []string{"Bearer " + gone}, metricsrv.Scope{}, "was revoked"},
		} {
			t.Run(c.cfg.NodeID+"/"+tc.name, func(t *testing.T) {
				r, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
				for _, h := range tc.header {
					r.Header.Add("Authorization", h)
				}
				got, err := c.AuthorizeMetrics(r)
				if tc.err == "" {
					if err != nil || got != tc.want {
						t.Fatalf("scope %+v, %v; want %+v", got, err, tc.want)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") ||
					strings.Contains(err.Error(), viewA) || strings.Contains(err.Error(), gone) {
					t.Fatalf("error %v, want one line with %q", err, tc.err)
				}
			})
		}
	}
}

// TestCollectorLeaderOnly: the leader exports the job series, a follower
// only its Raft series; both are ready.
func TestCollectorLeaderOnly(t *testing.T) {
	members := threeCoordinators(t)
	c1, c2 := members[0], members[1]
	ctx := callCtx(t)
	admin := control(t, c1.Addr())
	if _, err := admin.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "op", Wasm: wasmModule("op")}); err != nil {
		t.Fatal(err)
	}
	job, err := admin.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("waits", 1, "op")})
	if err != nil {
		t.Fatal(err)
	}
	families := func(c *Coordinator) map[string]int {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c.Collector())
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "job" && l.GetValue() != job.GetJobId() {
						t.Errorf("%s: series of job %s", mf.GetName(), l.GetValue())
					}
				}
			}
			out[mf.GetName()] = len(mf.GetMetric())
		}
		return out
	}
	lead, follow := families(c1), families(c2)
	for name, want := range map[string]int{"eddy_job_restarts_total": 1, "eddy_job_running": 1, "eddy_job_swaps_total": 4,
		"eddy_job_checkpoints_completed_total": 1, "eddy_raft_state": 4, "eddy_raft_leader_changes_total": 1} {
		if lead[name] != want {
			t.Errorf("leader: %d series of %s, want %d", lead[name], name, want)
		}
	}
	if follow["eddy_job_restarts_total"] != 0 || follow["eddy_raft_state"] != 4 {
		t.Errorf("follower: %v", follow)
	}
	for _, c := range members {
		if err := c.Ready(); err != nil {
			t.Errorf("%s not ready: %v", c.cfg.NodeID, err)
		}
	}
}
