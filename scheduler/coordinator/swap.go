package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// Hot swap, the leader's part (docs/rfcs/2026-12-02-hot-swap.md):
// SwapModule begins a swap in the FSM; heartbeat answers ask the workers
// of the node to prepare it (level-triggered, like everything in
// heartbeats) and the workers answer in their next heartbeats; once every
// one of them prepared it, the checkpoint decisions trigger the swap
// savepoint, at whose barrier the tasks of the node switch; its completion
// pins the new version in the FSM (Job.Overrides). A refusal or a prepare
// that takes too long ends the swap without touching the job.

// swapPrepareTimeout bounds the prepare phase: the workers fetch, compile
// and instantiate the module (a Go-built module compiles in about half a
// second cold).
const swapPrepareTimeout = 30 * time.Second

// swapKey names one swap of one job.
type swapKey struct {
	job string
	id  uint64
}

// swapReport is one worker's outcome of preparing a swap.
type swapReport struct {
	attempt int
	ok      bool
	reason  string
}

func (s *controlServer) SwapModule(ctx context.Context, req *eddyv1.SwapModuleRequest) (*eddyv1.SwapModuleResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_SwapModule_FullMethodName, req,
		func() *eddyv1.SwapModuleResponse { return new(eddyv1.SwapModuleResponse) }, s.c.swapModule)
}

// inFlightSwap returns the job's swap in flight (PREPARING or SWAPPING),
// if any: always the last of its history.
func inFlightSwap(j *fsm.Job) *fsm.Swap {
	if n := len(j.Swaps); n > 0 && !j.Swaps[n-1].State.Terminal() {
		return &j.Swaps[n-1]
	}
	return nil
}

func findSwap(j *fsm.Job, id uint64) *fsm.Swap {
	for i := range j.Swaps {
		if j.Swaps[i].ID == id {
			return &j.Swaps[i]
		}
	}
	return nil
}

// nodeModules returns, for every Wasm node of a job in spec order, the
// module and configuration it runs: the spec's, pinned at submission,
// unless a completed swap overrode them.
func nodeModules(j *fsm.Job, spec *jobspec.Spec) ([]fsm.NodeOverride, error) {
	var out []fsm.NodeOverride
	for i := range spec.Nodes {
		n := &spec.Nodes[i]
		if n.Wasm == nil {
			continue
		}
		if k := slices.IndexFunc(j.Overrides, func(o fsm.NodeOverride) bool { return o.Node == n.Name }); k >= 0 {
			out = append(out, j.Overrides[k])
			continue
		}
		k := slices.IndexFunc(j.Modules, func(m fsm.ModuleRef) bool { return m.Ref == n.Wasm.Module })
		if k < 0 {
			return nil, fmt.Errorf("node %s: module %s was not pinned at submission", n.Name, n.Wasm.Module)
		}
		cfg, err := nodeConfig(n)
		if err != nil {
			return nil, err
		}
		out = append(out, fsm.NodeOverride{Node: n.Name, Module: j.Modules[k], Config: cfg})
	}
	return out, nil
}

// nodeConfig is a Wasm node's configuration as the tasks hand it to
// eddy_open: the spec's config as JSON, "{}" without one.
func nodeConfig(n *jobspec.Node) ([]byte, error) {
	cfg := n.Wasm.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("node %s: config is not representable as JSON: %w", n.Name, err)
	}
	return b, nil
}

// compactObject checks that s is one JSON object and returns it compacted.
func compactObject(s string) ([]byte, error) {
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
		return nil, fmt.Errorf("the configuration must be one JSON object, like {\"threshold\": 10}")
	}
	return json.Marshal(obj)
}

func moduleRefString(m fsm.ModuleRef) string { return fmt.Sprintf("%s@%d", m.Name, m.Version) }

func (c *Coordinator) swapModule(ctx context.Context, t *term, req *eddyv1.SwapModuleRequest) (*eddyv1.SwapModuleResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	j, err := c.fsm.Job(tenant, req.GetJobId())
	if err != nil {
		return nil, notFound("job %s not found in tenant %s", req.GetJobId(), tenant)
	}
	spec, err := jobspec.Parse(j.Spec, "")
	if err != nil {
		return nil, status.Errorf(codes.Internal, "job %s: its spec does not parse: %s", j.ID, oneLine(err.Error()))
	}
	nodes, err := nodeModules(&j, spec)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "job %s: %s", j.ID, oneLine(err.Error()))
	}
	k := slices.IndexFunc(nodes, func(o fsm.NodeOverride) bool { return o.Node == req.GetNode() })
	if k < 0 {
		names := make([]string, len(nodes))
		for i, o := range nodes {
			names[i] = o.Node
		}
		what := "it has none"
		if len(names) > 0 {
			what = "its Wasm nodes are " + strings.Join(names, ", ")
		}
		if spec.Node(req.GetNode()) != nil {
			return nil, invalid("node %s of job %s is not a Wasm node, and only a Wasm node's module can be swapped (%s)", req.GetNode(), j.ID, what)
		}
		return nil, invalid("job %s has no node %q (%s)", j.ID, req.GetNode(), what)
	}
	cur := nodes[k]
	to := cur.Module
	if req.GetModule() != "" {
		name, version, err := parseModuleRef(req.GetModule())
		if err != nil {
			return nil, invalid("%v", err)
		}
		m, err := c.fsm.Module(tenant, name, version)
		if err != nil {
			return nil, notFound("%s", moduleNotFound(c.fsm, tenant, name, version))
		}
		to = fsm.ModuleRef{Ref: m.Ref(), Name: m.Name, Version: m.Version, SHA256: m.SHA256}
	}
	toConfig := cur.Config
	if req.GetSetConfig() {
		if toConfig, err = compactObject(req.GetConfigJson()); err != nil {
			return nil, invalid("--config: %v", err)
		}
	}
	switch {
	case req.GetModule() == "" && !req.GetSetConfig():
		return nil, invalid("a swap needs a new module (--module NAME@VERSION), a new configuration (--config JSON), or both")
	case to.SHA256 == cur.Module.SHA256 && jsonEqual(toConfig, cur.Config):
		return nil, invalid("node %s of job %s already runs %s with this configuration: nothing to swap", cur.Node, j.ID, moduleRefString(cur.Module))
	case j.State != fsm.JobRunning:
		return nil, status.Errorf(codes.FailedPrecondition, "job %s is %s: only a running job can be swapped in place", j.ID, apiJobStateName(&j, t, c))
	case len(j.FinishedTasks) > 0:
		return nil, status.Errorf(codes.FailedPrecondition, "job %s: %d of its tasks finished, and a swap needs every task running", j.ID, len(j.FinishedTasks))
	}
	if s := inFlightSwap(&j); s != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "job %s: swap %d of node %s is in progress (%s): one swap at a time", j.ID, s.ID, s.Node, s.State)
	}
	res, err := c.propose(ctx, &fsm.BeginSwap{JobID: j.ID, Attempt: j.Attempt, Node: cur.Node, From: cur.Module, To: to,
		FromConfig: cur.Config, ToConfig: toConfig, AllowDroppedState: req.GetAllowDroppedState()})
	if err != nil {
		return nil, err
	}
	begun := res.(fsm.Job)
	id := begun.SwapSeq
	log := c.log.With("tenant", tenant, "job", j.ID, "swap", id, "node", cur.Node)
	log.Info("swap begun", "from", moduleRefString(cur.Module), "to", moduleRefString(to), "config_changed", !jsonEqual(toConfig, cur.Config))
	t.wake()
	for {
		changed := c.fsm.Changed()
		j, err = c.fsm.Job(tenant, j.ID)
		if err != nil {
			return nil, notFound("job %s not found in tenant %s", req.GetJobId(), tenant)
		}
		s := findSwap(&j, id)
		if s == nil { // dropped from a full history: cannot be before it ended
			return nil, status.Errorf(codes.Aborted, "swap %d of job %s ended; its record is no longer kept", id, j.ID)
		}
		if s.State.Terminal() {
			log.Info("swap ended", "state", s.State, "reason", s.Reason, "savepoint", s.Savepoint, "pause", s.Pause)
			return &eddyv1.SwapModuleResponse{Swap: swapRecord(s)}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(), "swap %d of job %s is still %s: it goes on; eddy job status %s shows how it ends", id, j.ID, s.State, j.ID)
		case <-t.ctx.Done():
			return nil, status.Errorf(codes.Unavailable, "the coordinator stopped leading during swap %d of job %s, which goes on under the next leader: eddy job status %s shows how it ends", id, j.ID, j.ID)
		}
	}
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

var swapStates = map[fsm.SwapState]eddyv1.SwapState{
	fsm.SwapPreparing:  eddyv1.SwapState_SWAP_STATE_PREPARING,
	fsm.SwapSwapping:   eddyv1.SwapState_SWAP_STATE_SWAPPING,
	fsm.SwapSwapped:    eddyv1.SwapState_SWAP_STATE_SWAPPED,
	fsm.SwapRefused:    eddyv1.SwapState_SWAP_STATE_REFUSED,
	fsm.SwapFailed:     eddyv1.SwapState_SWAP_STATE_FAILED,
	fsm.SwapRolledBack: eddyv1.SwapState_SWAP_STATE_ROLLED_BACK,
}

func swapRecord(s *fsm.Swap) *eddyv1.SwapRecord {
	r := &eddyv1.SwapRecord{
		SwapId:        s.ID,
		Node:          s.Node,
		FromModule:    moduleRefString(s.From),
		ToModule:      moduleRefString(s.To),
		ConfigChanged: !jsonEqual(s.FromConfig, s.ToConfig),
		State:         swapStates[s.State],
		BeganUnixMs:   s.Began.UnixMilli(),
		SavepointId:   s.Savepoint,
		PauseUs:       s.Pause.Microseconds(),
		Reason:        s.Reason,
		RollbackArmed: s.Armed,
		Attempt:       uint32(s.Attempt),
	}
	if !s.Ended.IsZero() {
		r.EndedUnixMs = s.Ended.UnixMilli()
	}
	if s.SavepointLocation != "" {
		r.SavepointPath = checkpoint.SavepointDirOf(s.SavepointLocation)
	}
	return r
}

// swapStatus fills the nodes and the swap history of a job's status.
func swapStatus(resp *eddyv1.JobStatusResponse, j *fsm.Job) {
	resp.SpecYaml = j.Spec
	for i := range j.Swaps {
		resp.Swaps = append(resp.Swaps, swapRecord(&j.Swaps[i]))
	}
	spec, err := jobspec.Parse(j.Spec, "")
	if err != nil {
		return
	}
	nodes, err := nodeModules(j, spec)
	if err != nil {
		return
	}
	for _, n := range nodes {
		resp.Nodes = append(resp.Nodes, &eddyv1.NodeInfo{Name: n.Node, Module: moduleRefString(n.Module), Sha256: n.Module.SHA256, ConfigJson: string(n.Config)})
	}
}

// swapWorkers returns the workers that run tasks of a job's node in its
// current attempt, sorted: the ones that prepare a swap of it. A job
// whose tasks the planner cannot attribute (no NodeTasks) asks all of its
// workers.
func (c *Coordinator) swapWorkers(j *fsm.Job, node string) []string {
	tasks := j.Tasks
	if c.deps.NodeTasks != nil {
		if ts, err := c.deps.NodeTasks(j.Spec, node); err == nil {
			tasks = ts
		}
	}
	set := map[string]bool{}
	for _, task := range tasks {
		if w, ok := j.Deployment[task]; ok {
			set[w] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// swapPrepared records the outcomes a worker reports of the swaps it was
// asked to prepare; it wakes the leader's loop when one is new.
func (t *term) swapPrepared(worker string, reports []*eddyv1.SwapPrepared) {
	if len(reports) == 0 {
		return
	}
	t.mu.Lock()
	fresh := false
	for _, r := range reports {
		k := swapKey{r.GetJobId(), r.GetSwapId()}
		if t.swaps[k] == nil {
			t.swaps[k] = map[string]swapReport{}
		}
		rep := swapReport{attempt: int(r.GetAttempt()), ok: r.GetOk(), reason: r.GetReason()}
		if old, ok := t.swaps[k][worker]; !ok || old != rep {
			t.swaps[k][worker] = rep
			fresh = true
		}
	}
	t.mu.Unlock()
	if fresh {
		t.wake()
	}
}

// swapView copies the reports of the swaps in flight, forgetting those of
// swaps that ended.
func (t *term) swapView(jobs []fsm.Job) map[swapKey]map[string]swapReport {
	live := map[swapKey]bool{}
	for i := range jobs {
		if s := inFlightSwap(&jobs[i]); s != nil {
			live[swapKey{jobs[i].ID, s.ID}] = true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[swapKey]map[string]swapReport{}
	for k, m := range t.swaps {
		if !live[k] {
			delete(t.swaps, k)
			continue
		}
		out[k] = maps.Clone(m)
	}
	return out
}

// decideSwaps decides, for every job with a swap being prepared, whether
// it is refused (a worker refused it, or it was not prepared in time) and
// returns the EndSwap commands, and the jobs whose swap is prepared on
// every worker of its node: the checkpoint decisions trigger their swap
// savepoint.
func decideSwaps(now time.Time, jobs []fsm.Job, reports map[swapKey]map[string]swapReport, workersOf func(*fsm.Job, string) []string) (cmds []fsm.Command, ready map[string]uint64, wakeAt time.Time) {
	ready = map[string]uint64{}
	for i := range jobs {
		j := &jobs[i]
		s := inFlightSwap(j)
		if s == nil || s.State != fsm.SwapPreparing || j.State != fsm.JobRunning || s.Attempt != j.Attempt {
			continue
		}
		refuse := func(reason string) {
			cmds = append(cmds, &fsm.EndSwap{JobID: j.ID, SwapID: s.ID, State: fsm.SwapRefused, Reason: reason})
		}
		if len(j.FinishedTasks) > 0 {
			refuse(fmt.Sprintf("%d of the job's tasks finished, and a swap needs every task running", len(j.FinishedTasks)))
			continue
		}
		got := reports[swapKey{j.ID, s.ID}]
		var missing []string
		refused := ""
		for _, w := range workersOf(j, s.Node) {
			r, ok := got[w]
			switch {
			case !ok || r.attempt != j.Attempt:
				missing = append(missing, w)
			case !r.ok && refused == "":
				refused = r.reason
			}
		}
		switch {
		case refused != "":
			refuse(refused)
		case len(missing) == 0:
			ready[j.ID] = s.ID
		case !now.Before(s.Began.Add(swapPrepareTimeout)):
			refuse(fmt.Sprintf("not prepared within %s by worker %s", swapPrepareTimeout, strings.Join(missing, ", ")))
		default:
			if at := s.Began.Add(swapPrepareTimeout); wakeAt.IsZero() || at.Before(wakeAt) {
				wakeAt = at
			}
		}
	}
	return cmds, ready, wakeAt
}

// swapInstructions adds to a heartbeat answer the swaps the worker is to
// prepare: those being prepared of the nodes it runs tasks of.
func (c *Coordinator) swapInstructions(resp *eddyv1.HeartbeatResponse, worker string, jobs []fsm.Job) {
	for i := range jobs {
		j := &jobs[i]
		s := inFlightSwap(j)
		if s == nil || s.State != fsm.SwapPreparing || j.State != fsm.JobRunning || s.Attempt != j.Attempt ||
			!slices.Contains(c.swapWorkers(j, s.Node), worker) {
			continue
		}
		resp.PrepareSwaps = append(resp.PrepareSwaps, &eddyv1.SwapPrepare{
			JobId: j.ID, Attempt: uint32(j.Attempt), SwapId: s.ID, Node: s.Node,
			Module:            &eddyv1.ModuleRef{Ref: moduleRefString(s.To), Name: s.To.Name, Version: uint32(s.To.Version), Sha256: s.To.SHA256},
			ConfigJson:        s.ToConfig,
			AllowDroppedState: s.AllowDroppedState,
		})
	}
}

// deploymentOverrides adds the nodes a completed swap changed to a
// deployment: their modules (so the worker may fetch them) and the
// overrides it applies to the spec.
func deploymentOverrides(d *eddyv1.Deployment, j *fsm.Job) {
	for _, o := range j.Overrides {
		ref := &eddyv1.ModuleRef{Ref: moduleRefString(o.Module), Name: o.Module.Name, Version: uint32(o.Module.Version), Sha256: o.Module.SHA256}
		if !slices.ContainsFunc(d.Modules, func(m *eddyv1.ModuleRef) bool { return m.GetRef() == ref.Ref && m.GetSha256() == ref.Sha256 }) {
			d.Modules = append(d.Modules, ref)
		}
		d.Overrides = append(d.Overrides, &eddyv1.NodeOverride{Node: o.Node, Module: ref, ConfigJson: o.Config})
	}
}

// jobModule reports whether a worker of the job may fetch the module with
// that digest: one the spec pinned, one a completed swap put in place, or
// the one the swap in flight prepares.
func jobModule(j *fsm.Job, sha string) bool {
	if slices.ContainsFunc(j.Modules, func(m fsm.ModuleRef) bool { return m.SHA256 == sha }) ||
		slices.ContainsFunc(j.Overrides, func(o fsm.NodeOverride) bool { return o.Module.SHA256 == sha }) {
		return true
	}
	s := inFlightSwap(j)
	return s != nil && s.To.SHA256 == sha
}
