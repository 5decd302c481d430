package fsm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"
)

// SnapshotFormat is the version of the snapshot document MarshalState
// writes.
const SnapshotFormat = 1

// snapshotDoc is the snapshot: every collection sorted, so that equal states
// encode to equal bytes.
type snapshotDoc struct {
	Format       int           `json:"format"`
	AppliedIndex uint64        `json:"applied_index"`
	Tenants      []Tenant      `json:"tenants"`
	Coordinators []Coordinator `json:"coordinators"`
	Modules      []Module      `json:"modules"`
	Workers      []Worker      `json:"workers"`
	Jobs         []Job         `json:"jobs"`
	// JobSeq is absent until a job is numbered, so that the snapshots of
	// states from before numbering keep their bytes.
	JobSeq uint64 `json:"job_seq,omitempty"`
	// Tokens and the audit log are absent while empty, for the same
	// reason.
	Tokens   []Token      `json:"tokens,omitempty"`
	Audit    []AuditEntry `json:"audit,omitempty"`
	AuditSeq uint64       `json:"audit_seq,omitempty"`
}

// MarshalState encodes the whole state deterministically: two FSMs that
// applied the same log return the same bytes. It is the snapshot Raft
// persists.
func (f *FSM) MarshalState() ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.marshal()
}

func (s *state) marshal() ([]byte, error) {
	doc := snapshotDoc{
		Format:       SnapshotFormat,
		AppliedIndex: s.appliedIndex,
		Tenants:      make([]Tenant, 0, len(s.tenants)),
		Coordinators: make([]Coordinator, 0, len(s.coordinators)),
		Modules:      []Module{},
		Workers:      make([]Worker, 0, len(s.workers)),
		Jobs:         make([]Job, 0, len(s.jobs)),
		JobSeq:       s.jobSeq,
		Audit:        s.audit,
		AuditSeq:     s.auditSeq,
	}
	for _, id := range slices.Sorted(maps.Keys(s.tokens)) {
		doc.Tokens = append(doc.Tokens, *s.tokens[id])
	}
	for _, id := range slices.Sorted(maps.Keys(s.tenants)) {
		doc.Tenants = append(doc.Tenants, *s.tenants[id])
	}
	for _, id := range slices.Sorted(maps.Keys(s.coordinators)) {
		doc.Coordinators = append(doc.Coordinators, *s.coordinators[id])
	}
	keys := slices.SortedFunc(maps.Keys(s.modules), compareModuleKeys)
	for _, k := range keys {
		for _, m := range s.modules[k] {
			doc.Modules = append(doc.Modules, *m)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.workers)) {
		doc.Workers = append(doc.Workers, *s.workers[id])
	}
	for _, j := range s.sortedJobs() {
		doc.Jobs = append(doc.Jobs, j.clone())
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("fsm: marshal state: %w", err)
	}
	return data, nil
}

func compareModuleKeys(a, b moduleKey) int {
	return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.name, b.name))
}

// sortedJobs returns the jobs in submission order.
func (s *state) sortedJobs() []*Job {
	jobs := slices.Collect(maps.Values(s.jobs))
	slices.SortFunc(jobs, func(a, b *Job) int {
		return cmp.Or(cmp.Compare(a.SubmitIndex, b.SubmitIndex), cmp.Compare(a.ID, b.ID))
	})
	return jobs
}

// Snapshot implements raft.FSM. The state is encoded here, under the lock,
// so that Persist (which Raft runs concurrently with Apply) writes a
// point-in-time copy.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	data, err := f.MarshalState()
	if err != nil {
		return nil, err
	}
	return snapshot(data), nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	return nil
}

func (snapshot) Release() {}

// Restore implements raft.FSM: it replaces the whole state with the one
// encoded in rc (as written by MarshalState). On error the state is
// unchanged.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("fsm: restore: read snapshot: %w", err)
	}
	return f.UnmarshalState(data)
}

// UnmarshalState replaces the state with one encoded by MarshalState. On
// error the state is unchanged.
func (f *FSM) UnmarshalState(data []byte) error {
	st, err := unmarshalState(data)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	f.notifyLocked()
	return nil
}

func unmarshalState(data []byte) (*state, error) {
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	if head.Format != SnapshotFormat {
		return nil, fmt.Errorf("snapshot format %d (this build reads %d): %w", head.Format, SnapshotFormat, ErrUnsupportedVersion)
	}
	var doc snapshotDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrCorruptSnapshot)
	}
	st := &state{
		appliedIndex: doc.AppliedIndex,
		tenants:      make(map[string]*Tenant, len(doc.Tenants)),
		coordinators: make(map[string]*Coordinator, len(doc.Coordinators)),
		modules:      map[moduleKey][]*Module{},
		workers:      make(map[string]*Worker, len(doc.Workers)),
		jobs:         make(map[string]*Job, len(doc.Jobs)),
		jobSeq:       doc.JobSeq,
		tokens:       make(map[string]*Token, len(doc.Tokens)),
		audit:        doc.Audit,
		auditSeq:     doc.AuditSeq,
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrCorruptSnapshot)
	}
	for i := range doc.Tenants {
		t := doc.Tenants[i]
		if _, dup := st.tenants[t.ID]; dup || checkTenantID(t.ID) != nil {
			return nil, corrupt("tenant %q invalid or repeated", t.ID)
		}
		st.tenants[t.ID] = &t
	}
	for i := range doc.Coordinators {
		c := doc.Coordinators[i]
		if _, dup := st.coordinators[c.ID]; dup || c.ID == "" {
			return nil, corrupt("coordinator %q invalid or repeated", c.ID)
		}
		st.coordinators[c.ID] = &c
	}
	for i := range doc.Modules {
		m := doc.Modules[i]
		key := moduleKey{m.Tenant, m.Name}
		if _, ok := st.tenants[m.Tenant]; !ok {
			return nil, corrupt("module %s of unknown tenant %q", m.Ref(), m.Tenant)
		}
		if m.Version != len(st.modules[key])+1 {
			return nil, corrupt("module %s of tenant %q out of sequence", m.Ref(), m.Tenant)
		}
		st.modules[key] = append(st.modules[key], &m)
	}
	for i := range doc.Workers {
		w := doc.Workers[i]
		if _, dup := st.workers[w.ID]; dup || w.ID == "" {
			return nil, corrupt("worker %q invalid or repeated", w.ID)
		}
		if w.State != WorkerAlive && w.State != WorkerDead {
			return nil, corrupt("worker %q in state %q", w.ID, w.State)
		}
		st.workers[w.ID] = &w
	}
	for i := range doc.Jobs {
		j := doc.Jobs[i]
		if _, dup := st.jobs[j.ID]; dup || j.ID == "" {
			return nil, corrupt("job %q invalid or repeated", j.ID)
		}
		if _, ok := st.tenants[j.Tenant]; !ok {
			return nil, corrupt("job %s of unknown tenant %q", j.ID, j.Tenant)
		}
		switch j.State {
		case JobWaitingForSlots, JobRunning, JobRestarting, JobFinished, JobFailed, JobCanceled:
		default:
			return nil, corrupt("job %s in state %q", j.ID, j.State)
		}
		for task := range j.Deployment {
			if !j.hasTask(task) {
				return nil, corrupt("job %s deploys unknown task %q", j.ID, task)
			}
		}
		if !slices.IsSorted(j.FinishedTasks) {
			return nil, corrupt("job %s: finished tasks not sorted", j.ID)
		}
		if err := checkCheckpoints(&j); err != nil {
			return nil, corrupt("job %s: %v", j.ID, err)
		}
		if err := checkSwaps(&j); err != nil {
			return nil, corrupt("job %s: %v", j.ID, err)
		}
		st.jobs[j.ID] = &j
	}
	for i := range doc.Tokens {
		t := doc.Tokens[i]
		if _, dup := st.tokens[t.ID]; dup || t.ID == "" || !t.Role.Valid() {
			return nil, corrupt("token %q invalid or repeated", t.ID)
		}
		if _, ok := st.tenants[t.Tenant]; !ok {
			return nil, corrupt("token %s of unknown tenant %q", t.ID, t.Tenant)
		}
		st.tokens[t.ID] = &t
	}
	for i, e := range doc.Audit {
		if e.Seq > st.auditSeq || i > 0 && e.Seq <= doc.Audit[i-1].Seq {
			return nil, corrupt("audit entry %d out of sequence", e.Seq)
		}
	}
	return st, nil
}

// checkCheckpoints checks the invariants of a job's checkpoint records:
// every id used is at most CheckpointSeq, and the ids to delete are sorted
// and distinct.
func checkCheckpoints(j *Job) error {
	check := func(what string, c Checkpoint) error {
		if c.ID == 0 || c.ID > j.CheckpointSeq {
			return fmt.Errorf("%s %d beyond the last id %d", what, c.ID, j.CheckpointSeq)
		}
		return nil
	}
	if p := j.PendingCheckpoint; p != nil {
		if err := check("checkpoint in flight", *p); err != nil {
			return err
		}
	}
	for _, list := range [][]Checkpoint{j.Checkpoints, j.Savepoints, j.FailedCheckpoints} {
		for _, c := range list {
			if err := check("checkpoint", c); err != nil {
				return err
			}
		}
	}
	for i, id := range j.CheckpointsToDelete {
		if i > 0 && id <= j.CheckpointsToDelete[i-1] {
			return fmt.Errorf("checkpoints to delete not sorted")
		}
	}
	return nil
}
