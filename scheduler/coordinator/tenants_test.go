package coordinator

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }

// tenantOf returns one tenant of ListTenants.
func tenantOf(t *testing.T, cl eddyv1.ControlClient, id string) *eddyv1.TenantInfo {
	t.Helper()
	list, err := cl.ListTenants(callCtx(t), &eddyv1.ListTenantsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range list.GetTenants() {
		if ti.GetId() == id {
			return ti
		}
	}
	t.Fatalf("tenant %s not listed in %v", id, list)
	return nil
}

// TestTenants: create, list with usage, set quotas field by field, delete;
// each refusal with its code and line.
func TestTenants(t *testing.T) {
	c, cl := startOne(t, defaultOpts())
	ctx := callCtx(t)

	for _, id := range []string{"", "Acme", "-x", "a/b", strings.Repeat("a", 64)} {
		_, err := cl.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: id})
		wantCode(t, err, codes.InvalidArgument, "tenant id")
	}
	created, err := cl.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: "acme", Quota: &eddyv1.TenantQuota{Slots: u32(4), Jobs: u32(2)}})
	if err != nil || created.GetTenant().GetId() != "acme" || created.GetTenant().GetQuota().GetSlots() != 4 || created.GetTenant().GetCreatedUnixMs() == 0 {
		t.Fatalf("create: %v, %v", created, err)
	}
	_, err = cl.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: "acme"})
	wantCode(t, err, codes.AlreadyExists, "tenant acme already exists")
	_, err = cl.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: "big", Quota: &eddyv1.TenantQuota{CpuShare: u32(20000)}})
	wantCode(t, err, codes.InvalidArgument, "cpu_share=20000 is above 10000")

	// SetQuota changes the fields it sets, and only those; 0 clears one.
	set, err := cl.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: "acme", Quota: &eddyv1.TenantQuota{Jobs: u32(0), ModuleBytes: u64(1 << 20), CallTimeoutMs: u64(500), CpuShare: u32(3)}})
	if err != nil {
		t.Fatal(err)
	}
	want := &eddyv1.TenantQuota{Slots: u32(4), ModuleBytes: u64(1 << 20), CallTimeoutMs: u64(500), CpuShare: u32(3)}
	if got := set.GetTenant().GetQuota(); !proto.Equal(got, want) {
		t.Fatalf("quota after SetQuota: %v, want %v", got, want)
	}
	if got := tenantOf(t, cl, "acme").GetQuota(); !proto.Equal(got, want) {
		t.Fatalf("listed quota %v, want %v", got, want)
	}
	_, err = cl.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: "nobody", Quota: want})
	wantCode(t, err, codes.NotFound, "tenant nobody not found")

	// Usage: a module and a running job of acme.
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: "acme", Name: "enrich", Wasm: wasmModule("one")}); err != nil {
		t.Fatal(err)
	}
	w := newFakeWorker(t, "w1", 4, c.Addr())
	w.start()
	sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: "acme", SpecYaml: testSpec("j", 3, "enrich")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "acme's job to hold its slots", func() bool {
		u := tenantOf(t, cl, "acme").GetUsage()
		return u.GetSlots() == 3 && u.GetJobs() == 1 && u.GetModules() == 1
	})
	// The per-task bounds of the quota go with the deployment.
	testkit.Eventually(t, 10*time.Second, "acme's job to be deployed", func() bool { return w.lastDeployment(sub.GetJobId()) != nil })
	if l := w.lastDeployment(sub.GetJobId()).GetLimits(); l.GetCallTimeoutMs() != 500 || l.GetMemoryBytes() != 0 {
		t.Fatalf("deployment limits %v, want call_timeout_ms 500", l)
	}
	if share := w.lastDeployment(sub.GetJobId()).GetCpuShare(); share != 3 {
		t.Fatalf("deployment cpu_share %d, want the quota's 3", share)
	}
	if u := tenantOf(t, cl, "default").GetUsage(); u.GetSlots() != 0 || u.GetJobs() != 0 || u.GetModules() != 0 {
		t.Fatalf("default's usage %v", u)
	}

	// Delete: refused while a job lives, for the default tenant and for
	// an unknown one.
	_, err = cl.DeleteTenant(ctx, &eddyv1.DeleteTenantRequest{Id: "acme"})
	wantCode(t, err, codes.FailedPrecondition, "tenant acme has 1 jobs that have not ended: cancel them first")
	_, err = cl.DeleteTenant(ctx, &eddyv1.DeleteTenantRequest{Id: "default"})
	wantCode(t, err, codes.FailedPrecondition, "tenant default cannot be deleted")
	_, err = cl.DeleteTenant(ctx, &eddyv1.DeleteTenantRequest{Id: "nobody"})
	wantCode(t, err, codes.NotFound, "tenant nobody not found")
	if _, err := cl.CancelJob(ctx, &eddyv1.CancelJobRequest{Tenant: "acme", JobId: sub.GetJobId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteTenant(ctx, &eddyv1.DeleteTenantRequest{Id: "acme"}); err != nil {
		t.Fatalf("delete after cancel: %v", err)
	}
	_, err = cl.ListModules(ctx, &eddyv1.ListModulesRequest{Tenant: "acme"})
	wantCode(t, err, codes.NotFound, "acme")
}

// TestQuotaRefusals: each quota checked at a request refuses it with
// RESOURCE_EXHAUSTED and one line naming the quota, its value and the
// usage; another tenant is not bound by it.
func TestQuotaRefusals(t *testing.T) {
	_, cl := startOne(t, defaultOpts())
	ctx := callCtx(t)
	if _, err := cl.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: "acme", Quota: &eddyv1.TenantQuota{
		Modules: u32(2), ModuleBytes: u64(100), Jobs: u32(2), Slots: u32(4),
	}}); err != nil {
		t.Fatal(err)
	}
	upload := func(tenant, name string, wasm []byte) error {
		_, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: tenant, Name: name, Wasm: wasm})
		return err
	}
	// module_bytes, before validation: not Wasm at all, and still the
	// quota is what it hears about.
	err := upload("acme", "huge", []byte(strings.Repeat("x", 101)))
	wantCode(t, err, codes.ResourceExhausted, "tenant acme: module huge is 101 bytes, above the quota module_bytes=100")
	for _, name := range []string{"a", "b"} {
		if err := upload("acme", name, wasmModule(name)); err != nil {
			t.Fatal(err)
		}
	}
	// The same bytes again are the version registered: no new one counted.
	if err := upload("acme", "a", wasmModule("a")); err != nil {
		t.Fatalf("re-upload of the same bytes: %v", err)
	}
	err = upload("acme", "c", wasmModule("c"))
	wantCode(t, err, codes.ResourceExhausted, "tenant acme: quota modules=2 reached (2 module versions registered): ask an admin to raise it")
	if err := upload("default", "c", wasmModule(strings.Repeat("c", 200))); err != nil {
		t.Fatalf("the default tenant is bound by acme's quota: %v", err)
	}

	// slots: a job needing more slots than the quota at all is refused.
	_, err = cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: "acme", SpecYaml: testSpec("wide", 5, "a")})
	wantCode(t, err, codes.ResourceExhausted, "tenant acme: the job needs 5 slots, more than its quota slots=4")
	// jobs: no worker, so the jobs wait, and still count.
	for range 2 {
		if _, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: "acme", SpecYaml: testSpec("j", 1, "a")}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: "acme", SpecYaml: testSpec("j", 1, "a")})
	wantCode(t, err, codes.ResourceExhausted, "tenant acme: quota jobs=2 reached (2 jobs running): cancel one or ask an admin to raise it")
	if _, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: testSpec("j", 1, "c")}); err != nil {
		t.Fatalf("the default tenant is bound by acme's quota: %v", err)
	}
	// Raising the quota lets the next one in.
	if _, err := cl.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: "acme", Quota: &eddyv1.TenantQuota{Jobs: u32(3)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: "acme", SpecYaml: testSpec("j", 1, "a")}); err != nil {
		t.Fatalf("submit after raising the quota: %v", err)
	}
}

// TestTenantSlotsWait: a job that fits the cluster but not its tenant's
// free slots waits, its status says so, and it runs once the tenant's
// other job ends.
func TestTenantSlotsWait(t *testing.T) {
	c, cl := startOne(t, defaultOpts())
	ctx := callCtx(t)
	if _, err := cl.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: "acme", Quota: &eddyv1.TenantQuota{Slots: u32(4)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: "acme", Name: "op", Wasm: wasmModule("op")}); err != nil {
		t.Fatal(err)
	}
	w := newFakeWorker(t, "w1", 8, c.Addr())
	w.start()
	submit := func(parallelism int) string {
		sub, err := cl.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: "acme", SpecYaml: testSpec("j", parallelism, "op")})
		if err != nil {
			t.Fatal(err)
		}
		return sub.GetJobId()
	}
	status := func(id string) *eddyv1.JobStatusResponse {
		st, err := cl.JobStatus(callCtx(t), &eddyv1.JobStatusRequest{Tenant: "acme", JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := submit(3)
	testkit.Eventually(t, 10*time.Second, "the first job to run", func() bool {
		return status(first).GetJob().GetState() == eddyv1.JobState_JOB_STATE_RUNNING
	})
	second := submit(2)
	wantMsg := "waiting for tenant acme's slots: quota slots=4, 3 in use, the job needs 2"
	testkit.Eventually(t, 10*time.Second, "the second job to wait for acme's slots", func() bool {
		j := status(second).GetJob()
		return j.GetState() == eddyv1.JobState_JOB_STATE_WAITING_FOR_SLOTS && j.GetMessage() == wantMsg
	})
	if d := w.lastDeployment(second); d != nil {
		t.Fatalf("the waiting job was deployed: %v", d)
	}
	if _, err := cl.CancelJob(ctx, &eddyv1.CancelJobRequest{Tenant: "acme", JobId: first}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the second job to run", func() bool {
		return status(second).GetJob().GetState() == eddyv1.JobState_JOB_STATE_RUNNING
	})
}

// TestTenantsThroughFollower: tenant calls and quota refusals through a
// follower are the leader's, relayed with their codes and lines.
func TestTenantsThroughFollower(t *testing.T) {
	leader, _ := startOne(t, defaultOpts())
	fcfg := testConfig(t, testkit.Logger(t), "c2", defaultOpts())
	fcfg.Join = leader.Addr()
	// Its own module store: a forwarded upload is stored by the leader.
	follower := startCoordinator(t, fcfg, NewMemStore())
	if id, _, err := follower.WaitLeader(callCtx(t)); err != nil || id != "c1" {
		t.Fatalf("WaitLeader on the follower: %s %v", id, err)
	}
	f := control(t, follower.Addr())
	ctx := callCtx(t)
	if _, err := f.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: "acme", Quota: &eddyv1.TenantQuota{Modules: u32(1)}}); err != nil {
		t.Fatalf("create through the follower: %v", err)
	}
	_, err := f.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: "acme"})
	wantCode(t, err, codes.AlreadyExists, "tenant acme already exists")
	if _, err := f.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: "acme", Name: "a", Wasm: wasmModule("a")}); err != nil {
		t.Fatal(err)
	}
	_, err = f.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: "acme", Name: "b", Wasm: wasmModule("b")})
	wantCode(t, err, codes.ResourceExhausted, "tenant acme: quota modules=1 reached (1 module version registered)")
	if _, err := f.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: "acme", Quota: &eddyv1.TenantQuota{Modules: u32(0)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: "acme", Name: "b", Wasm: wasmModule("b")}); err != nil {
		t.Fatalf("upload after lifting the quota: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the follower's FSM to have acme's modules", func() bool {
		return follower.FSM().TenantUsage("acme").Modules == 2
	})
}
