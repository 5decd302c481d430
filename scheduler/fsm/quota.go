package fsm

import (
	"errors"
	"fmt"
)

// What a tenant uses now, in the units of its Quota. These are pure
// functions of the replicated state, so that the leader's placement and
// checkpoint decisions that enforce quotas stay deterministic.

// ErrQuotaExceeded is matched by the *QuotaError of a job or module beyond
// its tenant's count quota (jobs, modules). The leader refuses such a
// request before proposing it, with a message for the user; the FSM
// refuses it again so that two requests proposed at once cannot both pass.
var ErrQuotaExceeded = errors.New("fsm: quota exceeded")

// QuotaError says which count quota a command would exceed.
type QuotaError struct {
	Tenant string
	// Quota is the quota's name ("jobs", "modules"), Limit its value and
	// Used the usage the command found.
	Quota       string
	Limit, Used int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("tenant %s: quota %s=%d reached (%d in use)", e.Tenant, e.Quota, e.Limit, e.Used)
}

// Is makes errors.Is(err, ErrQuotaExceeded) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// checkCountQuota refuses one more job (TypeSubmitJob) or module version
// (TypeRegisterModule) of a tenant at its quota.
func (a *applier) checkCountQuota(tenant string, kind CommandType) error {
	t, ok := a.st.tenants[tenant]
	if !ok {
		return nil // the caller checked the tenant
	}
	e := &QuotaError{Tenant: tenant}
	u := a.st.usage(tenant)
	switch kind {
	case TypeSubmitJob:
		e.Quota, e.Limit, e.Used = "jobs", t.Quota.Jobs, u.Jobs
	case TypeRegisterModule:
		e.Quota, e.Limit, e.Used = "modules", t.Quota.Modules, u.Modules
	}
	if e.Limit > 0 && e.Used >= e.Limit {
		return e
	}
	return nil
}

// CheckTenantID checks a tenant id as the commands do: [a-z0-9][a-z0-9_-]*
// and not too long. The error wraps ErrMalformed.
func CheckTenantID(id string) error { return checkTenantID(id) }

// Usage is what a tenant uses of the resources its Quota counts.
type Usage struct {
	// Slots held by the tenant's running jobs (tasks not finished).
	Slots int
	// Jobs that are not terminal.
	Jobs int
	// Modules: module versions registered.
	Modules int
	// CheckpointBytes: see Job.StoredCheckpointBytes, summed.
	CheckpointBytes int64
}

// HeldSlots is how many slots the job holds now: its unfinished tasks
// while it runs, none otherwise.
func (j *Job) HeldSlots() int {
	if !j.holdsSlots() {
		return 0
	}
	n := 0
	for task := range j.Deployment {
		if !j.taskFinished(task) {
			n++
		}
	}
	return n
}

// StoredCheckpointBytes estimates the bytes the job's retained
// checkpoints and savepoints occupy in checkpoint storage.
//
// Retained checkpoints share files (incremental checkpoints reference the
// files of earlier ones): the oldest retained one counts with its full
// size, each later one with the bytes uploaded for it. A file a later
// checkpoint references that was uploaded before the oldest one is
// referenced by the oldest one too (state files are immutable and, once
// dropped, never referenced again), so this counts every stored file
// once. A savepoint is a self-contained copy and counts with its full
// size. Files of checkpoints waiting for deletion are not counted: the
// leader deletes them.
func (j *Job) StoredCheckpointBytes() int64 {
	var n int64
	for i, c := range j.Checkpoints {
		if i == 0 {
			n += c.FullSize
		} else {
			n += c.IncrementalSize
		}
	}
	for _, s := range j.Savepoints {
		n += s.FullSize
	}
	return n
}

// TenantUsage returns what a tenant uses now.
func (f *FSM) TenantUsage(tenant string) Usage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.usage(tenant)
}

func (s *state) usage(tenant string) Usage {
	var u Usage
	for _, j := range s.jobs {
		if j.Tenant != tenant {
			continue
		}
		u.Slots += j.HeldSlots()
		if !j.State.Terminal() {
			u.Jobs++
		}
		u.CheckpointBytes += j.StoredCheckpointBytes()
	}
	for k, versions := range s.modules {
		if k.tenant == tenant {
			u.Modules += len(versions)
		}
	}
	return u
}
