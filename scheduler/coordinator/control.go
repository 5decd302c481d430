package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
	"github.com/eddy-stream/eddy/storage"
)

// controlServer serves Control: locally on the leader, by forwarding
// elsewhere (see serve).
type controlServer struct {
	eddyv1.UnimplementedControlServer
	c *Coordinator
}

func (s *controlServer) UploadModule(ctx context.Context, req *eddyv1.UploadModuleRequest) (*eddyv1.UploadModuleResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_UploadModule_FullMethodName, req,
		func() *eddyv1.UploadModuleResponse { return new(eddyv1.UploadModuleResponse) }, s.c.uploadModule)
}

func (s *controlServer) ListModules(ctx context.Context, req *eddyv1.ListModulesRequest) (*eddyv1.ListModulesResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_ListModules_FullMethodName, req,
		func() *eddyv1.ListModulesResponse { return new(eddyv1.ListModulesResponse) }, s.c.listModules)
}

func (s *controlServer) GetModule(ctx context.Context, req *eddyv1.GetModuleRequest) (*eddyv1.GetModuleResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_GetModule_FullMethodName, req,
		func() *eddyv1.GetModuleResponse { return new(eddyv1.GetModuleResponse) }, s.c.getModule)
}

func (s *controlServer) SubmitJob(ctx context.Context, req *eddyv1.SubmitJobRequest) (*eddyv1.SubmitJobResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_SubmitJob_FullMethodName, req,
		func() *eddyv1.SubmitJobResponse { return new(eddyv1.SubmitJobResponse) }, s.c.submitJob)
}

func (s *controlServer) ListJobs(ctx context.Context, req *eddyv1.ListJobsRequest) (*eddyv1.ListJobsResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_ListJobs_FullMethodName, req,
		func() *eddyv1.ListJobsResponse { return new(eddyv1.ListJobsResponse) }, s.c.listJobs)
}

func (s *controlServer) JobStatus(ctx context.Context, req *eddyv1.JobStatusRequest) (*eddyv1.JobStatusResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_JobStatus_FullMethodName, req,
		func() *eddyv1.JobStatusResponse { return new(eddyv1.JobStatusResponse) }, s.c.jobStatus)
}

func (s *controlServer) CancelJob(ctx context.Context, req *eddyv1.CancelJobRequest) (*eddyv1.CancelJobResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_CancelJob_FullMethodName, req,
		func() *eddyv1.CancelJobResponse { return new(eddyv1.CancelJobResponse) }, s.c.cancelJob)
}

func (s *controlServer) TriggerSavepoint(ctx context.Context, req *eddyv1.TriggerSavepointRequest) (*eddyv1.TriggerSavepointResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_TriggerSavepoint_FullMethodName, req,
		func() *eddyv1.TriggerSavepointResponse { return new(eddyv1.TriggerSavepointResponse) }, s.c.triggerSavepoint)
}

func (s *controlServer) JobLogs(ctx context.Context, req *eddyv1.JobLogsRequest) (*eddyv1.JobLogsResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_JobLogs_FullMethodName, req,
		func() *eddyv1.JobLogsResponse { return new(eddyv1.JobLogsResponse) }, s.c.jobLogs)
}

func (s *controlServer) Join(ctx context.Context, req *eddyv1.JoinRequest) (*eddyv1.JoinResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_Join_FullMethodName, req,
		func() *eddyv1.JoinResponse { return new(eddyv1.JoinResponse) }, s.c.joinMember)
}

func (s *controlServer) Leave(ctx context.Context, req *eddyv1.LeaveRequest) (*eddyv1.LeaveResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_Leave_FullMethodName, req,
		func() *eddyv1.LeaveResponse { return new(eddyv1.LeaveResponse) }, s.c.leaveMember)
}

func (s *controlServer) ClusterInfo(ctx context.Context, req *eddyv1.ClusterInfoRequest) (*eddyv1.ClusterInfoResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_ClusterInfo_FullMethodName, req,
		func() *eddyv1.ClusterInfoResponse { return new(eddyv1.ClusterInfoResponse) }, s.c.clusterInfo)
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func notFound(format string, args ...any) error {
	return status.Errorf(codes.NotFound, format, args...)
}

const maxModuleNameLen = 128

// checkModuleName: [a-z0-9][a-z0-9._-]*, at most 128 bytes. No '@', which
// separates the version in a reference, no '/', which marks a path.
func checkModuleName(name string) error {
	if name == "" {
		return errors.New("a module needs a name (--name)")
	}
	if len(name) > maxModuleNameLen {
		return fmt.Errorf("module name %q is longer than %d characters", name, maxModuleNameLen)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || i > 0 && (ch == '.' || ch == '_' || ch == '-')) {
			return fmt.Errorf("module name %q: use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit", name)
		}
	}
	return nil
}

func moduleInfo(m fsm.Module) *eddyv1.ModuleInfo {
	return &eddyv1.ModuleInfo{
		Tenant:        m.Tenant,
		Name:          m.Name,
		Version:       uint32(m.Version),
		Sha256:        m.SHA256,
		Size:          uint64(m.Size),
		CreatedUnixMs: m.Created.UnixMilli(),
	}
}

func (c *Coordinator) uploadModule(ctx context.Context, _ *term, req *eddyv1.UploadModuleRequest) (*eddyv1.UploadModuleResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := checkModuleName(name); err != nil {
		return nil, invalid("%v", err)
	}
	if len(req.GetWasm()) == 0 {
		return nil, invalid("module %s is empty", name)
	}
	sum := sha256.Sum256(req.GetWasm())
	digest := hex.EncodeToString(sum[:])
	// The same bytes as a version already registered: that version, with
	// nothing validated, stored or committed again.
	for _, m := range c.fsm.Modules(tenant) {
		if m.Name == name && m.SHA256 == digest {
			return &eddyv1.UploadModuleResponse{Module: moduleInfo(m), AlreadyExists: true}, nil
		}
	}
	if err := c.checkModuleQuotas(tenant, name, len(req.GetWasm())); err != nil {
		return nil, err
	}
	if err := c.deps.Validator(ctx, name, req.GetWasm()); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, invalid("%s", oneLine(err.Error()))
	}
	if err := c.deps.Store.Put(ctx, ModuleKey(tenant, digest), req.GetWasm()); err != nil {
		return nil, status.Errorf(codes.Unavailable, "store module %s: %v", name, err)
	}
	before := 0
	if m, err := c.fsm.Module(tenant, name, 0); err == nil {
		before = m.Version
	}
	res, err := c.propose(ctx, &fsm.RegisterModule{Tenant: tenant, Name: name, SHA256: digest, Size: int64(len(req.GetWasm()))})
	if err != nil {
		return nil, err
	}
	m := res.(fsm.Module)
	c.log.Info("module registered", "tenant", tenant, "module", m.Ref(), "sha256", digest)
	return &eddyv1.UploadModuleResponse{Module: moduleInfo(m), AlreadyExists: m.Version <= before}, nil
}

// oneLine keeps the first line of a message: a user sees one clear line.
func oneLine(msg string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	return first
}

func (c *Coordinator) listModules(ctx context.Context, _ *term, req *eddyv1.ListModulesRequest) (*eddyv1.ListModulesResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	resp := &eddyv1.ListModulesResponse{}
	for _, m := range c.fsm.Modules(tenant) {
		if req.GetName() == "" || m.Name == req.GetName() {
			resp.Modules = append(resp.Modules, moduleInfo(m))
		}
	}
	return resp, nil
}

func (c *Coordinator) getModule(ctx context.Context, _ *term, req *eddyv1.GetModuleRequest) (*eddyv1.GetModuleResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	m, err := c.fsm.Module(tenant, req.GetName(), int(req.GetVersion()))
	if err != nil {
		return nil, notFound("%s", moduleNotFound(c.fsm, tenant, req.GetName(), int(req.GetVersion())))
	}
	resp := &eddyv1.GetModuleResponse{Module: moduleInfo(m)}
	if req.GetMetadataOnly() {
		return resp, nil
	}
	data, err := c.deps.Store.Get(ctx, ModuleKey(tenant, m.SHA256))
	if err != nil {
		if errors.Is(err, ErrBlobNotFound) {
			return nil, status.Errorf(codes.DataLoss, "module %s is registered but its bytes are missing from the module store", m.Ref())
		}
		return nil, status.Errorf(codes.Unavailable, "read module %s: %v", m.Ref(), err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != m.SHA256 {
		return nil, status.Errorf(codes.DataLoss, "module %s: the stored bytes do not match sha256 %s", m.Ref(), m.SHA256)
	}
	resp.Wasm = data
	return resp, nil
}

// moduleNotFound says which module reference names nothing, and what
// exists instead.
func moduleNotFound(f *fsm.FSM, tenant, name string, version int) string {
	latest, err := f.Module(tenant, name, 0)
	switch {
	case err != nil:
		return fmt.Sprintf("module %s not found in tenant %s: upload it with eddy module upload FILE --name %s", name, tenant, name)
	default:
		return fmt.Sprintf("module %s@%d not found in tenant %s (the latest version is %d)", name, version, tenant, latest.Version)
	}
}

func (c *Coordinator) submitJob(ctx context.Context, _ *term, req *eddyv1.SubmitJobRequest) (*eddyv1.SubmitJobResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	if len(req.GetSpecYaml()) == 0 {
		return nil, invalid("the job spec is empty")
	}
	spec, err := jobspec.Parse(req.GetSpecYaml(), req.GetSpecName())
	if err != nil {
		return nil, invalid("%s", oneLine(err.Error()))
	}
	tasks, err := c.deps.Planner(req.GetSpecYaml())
	if err != nil {
		return nil, invalid("%s", oneLine(err.Error()))
	}
	if len(tasks) == 0 {
		return nil, invalid("the job has no tasks")
	}
	if err := c.checkSubmitQuotas(tenant, req.GetRequestId(), len(tasks)); err != nil {
		return nil, err
	}
	modules, err := resolveModules(c.fsm, tenant, spec)
	if err != nil {
		return nil, err
	}
	cfg, err := checkpointConfigOf(req.GetSpecYaml(), c.checkpointStorage)
	if err != nil {
		return nil, invalid("%s", oneLine(err.Error()))
	}
	storageURL := cfg.storage
	fromSavepoint, savepointID, err := c.checkSavepoint(ctx, tenant, storageURL, req.GetFromSavepoint())
	if err != nil {
		return nil, err
	}
	name := spec.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(req.GetSpecName()), filepath.Ext(req.GetSpecName()))
	}
	if name == "" || name == "." {
		name = "job"
	}
	res, err := c.propose(ctx, &fsm.SubmitJob{
		Numbered:          true,
		Tenant:            tenant,
		Name:              name,
		Spec:              req.GetSpecYaml(),
		Tasks:             tasks,
		Modules:           modules,
		RequestID:         req.GetRequestId(),
		FromSavepoint:     fromSavepoint,
		CheckpointSeq:     savepointID,
		CheckpointStorage: storageURL,
	})
	if err != nil {
		return nil, err
	}
	j := res.(fsm.Job)
	c.log.Info("job submitted", "tenant", tenant, "job", j.ID, "name", j.Name, "tasks", len(j.Tasks))
	return &eddyv1.SubmitJobResponse{JobId: j.ID}, nil
}

// checkSavepoint resolves the from_savepoint of a submission to the key of
// the checkpoint manifest to restore from ("" for none), checks that it is
// one of the tenant's and reads it from the job's checkpoint storage, and
// returns its checkpoint id too.
func (c *Coordinator) checkSavepoint(ctx context.Context, tenant, storageURL, path string) (string, uint64, error) {
	if path == "" {
		return "", 0, nil
	}
	key, err := checkpoint.ParseSavepointPath(path)
	if err != nil {
		return "", 0, invalid("%v", err)
	}
	if !strings.HasPrefix(key, checkpoint.TenantRoot(tenant)+"/") {
		// Another tenant's savepoint is absent, as anything of another
		// tenant is.
		return "", 0, notFound("savepoint %s not found in tenant %s (a savepoint path starts with tenants/%s/)", path, tenant, tenant)
	}
	st, err := c.stores.get(ctx, storageURL)
	if err != nil {
		return "", 0, status.Errorf(codes.Unavailable, "savepoint %s: %s", path, oneLine(err.Error()))
	}
	m, err := checkpoint.ReadManifest(ctx, st, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "", 0, notFound("savepoint %s not found in the job's checkpoint storage %s", path, storageURL)
	case errors.Is(err, checkpoint.ErrCorrupt):
		return "", 0, invalid("savepoint %s: %s is not a checkpoint manifest", path, key)
	case err != nil:
		return "", 0, status.Errorf(codes.Unavailable, "savepoint %s: %s", path, oneLine(err.Error()))
	}
	return key, uint64(m.Checkpoint), nil
}

// triggerSavepoint asks the leader's loop for a savepoint of a running job
// and waits until one with an id above the job's last id ends.
func (c *Coordinator) triggerSavepoint(ctx context.Context, t *term, req *eddyv1.TriggerSavepointRequest) (*eddyv1.TriggerSavepointResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	j, err := c.fsm.Job(tenant, req.GetJobId())
	if err != nil {
		return nil, notFound("job %s not found in tenant %s", req.GetJobId(), tenant)
	}
	if j.State != fsm.JobRunning {
		return nil, status.Errorf(codes.FailedPrecondition, "job %s is %s: only a running job takes a savepoint", j.ID, apiJobStateName(&j, t, c))
	}
	if _, err := c.checkpointConfig(&j); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%s", oneLine(err.Error()))
	}
	if err := c.checkSavepointQuota(tenant); err != nil {
		return nil, err
	}
	after := j.CheckpointSeq
	unregister := t.waitSavepoint(j.ID, after)
	defer unregister()
	log := c.log.With("tenant", tenant, "job", j.ID)
	log.Info("savepoint requested", "stop", req.GetStop())
	for {
		changed := c.fsm.Changed()
		j, err = c.fsm.Job(tenant, req.GetJobId())
		if err != nil {
			return nil, notFound("job %s not found in tenant %s", req.GetJobId(), tenant)
		}
		if sp, failed, done := savepointOutcome(&j, after); done {
			if failed != "" {
				return nil, status.Errorf(codes.Aborted, "savepoint %d of job %s failed: %s", sp.ID, j.ID, failed)
			}
			resp := &eddyv1.TriggerSavepointResponse{Path: checkpoint.SavepointDirOf(sp.Location), CheckpointId: sp.ID}
			log.Info("savepoint taken", "checkpoint", sp.ID, "path", resp.Path)
			if !req.GetStop() {
				resp.State = apiJobState(&j, t.index(c.fsm.Workers()))
				return resp, nil
			}
			cancel, err := c.cancelJob(ctx, t, &eddyv1.CancelJobRequest{Tenant: tenant, JobId: j.ID})
			if err != nil {
				return nil, err
			}
			resp.State = cancel.GetState()
			return resp, nil
		}
		switch {
		case j.State != fsm.JobRunning:
			return nil, status.Errorf(codes.FailedPrecondition, "job %s became %s before the savepoint was taken: %s", j.ID, apiJobStateName(&j, t, c), j.Message)
		case len(j.FinishedTasks) > 0 && (j.PendingCheckpoint == nil || !j.PendingCheckpoint.Savepoint):
			return nil, status.Errorf(codes.FailedPrecondition, "job %s: %d of its tasks finished, and a savepoint needs every task running", j.ID, len(j.FinishedTasks))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.ctx.Done():
			return nil, status.Error(codes.Unavailable, "the coordinator stopped leading before the savepoint was taken: retry")
		}
	}
}

func apiJobStateName(j *fsm.Job, t *term, c *Coordinator) string {
	return strings.TrimPrefix(apiJobState(j, t.index(c.fsm.Workers())).String(), "JOB_STATE_")
}

// resolveModules pins every module reference of a spec to a registered
// version: "name" to the latest, "name@N" to version N.
func resolveModules(f *fsm.FSM, tenant string, spec *jobspec.Spec) ([]fsm.ModuleRef, error) {
	var refs []fsm.ModuleRef
	seen := map[string]bool{}
	for i := range spec.Nodes {
		n := &spec.Nodes[i]
		for _, w := range n.Modules() {
			ref := w.Module
			if seen[ref] {
				continue
			}
			seen[ref] = true
			name, version, err := parseModuleRef(ref)
			if err != nil {
				m, lookupErr := f.Module(tenant, ref, 0)
				if lookupErr == nil { // a registered name that merely looks like a path
					refs = append(refs, fsm.ModuleRef{Ref: ref, Name: m.Name, Version: m.Version, SHA256: m.SHA256})
					continue
				}
				return nil, invalid("node %q: %v", n.Name, err)
			}
			m, err := f.Module(tenant, name, version)
			if err != nil {
				return nil, notFound("node %q: %s", n.Name, moduleNotFound(f, tenant, name, version))
			}
			refs = append(refs, fsm.ModuleRef{Ref: ref, Name: m.Name, Version: m.Version, SHA256: m.SHA256})
		}
	}
	return refs, nil
}

// parseModuleRef splits "name" or "name@version" (version 0: the latest).
// A path gets an error that says what to do instead.
func parseModuleRef(ref string) (string, int, error) {
	if strings.ContainsAny(ref, `/\`) || strings.HasSuffix(ref, ".wasm") {
		return "", 0, fmt.Errorf("module %q is a file path, but a cluster runs modules from its registry: upload it with eddy module upload %s --name NAME, and refer to it as NAME or NAME@VERSION", ref, ref)
	}
	name, v, hasVersion := strings.Cut(ref, "@")
	if err := checkModuleName(name); err != nil {
		return "", 0, fmt.Errorf("module reference %q: %v", ref, err)
	}
	if !hasVersion {
		return name, 0, nil
	}
	version, err := strconv.Atoi(v)
	if err != nil || version < 1 {
		return "", 0, fmt.Errorf("module reference %q: the version after @ must be a number from 1", ref)
	}
	return name, version, nil
}

func (c *Coordinator) listJobs(ctx context.Context, t *term, req *eddyv1.ListJobsRequest) (*eddyv1.ListJobsResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	jobs := c.fsm.Jobs(tenant)
	idx := t.index(c.fsm.Workers())
	resp := &eddyv1.ListJobsResponse{}
	for i := len(jobs) - 1; i >= 0; i-- {
		resp.Jobs = append(resp.Jobs, jobSummary(&jobs[i], idx))
	}
	return resp, nil
}

func (c *Coordinator) jobStatus(ctx context.Context, t *term, req *eddyv1.JobStatusRequest) (*eddyv1.JobStatusResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	j, err := c.fsm.Job(tenant, req.GetJobId())
	if err != nil {
		return nil, notFound("job %s not found in tenant %s", req.GetJobId(), tenant)
	}
	resp := jobStatus(&j, t.index(c.fsm.Workers()), c.now())
	if c.deps.Graph != nil {
		// The spec was planned at submission, so this fails only if the
		// planner changed since; the status is still worth answering.
		if g, err := c.deps.Graph(j.Spec); err == nil {
			resp.Graph = g
		}
	}
	return resp, nil
}

func (c *Coordinator) cancelJob(ctx context.Context, t *term, req *eddyv1.CancelJobRequest) (*eddyv1.CancelJobResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	j, err := c.fsm.Job(tenant, req.GetJobId())
	if err != nil {
		return nil, notFound("job %s not found in tenant %s", req.GetJobId(), tenant)
	}
	if j.State.Terminal() {
		return &eddyv1.CancelJobResponse{State: apiJobState(&j, t.index(c.fsm.Workers()))}, nil
	}
	res, err := c.propose(ctx, &fsm.CancelJob{Tenant: tenant, JobID: j.ID})
	if errors.Is(err, fsm.ErrJobState) {
		// It ended between the read and the commit.
		if j, err := c.fsm.Job(tenant, req.GetJobId()); err == nil {
			return &eddyv1.CancelJobResponse{State: apiJobState(&j, t.index(c.fsm.Workers()))}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	j = res.(fsm.Job)
	c.log.Info("job canceled", "tenant", tenant, "job", j.ID)
	// Its tasks stop at their workers' next heartbeats.
	return &eddyv1.CancelJobResponse{State: eddyv1.JobState_JOB_STATE_CANCELING}, nil
}

func (c *Coordinator) joinMember(ctx context.Context, _ *term, req *eddyv1.JoinRequest) (*eddyv1.JoinResponse, error) {
	if req.GetNodeId() == "" || req.GetRaftAddress() == "" || req.GetApiAddress() == "" {
		return nil, invalid("join needs a node id, a Raft address and an API address")
	}
	if err := c.node.AddVoter(ctx, req.GetNodeId(), req.GetRaftAddress()); err != nil {
		return nil, err
	}
	co, err := c.fsm.Coordinator(req.GetNodeId())
	if err == nil && co.RaftAddress == req.GetRaftAddress() && co.APIAddress == req.GetApiAddress() {
		return &eddyv1.JoinResponse{}, nil
	}
	if _, err := c.propose(ctx, &fsm.RegisterCoordinator{ID: req.GetNodeId(), RaftAddress: req.GetRaftAddress(), APIAddress: req.GetApiAddress()}); err != nil {
		return nil, err
	}
	c.log.Info("coordinator joined", "node", req.GetNodeId(), "raft", req.GetRaftAddress(), "api", req.GetApiAddress())
	return &eddyv1.JoinResponse{}, nil
}

func (c *Coordinator) leaveMember(ctx context.Context, _ *term, req *eddyv1.LeaveRequest) (*eddyv1.LeaveResponse, error) {
	servers, err := c.node.Servers()
	if err != nil {
		return nil, err
	}
	if !containsServer(servers, req.GetNodeId()) {
		return &eddyv1.LeaveResponse{}, nil
	}
	voters := 0
	for _, s := range servers {
		if s.Voter {
			voters++
		}
	}
	if voters <= 1 {
		return nil, status.Errorf(codes.FailedPrecondition, "coordinator %s is the last member of the group and cannot leave it", req.GetNodeId())
	}
	if err := c.node.RemoveServer(ctx, req.GetNodeId()); err != nil {
		return nil, err
	}
	c.log.Info("coordinator left", "node", req.GetNodeId())
	return &eddyv1.LeaveResponse{}, nil
}

// probeTimeout bounds the health check ClusterInfo makes of each other
// coordinator.
const probeTimeout = time.Second

func (c *Coordinator) clusterInfo(ctx context.Context, t *term, _ *eddyv1.ClusterInfoRequest) (*eddyv1.ClusterInfoResponse, error) {
	servers, err := c.node.Servers()
	if err != nil {
		return nil, err
	}
	resp := &eddyv1.ClusterInfoResponse{LeaderId: c.cfg.NodeID}
	var wg sync.WaitGroup
	for _, s := range servers {
		info := &eddyv1.CoordinatorInfo{NodeId: s.ID, RaftAddress: s.Address, Voter: s.Voter, Role: eddyv1.CoordinatorRole_COORDINATOR_ROLE_FOLLOWER}
		if co, err := c.fsm.Coordinator(s.ID); err == nil {
			info.ApiAddress = co.APIAddress
		}
		resp.Coordinators = append(resp.Coordinators, info)
		switch {
		case s.ID == c.cfg.NodeID:
			info.Role = eddyv1.CoordinatorRole_COORDINATOR_ROLE_LEADER
		case info.ApiAddress == "":
			info.Role = eddyv1.CoordinatorRole_COORDINATOR_ROLE_UNREACHABLE
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !c.probe(ctx, info.ApiAddress) {
					info.Role = eddyv1.CoordinatorRole_COORDINATOR_ROLE_UNREACHABLE
				}
			}()
		}
	}
	wg.Wait()
	slices.SortFunc(resp.Coordinators, func(a, b *eddyv1.CoordinatorInfo) int { return strings.Compare(a.NodeId, b.NodeId) })
	workers := c.fsm.Workers()
	for _, w := range workers {
		info := &eddyv1.WorkerInfo{
			WorkerId:    w.ID,
			DataAddress: w.Address,
			SlotsTotal:  uint32(w.Slots),
			SlotsUsed:   uint32(w.UsedSlots),
			State:       eddyv1.WorkerState_WORKER_STATE_ALIVE,
		}
		if w.State != fsm.WorkerAlive {
			info.State = eddyv1.WorkerState_WORKER_STATE_LOST
		}
		if at := t.lastHeartbeat(w.ID); !at.IsZero() {
			info.LastHeartbeatUnixMs = at.UnixMilli()
		}
		resp.Workers = append(resp.Workers, info)
	}
	return resp, nil
}

// probe reports whether the coordinator at addr answers a health check.
func (c *Coordinator) probe(ctx context.Context, addr string) bool {
	conn, err := c.conns.Get(addr)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}
