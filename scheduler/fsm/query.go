package fsm

import (
	"fmt"
	"maps"
	"slices"
)

// AppliedIndex is the log index of the last command applied (or refused).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.appliedIndex
}

// Tenants returns every tenant, sorted by id.
func (f *FSM) Tenants() []Tenant {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Tenant, 0, len(f.st.tenants))
	for _, id := range slices.Sorted(maps.Keys(f.st.tenants)) {
		out = append(out, *f.st.tenants[id])
	}
	return out
}

// Tenant returns one tenant.
func (f *FSM) Tenant(id string) (Tenant, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.tenants[id]
	if !ok {
		return Tenant{}, fmt.Errorf("tenant %q: %w", id, ErrTenantNotFound)
	}
	return *t, nil
}

// Coordinators returns the registered coordinator members, sorted by id.
func (f *FSM) Coordinators() []Coordinator {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Coordinator, 0, len(f.st.coordinators))
	for _, id := range slices.Sorted(maps.Keys(f.st.coordinators)) {
		out = append(out, *f.st.coordinators[id])
	}
	return out
}

// Coordinator returns one coordinator member, such as the leader whose API
// address a follower redirects to.
func (f *FSM) Coordinator(id string) (Coordinator, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.st.coordinators[id]
	if !ok {
		return Coordinator{}, fmt.Errorf("coordinator %q: %w", id, ErrCoordinatorNotFound)
	}
	return *c, nil
}

// Modules returns every version of every module of a tenant, sorted by name
// and version.
func (f *FSM) Modules(tenant string) []Module {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []Module
	for _, k := range slices.SortedFunc(maps.Keys(f.st.modules), compareModuleKeys) {
		if k.tenant != tenant {
			continue
		}
		for _, m := range f.st.modules[k] {
			out = append(out, *m)
		}
	}
	return out
}

// Module returns one version of a tenant's module; version 0 means the
// latest.
func (f *FSM) Module(tenant, name string, version int) (Module, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	versions := f.st.modules[moduleKey{tenant, name}]
	switch {
	case len(versions) == 0:
		return Module{}, fmt.Errorf("module %q of tenant %q: %w", name, tenant, ErrModuleNotFound)
	case version == 0:
		return *versions[len(versions)-1], nil
	case version < 0 || version > len(versions):
		return Module{}, fmt.Errorf("module %s@%d of tenant %q (latest is %d): %w", name, version, tenant, len(versions), ErrModuleNotFound)
	}
	return *versions[version-1], nil
}

// Workers returns every worker, alive or dead, sorted by id, with UsedSlots
// filled in.
func (f *FSM) Workers() []Worker {
	f.mu.RLock()
	defer f.mu.RUnlock()
	used := f.st.usedSlots()
	out := make([]Worker, 0, len(f.st.workers))
	for _, id := range slices.Sorted(maps.Keys(f.st.workers)) {
		w := *f.st.workers[id]
		w.UsedSlots = used[id]
		out = append(out, w)
	}
	return out
}

// Worker returns one worker with UsedSlots filled in.
func (f *FSM) Worker(id string) (Worker, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w, ok := f.st.workers[id]
	if !ok {
		return Worker{}, fmt.Errorf("worker %q: %w", id, ErrWorkerNotFound)
	}
	out := *w
	out.UsedSlots = f.st.usedSlots()[id]
	return out, nil
}

// Jobs returns a tenant's jobs in submission order.
func (f *FSM) Jobs(tenant string) []Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []Job
	for _, j := range f.st.sortedJobs() {
		if j.Tenant == tenant {
			out = append(out, j.clone())
		}
	}
	return out
}

// AllJobs returns the jobs of every tenant in submission order: for the
// leader's loops, not for answering a tenant.
func (f *FSM) AllJobs() []Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	jobs := f.st.sortedJobs()
	out := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.clone())
	}
	return out
}

// Job returns one job of a tenant. Another tenant's job is not found.
func (f *FSM) Job(tenant, id string) (Job, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.st.jobs[id]
	if !ok || j.Tenant != tenant {
		return Job{}, fmt.Errorf("job %s of tenant %q: %w", id, tenant, ErrJobNotFound)
	}
	return j.clone(), nil
}

// FindJob returns a job of any tenant: for the leader's loops and the
// worker-facing calls, which name jobs by id alone, not for answering a
// tenant.
func (f *FSM) FindJob(id string) (Job, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.st.jobs[id]
	if !ok {
		return Job{}, fmt.Errorf("job %s: %w", id, ErrJobNotFound)
	}
	return j.clone(), nil
}
