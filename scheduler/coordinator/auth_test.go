package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/scheduler/auth"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// threeCoordinators starts a group of three on one shared module store;
// c1 leads.
func threeCoordinators(t *testing.T) []*Coordinator {
	t.Helper()
	logger := testkit.Logger(t)
	store := NewMemStore()
	opts := defaultOpts()
	cfg1 := testConfig(t, logger, "c1", opts)
	cfg1.Raft.Bootstrap = true
	c1 := startCoordinator(t, cfg1, store)
	testkit.Eventually(t, 10*time.Second, "c1 to lead", c1.IsLeader)
	members := []*Coordinator{c1}
	for _, id := range []string{"c2", "c3"} {
		cfg := testConfig(t, logger, id, opts)
		cfg.Join = c1.Addr()
		members = append(members, startCoordinator(t, cfg, store))
	}
	testkit.Eventually(t, 10*time.Second, "every member to know every member's address", func() bool {
		for _, m := range members {
			if len(m.FSM().Coordinators()) != 3 {
				return false
			}
		}
		return true
	})
	return members
}

// newToken makes a token through the admin API and returns its secret.
func newToken(t *testing.T, admin eddyv1.ControlClient, tenant string, role eddyv1.Role, ttl uint64) (string, *eddyv1.TokenInfo) {
	t.Helper()
	resp, err := admin.CreateToken(callCtx(t), &eddyv1.CreateTokenRequest{Tenant: tenant, Role: role, Description: "test", TtlSeconds: ttl})
	if err != nil {
		t.Fatalf("create %s token of %s: %v", role, tenant, err)
	}
	return resp.GetSecret(), resp.GetToken()
}

// TestTenantIsolation: through the leader and through a follower, a
// developer of tenant acme sees nothing of tenant beta's (every lookup is
// NOT_FOUND, as if absent), a viewer cannot mutate, a developer cannot do
// an admin's work, calls without a valid token are UNAUTHENTICATED, a
// revoked token is refused at once by a follower, and every mutating call
// is in the audit log with its outcome.
func TestTenantIsolation(t *testing.T) {
	members := threeCoordinators(t)
	c1 := members[0]
	ctx := callCtx(t)
	for _, id := range []string{"acme", "beta"} {
		if _, err := c1.propose(ctx, &fsm.CreateTenant{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	admin := control(t, c1.Addr())
	devA, devAInfo := newToken(t, admin, "acme", eddyv1.Role_ROLE_DEVELOPER, 0)
	viewA, _ := newToken(t, admin, "acme", eddyv1.Role_ROLE_VIEWER, 0)
	devB, _ := newToken(t, admin, "beta", eddyv1.Role_ROLE_DEVELOPER, 0)

	// Each tenant has a module and a job of its own.
	b := controlAs(t, c1.Addr(), devB)
	bMod, err := b.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "secret-sauce", Wasm: wasmModule("beta")})
	if err != nil || bMod.GetModule().GetTenant() != "beta" {
		t.Fatalf("beta upload: %v %v", bMod, err)
	}
	bJob, err := b.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("b", 1, "secret-sauce")})
	if err != nil || !strings.HasPrefix(bJob.GetJobId(), "beta-") && bJob.GetJobId() == "" {
		t.Fatalf("beta submit: %v %v", bJob, err)
	}
	// A developer's request naming another tenant acts on its own.
	a := controlAs(t, c1.Addr(), devA)
	if _, err := a.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("acme")}); err != nil {
		t.Fatal(err)
	}
	aJob, err := a.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("a", 1, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := c1.FSM().FindJob(aJob.GetJobId()); err != nil || j.Tenant != "acme" {
		t.Fatalf("acme's job is of tenant %q (%v)", j.Tenant, err)
	}

	for _, m := range members[:2] { // the leader, and a follower forwarding
		a := controlAs(t, m.Addr(), devA)
		where := "through " + m.cfg.NodeID
		t.Run("developer of acme "+where, func(t *testing.T) {
			jobs, err := a.ListJobs(ctx, &eddyv1.ListJobsRequest{})
			if err != nil || len(jobs.GetJobs()) != 1 || jobs.GetJobs()[0].GetJobId() != aJob.GetJobId() {
				t.Fatalf("list jobs: %v %v", jobs, err)
			}
			mods, err := a.ListModules(ctx, &eddyv1.ListModulesRequest{})
			if err != nil || len(mods.GetModules()) != 1 || mods.GetModules()[0].GetName() != "enrich" {
				t.Fatalf("list modules: %v %v", mods, err)
			}
			_, err = a.ListJobs(ctx, &eddyv1.ListJobsRequest{Tenant: "beta"})
			wantCode(t, err, codes.NotFound, `tenant "beta" not found`)
			_, err = a.JobStatus(ctx, &eddyv1.JobStatusRequest{JobId: bJob.GetJobId()})
			wantCode(t, err, codes.NotFound, "not found")
			_, err = a.JobStatus(ctx, &eddyv1.JobStatusRequest{Tenant: "beta", JobId: bJob.GetJobId()})
			wantCode(t, err, codes.NotFound, "not found")
			_, err = a.CancelJob(ctx, &eddyv1.CancelJobRequest{JobId: bJob.GetJobId()})
			wantCode(t, err, codes.NotFound, "not found")
			_, err = a.TriggerSavepoint(ctx, &eddyv1.TriggerSavepointRequest{JobId: bJob.GetJobId()})
			wantCode(t, err, codes.NotFound, "not found")
			_, err = a.GetModule(ctx, &eddyv1.GetModuleRequest{Name: "secret-sauce"})
			wantCode(t, err, codes.NotFound, "not found")
			_, err = a.GetModule(ctx, &eddyv1.GetModuleRequest{Tenant: "beta", Name: "secret-sauce"})
			wantCode(t, err, codes.NotFound, "not found")
			_, err = a.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("steal", 1, "secret-sauce")})
			wantCode(t, err, codes.NotFound, "secret-sauce not found in tenant acme")
			_, err = a.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("restore", 1, "enrich"), FromSavepoint: "tenants/beta/savepoints/" + bJob.GetJobId() + "-1"})
			wantCode(t, err, codes.NotFound, "not found in tenant acme")
			// An admin's calls.
			_, err = a.ClusterInfo(ctx, &eddyv1.ClusterInfoRequest{})
			wantCode(t, err, codes.PermissionDenied, "needs the admin role")
			_, err = a.ListAudit(ctx, &eddyv1.ListAuditRequest{})
			wantCode(t, err, codes.PermissionDenied, "needs the admin role")
			_, err = a.Leave(ctx, &eddyv1.LeaveRequest{NodeId: "c3"})
			wantCode(t, err, codes.PermissionDenied, "needs the admin role")
			_, err = a.CreateToken(ctx, &eddyv1.CreateTokenRequest{Role: eddyv1.Role_ROLE_ADMIN})
			wantCode(t, err, codes.InvalidArgument, "admin tokens belong to tenant default")
			_, err = a.CreateToken(ctx, &eddyv1.CreateTokenRequest{Tenant: "beta", Role: eddyv1.Role_ROLE_DEVELOPER})
			wantCode(t, err, codes.NotFound, `tenant "beta" not found`)
			toks, err := a.ListTokens(ctx, &eddyv1.ListTokensRequest{})
			if err != nil || len(toks.GetTokens()) != 2 {
				t.Fatalf("acme's tokens: %v %v", toks, err)
			}
			for _, tok := range toks.GetTokens() {
				if tok.GetTenant() != "acme" {
					t.Fatalf("a developer of acme lists token %s of %s", tok.GetId(), tok.GetTenant())
				}
			}
		})
		t.Run("viewer of acme "+where, func(t *testing.T) {
			v := controlAs(t, m.Addr(), viewA)
			if _, err := v.JobStatus(ctx, &eddyv1.JobStatusRequest{JobId: aJob.GetJobId()}); err != nil {
				t.Fatal(err)
			}
			_, err := v.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("v", 1, "enrich")})
			wantCode(t, err, codes.PermissionDenied, "viewer of tenant acme", "needs the developer role")
			_, err = v.CancelJob(ctx, &eddyv1.CancelJobRequest{JobId: aJob.GetJobId()})
			wantCode(t, err, codes.PermissionDenied, "needs the developer role")
			_, err = v.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "x", Wasm: wasmModule("x")})
			wantCode(t, err, codes.PermissionDenied, "needs the developer role")
			_, err = v.CreateToken(ctx, &eddyv1.CreateTokenRequest{Role: eddyv1.Role_ROLE_VIEWER})
			wantCode(t, err, codes.PermissionDenied, "needs the developer role")
		})
		t.Run("no valid token "+where, func(t *testing.T) {
			forged := devA[:len(devA)-1] + "0"
			if forged == devA {
				forged = devA[:len(devA)-1] + "1"
			}
			for name, tok := range map[string]string{"none": "", "garbage": "hunter2", "wrong secret": forged} {
				_, err := controlAs(t, m.Addr(), tok).ListJobs(ctx, &eddyv1.ListJobsRequest{})
				wantCode(t, err, codes.Unauthenticated)
				if tok != "" && strings.Contains(err.Error(), tok) {
					t.Fatalf("%s: the error quotes the token: %v", name, err)
				}
			}
		})
	}

	// Revocation through the leader is seen at once through a follower.
	c3 := controlAs(t, members[2].Addr(), devA)
	if _, err := c3.ListJobs(ctx, &eddyv1.ListJobsRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeToken(ctx, &eddyv1.RevokeTokenRequest{Id: devAInfo.GetId()}); err != nil {
		t.Fatal(err)
	}
	_, err = c3.ListJobs(ctx, &eddyv1.ListJobsRequest{})
	wantCode(t, err, codes.Unauthenticated, "revoked")
	// A developer cannot revoke another tenant's token, nor an admin's.
	_, err = b.RevokeToken(ctx, &eddyv1.RevokeTokenRequest{Id: devAInfo.GetId()})
	wantCode(t, err, codes.NotFound, "not found")

	// A token that expires stops working.
	short, _ := newToken(t, admin, "acme", eddyv1.Role_ROLE_VIEWER, 1)
	if _, err := controlAs(t, members[1].Addr(), short).WhoAmI(ctx, &eddyv1.WhoAmIRequest{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the one-second token to expire", func() bool {
		_, err := controlAs(t, members[1].Addr(), short).WhoAmI(ctx, &eddyv1.WhoAmIRequest{})
		return err != nil && strings.Contains(err.Error(), "expired")
	})

	// The audit log: who, what, outcome, for mutating calls only.
	log, err := admin.ListAudit(ctx, &eddyv1.ListAuditRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var sawSubmit, sawDenied, sawRevoke bool
	for _, e := range log.GetEntries() {
		switch {
		case e.GetMethod() == "SubmitJob" && e.GetTenant() == "beta" && e.GetOutcome() == "ok" && e.GetRole() == eddyv1.Role_ROLE_DEVELOPER:
			sawSubmit = true
		case e.GetMethod() == "SubmitJob" && e.GetTenant() == "acme" && e.GetRole() == eddyv1.Role_ROLE_VIEWER && strings.HasPrefix(e.GetOutcome(), "PermissionDenied"):
			sawDenied = true
		case e.GetMethod() == "RevokeToken" && strings.Contains(e.GetTarget(), devAInfo.GetId()) && e.GetOutcome() == "ok":
			sawRevoke = true
		case e.GetMethod() == "ListJobs" || e.GetMethod() == "JobStatus":
			t.Fatalf("a read is in the audit log: %v", e)
		}
	}
	if !sawSubmit || !sawDenied || !sawRevoke {
		t.Fatalf("audit log misses entries (submit %v, denied %v, revoke %v): %v", sawSubmit, sawDenied, sawRevoke, log.GetEntries())
	}
	beta, err := admin.ListAudit(ctx, &eddyv1.ListAuditRequest{Tenant: "beta", Limit: 1000})
	if err != nil || len(beta.GetEntries()) == 0 {
		t.Fatalf("beta's audit: %v", err)
	}
	for _, e := range beta.GetEntries() {
		if e.GetTenant() != "beta" {
			t.Fatalf("tenant filter let through %v", e)
		}
	}
}

// TestWorkerFetchesOnlyItsModules: FetchModule gives a worker the modules
// of the jobs placed on it, and nothing else, by sha256 or otherwise.
func TestWorkerFetchesOnlyItsModules(t *testing.T) {
	c, admin := startOne(t, defaultOpts())
	ctx := callCtx(t)
	if _, err := c.propose(ctx, &fsm.CreateTenant{ID: "beta"}); err != nil {
		t.Fatal(err)
	}
	placed, err := admin.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: "enrich", Wasm: wasmModule("placed")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: "beta", Name: "other", Wasm: wasmModule("other")})
	if err != nil {
		t.Fatal(err)
	}
	w := newFakeWorker(t, "w1", 2, c.Addr())
	w.start()
	job, err := admin.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("j", 1, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, job.GetJobId(), eddyv1.JobState_JOB_STATE_RUNNING, 10*time.Second, nil)
	fetch := func(workerID, instance, jobID, sha string) error {
		return w.call(ctx, func(ctx context.Context, cl eddyv1.ClusterClient) error {
			_, err := cl.FetchModule(ctx, &eddyv1.FetchModuleRequest{WorkerId: workerID, InstanceId: instance, JobId: jobID, Sha256: sha})
			return err
		})
	}
	if err := fetch(w.id, w.instance, job.GetJobId(), placed.GetModule().GetSha256()); err != nil {
		t.Fatalf("the worker's own module: %v", err)
	}
	wantCode(t, fetch(w.id, w.instance, job.GetJobId(), other.GetModule().GetSha256()), codes.NotFound, "not found")
	wantCode(t, fetch(w.id, "another-instance", job.GetJobId(), placed.GetModule().GetSha256()), codes.NotFound, "not found")
	wantCode(t, fetch("w9", w.instance, job.GetJobId(), placed.GetModule().GetSha256()), codes.NotFound, "not found")
}

// TestEveryMethodRefusesTheWrongCaller calls every method of Control (as
// the service descriptor lists them, so a method added later is covered)
// with no token, a viewer's and a developer's, and checks that each is
// refused to every caller whose role is below what auth.Methods asks.
func TestEveryMethodRefusesTheWrongCaller(t *testing.T) {
	c, admin := startOne(t, defaultOpts())
	viewer, _ := newToken(t, admin, "default", eddyv1.Role_ROLE_VIEWER, 0)
	developer, _ := newToken(t, admin, "default", eddyv1.Role_ROLE_DEVELOPER, 0)
	callers := []struct {
		name, token string
		role        fsm.Role
	}{{"no token", "", ""}, {"viewer", viewer, fsm.RoleViewer}, {"developer", developer, fsm.RoleDeveloper}}
	for _, m := range eddyv1.Control_ServiceDesc.Methods {
		method := "/" + eddyv1.Control_ServiceDesc.ServiceName + "/" + m.MethodName
		_, access := auth.For(method)
		for _, caller := range callers {
			if caller.role.AtLeast(access.Role) {
				continue
			}
			t.Run(m.MethodName+"/"+caller.name, func(t *testing.T) {
				opts := rpc.DialOptions()
				if caller.token != "" {
					opts = append(opts, rpc.WithToken(caller.token))
				}
				cc, err := grpc.NewClient(c.Addr(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				// An empty message decodes as any request type.
				err = cc.Invoke(callCtx(t), method, &emptypb.Empty{}, &emptypb.Empty{})
				want := codes.PermissionDenied
				if caller.token == "" {
					want = codes.Unauthenticated
				}
				wantCode(t, err, want)
			})
		}
	}
}
