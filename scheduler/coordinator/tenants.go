package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// Tenants and their quotas: the admin's RPCs, and the checks that refuse a
// request beyond a quota. Placement (decide.go) and checkpoints
// (checkpointio.go) enforce the quotas of resources spent later.

func (s *controlServer) CreateTenant(ctx context.Context, req *eddyv1.CreateTenantRequest) (*eddyv1.CreateTenantResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_CreateTenant_FullMethodName, req,
		func() *eddyv1.CreateTenantResponse { return new(eddyv1.CreateTenantResponse) }, s.c.createTenant)
}

func (s *controlServer) ListTenants(ctx context.Context, req *eddyv1.ListTenantsRequest) (*eddyv1.ListTenantsResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_ListTenants_FullMethodName, req,
		func() *eddyv1.ListTenantsResponse { return new(eddyv1.ListTenantsResponse) }, s.c.listTenants)
}

func (s *controlServer) DeleteTenant(ctx context.Context, req *eddyv1.DeleteTenantRequest) (*eddyv1.DeleteTenantResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_DeleteTenant_FullMethodName, req,
		func() *eddyv1.DeleteTenantResponse { return new(eddyv1.DeleteTenantResponse) }, s.c.deleteTenant)
}

func (s *controlServer) SetQuota(ctx context.Context, req *eddyv1.SetQuotaRequest) (*eddyv1.SetQuotaResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_SetQuota_FullMethodName, req,
		func() *eddyv1.SetQuotaResponse { return new(eddyv1.SetQuotaResponse) }, s.c.setQuota)
}

// checkTenantID is fsm.CheckTenantID as one line for a user.
func checkTenantID(id string) error {
	if err := fsm.CheckTenantID(id); err != nil {
		return invalid("%s", strings.TrimSuffix(err.Error(), ": "+fsm.ErrMalformed.Error()))
	}
	return nil
}

func (c *Coordinator) createTenant(ctx context.Context, _ *term, req *eddyv1.CreateTenantRequest) (*eddyv1.CreateTenantResponse, error) {
	id := req.GetId()
	if err := checkTenantID(id); err != nil {
		return nil, err
	}
	q, err := mergeQuota(fsm.Quota{}, req.GetQuota())
	if err != nil {
		return nil, err
	}
	res, err := c.propose(ctx, &fsm.CreateTenant{ID: id, Quota: q})
	if errors.Is(err, fsm.ErrTenantExists) {
		return nil, status.Errorf(codes.AlreadyExists, "tenant %s already exists", id)
	}
	if err != nil {
		return nil, err
	}
	t := res.(fsm.Tenant)
	c.log.Info("tenant created", "tenant", t.ID)
	return &eddyv1.CreateTenantResponse{Tenant: c.tenantInfo(t)}, nil
}

func (c *Coordinator) listTenants(_ context.Context, _ *term, _ *eddyv1.ListTenantsRequest) (*eddyv1.ListTenantsResponse, error) {
	resp := &eddyv1.ListTenantsResponse{}
	for _, t := range c.fsm.Tenants() {
		resp.Tenants = append(resp.Tenants, c.tenantInfo(t))
	}
	return resp, nil
}

func (c *Coordinator) deleteTenant(ctx context.Context, _ *term, req *eddyv1.DeleteTenantRequest) (*eddyv1.DeleteTenantResponse, error) {
	id := req.GetId()
	if err := checkTenantID(id); err != nil {
		return nil, err
	}
	if id == fsm.DefaultTenant {
		return nil, status.Errorf(codes.FailedPrecondition, "tenant %s cannot be deleted", id)
	}
	_, err := c.propose(ctx, &fsm.DeleteTenant{ID: id})
	switch {
	case errors.Is(err, fsm.ErrTenantNotFound):
		return nil, notFound("tenant %s not found", id)
	case errors.Is(err, fsm.ErrTenantInUse):
		n := c.fsm.TenantUsage(id).Jobs
		return nil, status.Errorf(codes.FailedPrecondition, "tenant %s has %d jobs that have not ended: cancel them first", id, n)
	case err != nil:
		return nil, err
	}
	c.log.Info("tenant deleted", "tenant", id)
	return &eddyv1.DeleteTenantResponse{}, nil
}

func (c *Coordinator) setQuota(ctx context.Context, _ *term, req *eddyv1.SetQuotaRequest) (*eddyv1.SetQuotaResponse, error) {
	id := req.GetTenant()
	if err := checkTenantID(id); err != nil {
		return nil, err
	}
	t, err := c.fsm.Tenant(id)
	if err != nil {
		return nil, notFound("tenant %s not found", id)
	}
	// Merged here, not in the FSM: SetQuota replaces the whole quota, and a
	// quota changed concurrently by another admin is last-writer-wins
	// either way.
	q, err := mergeQuota(t.Quota, req.GetQuota())
	if err != nil {
		return nil, err
	}
	res, err := c.propose(ctx, &fsm.SetQuota{Tenant: id, Quota: q})
	if errors.Is(err, fsm.ErrTenantNotFound) {
		return nil, notFound("tenant %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	t = res.(fsm.Tenant)
	c.log.Info("tenant quota set", "tenant", id, "quota", fmt.Sprintf("%+v", t.Quota))
	return &eddyv1.SetQuotaResponse{Tenant: c.tenantInfo(t)}, nil
}

func (c *Coordinator) tenantInfo(t fsm.Tenant) *eddyv1.TenantInfo {
	u := c.fsm.TenantUsage(t.ID)
	return &eddyv1.TenantInfo{
		Id:            t.ID,
		CreatedUnixMs: t.Created.UnixMilli(),
		Quota:         quotaToProto(t.Quota),
		Usage: &eddyv1.TenantUsage{
			Slots:           uint32(u.Slots),
			Jobs:            uint32(u.Jobs),
			Modules:         uint32(u.Modules),
			CheckpointBytes: uint64(max(0, u.CheckpointBytes)),
		},
	}
}

// quotaToProto sets the fields that bound something: an absent field is
// no limit.
func quotaToProto(q fsm.Quota) *eddyv1.TenantQuota {
	p := &eddyv1.TenantQuota{}
	set32 := func(dst **uint32, v int) {
		if v > 0 {
			x := uint32(v)
			*dst = &x
		}
	}
	set64 := func(dst **uint64, v int64) {
		if v > 0 {
			x := uint64(v)
			*dst = &x
		}
	}
	set32(&p.Slots, q.Slots)
	set32(&p.Jobs, q.Jobs)
	set32(&p.Modules, q.Modules)
	set64(&p.ModuleBytes, q.ModuleBytes)
	set64(&p.MemoryBytes, q.MemoryBytes)
	set64(&p.CallTimeoutMs, q.CallTimeoutMs)
	set64(&p.EmitBytes, q.EmitBytes)
	set64(&p.EmitRecords, q.EmitRecords)
	set64(&p.StateBytes, q.StateBytes)
	set64(&p.CheckpointBytes, q.CheckpointBytes)
	set32(&p.CpuShare, q.CPUShare)
	return p
}

// maxQuotaValue keeps every quota an int64 (and int) without overflow; a
// quota of 2^62 bytes bounds nothing anyway.
const maxQuotaValue = 1 << 62

// mergeQuota returns q with the fields p sets replaced (0: no limit).
func mergeQuota(q fsm.Quota, p *eddyv1.TenantQuota) (fsm.Quota, error) {
	if p == nil {
		return q, nil
	}
	var bad error
	get := func(name string, v uint64) int64 {
		if v > maxQuotaValue && bad == nil {
			bad = invalid("quota %s=%d is too large", name, v)
		}
		return int64(min(v, maxQuotaValue))
	}
	if p.Slots != nil {
		q.Slots = int(get("slots", uint64(p.GetSlots())))
	}
	if p.Jobs != nil {
		q.Jobs = int(get("jobs", uint64(p.GetJobs())))
	}
	if p.Modules != nil {
		q.Modules = int(get("modules", uint64(p.GetModules())))
	}
	if p.ModuleBytes != nil {
		q.ModuleBytes = get("module_bytes", p.GetModuleBytes())
	}
	if p.MemoryBytes != nil {
		q.MemoryBytes = get("memory_bytes", p.GetMemoryBytes())
	}
	if p.CallTimeoutMs != nil {
		q.CallTimeoutMs = get("call_timeout_ms", p.GetCallTimeoutMs())
	}
	if p.EmitBytes != nil {
		q.EmitBytes = get("emit_bytes", p.GetEmitBytes())
	}
	if p.EmitRecords != nil {
		q.EmitRecords = get("emit_records", p.GetEmitRecords())
	}
	if p.StateBytes != nil {
		q.StateBytes = get("state_bytes", p.GetStateBytes())
	}
	if p.CheckpointBytes != nil {
		q.CheckpointBytes = get("checkpoint_bytes", p.GetCheckpointBytes())
	}
	if p.CpuShare != nil {
		if p.GetCpuShare() > fsm.MaxCPUShare {
			return q, invalid("quota cpu_share=%d is above %d", p.GetCpuShare(), fsm.MaxCPUShare)
		}
		q.CPUShare = int(p.GetCpuShare())
	}
	return q, bad
}

// quotaReached is the refusal of a request beyond a quota: one line naming
// the quota, its value and the usage, and what to do.
func quotaReached(tenant, quota string, value int64, usage, advice string) error {
	return status.Errorf(codes.ResourceExhausted, "tenant %s: quota %s=%d reached (%s): %s", tenant, quota, value, usage, advice)
}

// quotaStatus is the FSM's refusal of a count beyond a quota (a request
// that passed the leader's check at the same time as another).
func quotaStatus(err error) error {
	var qe *fsm.QuotaError
	if !errors.As(err, &qe) {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return quotaReached(qe.Tenant, qe.Quota, int64(qe.Limit), fmt.Sprintf("%d in use", qe.Used), "ask an admin to raise it")
}

// checkSubmitQuotas refuses a job the tenant's quota will never let run
// (more tasks than its slots) or that would be one job too many.
func (c *Coordinator) checkSubmitQuotas(tenant, requestID string, tasks int) error {
	t, err := c.fsm.Tenant(tenant)
	if err != nil {
		return notFound("tenant %q not found", tenant)
	}
	if requestID != "" {
		for _, j := range c.fsm.Jobs(tenant) {
			if j.RequestID == requestID {
				return nil // a retry: it is answered with that job, as before
			}
		}
	}
	q := t.Quota
	if q.Slots > 0 && tasks > q.Slots {
		return status.Errorf(codes.ResourceExhausted,
			"tenant %s: the job needs %d slots, more than its quota slots=%d: lower its parallelism or ask an admin to raise the quota", tenant, tasks, q.Slots)
	}
	if q.Jobs > 0 {
		if n := c.fsm.TenantUsage(tenant).Jobs; n >= q.Jobs {
			return quotaReached(tenant, "jobs", int64(q.Jobs), plural(n, "job")+" running", "cancel one or ask an admin to raise it")
		}
	}
	return nil
}

// checkModuleQuotas refuses a module upload beyond the tenant's module
// count or size, before anything is validated or stored.
func (c *Coordinator) checkModuleQuotas(tenant, name string, size int) error {
	t, err := c.fsm.Tenant(tenant)
	if err != nil {
		return notFound("tenant %q not found", tenant)
	}
	q := t.Quota
	if q.ModuleBytes > 0 && int64(size) > q.ModuleBytes {
		return status.Errorf(codes.ResourceExhausted, "tenant %s: module %s is %d bytes, above the quota module_bytes=%d: make it smaller or ask an admin to raise the quota",
			tenant, name, size, q.ModuleBytes)
	}
	if q.Modules > 0 {
		if n := c.fsm.TenantUsage(tenant).Modules; n >= q.Modules {
			return quotaReached(tenant, "modules", int64(q.Modules), plural(n, "module version")+" registered", "ask an admin to raise it")
		}
	}
	return nil
}

// checkSavepointQuota refuses a savepoint while the tenant's checkpoint
// storage is at its quota.
func (c *Coordinator) checkSavepointQuota(tenant string) error {
	t, err := c.fsm.Tenant(tenant)
	if err != nil {
		return notFound("tenant %q not found", tenant)
	}
	q := t.Quota
	if q.CheckpointBytes <= 0 {
		return nil
	}
	if used := c.fsm.TenantUsage(tenant).CheckpointBytes; used >= q.CheckpointBytes {
		return quotaReached(tenant, "checkpoint_bytes", q.CheckpointBytes, fmt.Sprintf("%d bytes stored", used), "wait for checkpoint retention to free space or ask an admin to raise it")
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// checkpointQuotaOutcome decides what a completed checkpoint of job j
// becomes under its tenant's quota q, the tenant storing used bytes now:
//   - keyed state above state_bytes fails the job (the checkpoint's full
//     size is the job's keyed state, summed over its tasks: a job measured
//     where every task reports it, without a second channel);
//   - a checkpoint that would take the tenant's checkpoint storage above
//     checkpoint_bytes, after retention dropped what it supersedes, fails
//     (and its files are deleted); the job keeps running;
//   - otherwise the checkpoint completes (done, unchanged).
func checkpointQuotaOutcome(j *fsm.Job, q fsm.Quota, used int64, done *fsm.CheckpointCompleted) fsm.Command {
	if q.StateBytes > 0 && done.FullSize > q.StateBytes {
		return &fsm.FailJob{JobID: j.ID, Message: fmt.Sprintf("job %s: keyed state %s exceeds tenant %s's quota state_bytes=%d",
			j.ID, humanBytes(done.FullSize), j.Tenant, q.StateBytes)}
	}
	if q.CheckpointBytes <= 0 {
		return done
	}
	after := *j
	c := fsm.Checkpoint{ID: done.ID, FullSize: done.FullSize, IncrementalSize: done.IncrementalSize}
	if done.Savepoint {
		after.Savepoints = append(slices.Clone(j.Savepoints), c)
	} else {
		after.Checkpoints = append(slices.Clone(j.Checkpoints), c)
		if over := len(after.Checkpoints) - max(done.Retain, 1); over > 0 {
			after.Checkpoints = after.Checkpoints[over:]
		}
	}
	projected := used - j.StoredCheckpointBytes() + after.StoredCheckpointBytes()
	if projected <= q.CheckpointBytes {
		return done
	}
	kind := "checkpoint"
	if done.Savepoint {
		kind = "savepoint"
	}
	return &fsm.CheckpointFailed{JobID: j.ID, ID: done.ID, Reason: fmt.Sprintf(
		"tenant %s: quota checkpoint_bytes=%d reached (%d bytes stored with this %s): the job keeps running; ask an admin to raise it",
		j.Tenant, q.CheckpointBytes, projected, kind)}
}

// humanBytes writes n in binary units: "1.2 GiB", "512 B".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// setTaskLimits gives each deployment the per-task bounds of its tenant's
// quota, which the worker applies to the tasks' instances and state, and
// its CPU weight.
func setTaskLimits(ds []*eddyv1.Deployment, quotas map[string]fsm.Quota) {
	for _, d := range ds {
		q := quotas[d.GetTenant()]
		d.CpuShare = uint32(q.Weight())
		l := &eddyv1.TaskLimits{
			MemoryBytes:   uint64(max(q.MemoryBytes, 0)),
			CallTimeoutMs: uint64(max(q.CallTimeoutMs, 0)),
			EmitBytes:     uint64(max(q.EmitBytes, 0)),
			EmitRecords:   uint64(max(q.EmitRecords, 0)),
			StateBytes:    uint64(max(q.StateBytes, 0)),
		}
		if l.MemoryBytes|l.CallTimeoutMs|l.EmitBytes|l.EmitRecords|l.StateBytes != 0 {
			d.Limits = l
		}
	}
}
