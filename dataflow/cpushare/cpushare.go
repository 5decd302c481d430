// Package cpushare shares a worker's CPU between tenants in proportion to
// their weights (the cpu_share quota), so that a tenant whose modules burn
// CPU is slowed and not its neighbours.
//
// Go cannot preempt a guest running in wazero's compiled code, so the
// share is enforced where guest code is entered: every guest call (one
// batch) acquires one of a fixed number of run slots (default GOMAXPROCS)
// and releases it on return. When tenants contend, each is capped at its
// weight's share of the slots and free slots go to the tenant with the
// lowest virtual time (recent slot time, decayed, divided by weight); a
// tenant alone may use every slot. A call keeps its slot until it returns,
// which the per-batch deadline bounds; the cap is what stops a CPU-bound
// tenant from taking all cores in the meantime.
//
// Usage, in the worker:
//
//	s, _ := cpushare.New(cpushare.DefaultConfig())
//	gate := s.Tenant("acme", 1) // a host.Gate, shared by the tenant's tasks
//	release, err := gate.Acquire(ctx)
//	… run the guest call …
//	release()
//
// It is not a CPU accountant of the host's own work (sources, sinks,
// channels, state): only guest calls are admitted through it.
package cpushare

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Config configures a Scheduler.
type Config struct {
	// Slots is how many guest calls run at once, over all tenants.
	// Default GOMAXPROCS.
	Slots int
	// HalfLife is how fast past usage is forgotten when ordering waiters.
	// Default 100ms.
	HalfLife time.Duration
	// Linger is how long a slot is kept for a tenant after it released its
	// last one, from tenants already at their cap: a tenant whose batches
	// are short and close together then does not wait behind a CPU-bound
	// neighbour's call for each of them. Default 5ms (in DefaultConfig
	// and WithDefaults; New takes 0 as none); negative: none.
	Linger time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Slots: runtime.GOMAXPROCS(0), HalfLife: 100 * time.Millisecond, Linger: 5 * time.Millisecond}
}

// WithDefaults returns c with its zero fields filled from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.Slots == 0 {
		c.Slots = d.Slots
	}
	if c.HalfLife == 0 {
		c.HalfLife = d.HalfLife
	}
	if c.Linger == 0 {
		c.Linger = d.Linger
	}
	return c
}

// Validate reports a field out of range.
func (c Config) Validate() error {
	switch {
	case c.Slots < 1:
		return fmt.Errorf("cpushare: slots must be at least 1, not %d", c.Slots)
	case c.HalfLife <= 0:
		return fmt.Errorf("cpushare: half-life must be positive, not %s", c.HalfLife)
	}
	return nil
}

// Scheduler admits guest calls of every tenant of a worker. It is safe for
// concurrent use.
type Scheduler struct {
	now func() time.Time
	mu  struct {
		sync.Mutex
		core   *core
		timer  *time.Timer
		wakeAt time.Time // when timer fires; zero when it is not armed
	}
}

// New returns a scheduler.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Linger < 0 {
		cfg.Linger = 0
	}
	s := &Scheduler{now: time.Now}
	s.mu.core = newCore(cfg)
	return s, nil
}

// Tenant returns the gate of the tenant named name, setting its weight
// (0 counts as 1). Every call for the same name shares one share.
func (s *Scheduler) Tenant(name string, weight uint32) *Tenant {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &Tenant{s: s, t: s.mu.core.tenant(name, weight, s.now())}
	g.release = g.releaseSlot
	return g
}

// Tenant is the gate of one tenant's guest calls (a host.Gate).
type Tenant struct {
	s *Scheduler
	t *tenant
	// release is releaseSlot bound once, so that Acquire allocates no
	// closure.
	release func()
}

// Acquire waits for a run slot for one guest call. The caller must call
// release exactly once when the call returned. It fails only when ctx ends
// first.
func (g *Tenant) Acquire(ctx context.Context) (release func(), err error) {
	s := g.s
	s.mu.Lock()
	w, granted, wake := s.mu.core.request(g.t, s.now())
	s.signal(granted, wake)
	if w.granted {
		s.mu.core.recycle(w)
		s.mu.Unlock()
		return g.release, nil
	}
	w.ready = make(chan struct{})
	s.mu.Unlock()
	select {
	case <-w.ready:
		return g.release, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	granted, wake = s.mu.core.cancel(w, s.now())
	s.signal(granted, wake)
	s.mu.Unlock()
	return nil, fmt.Errorf("cpushare: tenant %s: waiting for a CPU slot: %w", g.t.name, context.Cause(ctx))
}

func (g *Tenant) releaseSlot() {
	s := g.s
	s.mu.Lock()
	granted, wake := s.mu.core.release(g.t, s.now())
	s.signal(granted, wake)
	s.mu.Unlock()
}

// signal wakes the granted waiters and arms the timer for the end of a
// linger. s.mu is held.
func (s *Scheduler) signal(granted []*waiter, wake time.Time) {
	for _, w := range granted {
		if w.ready != nil {
			close(w.ready)
		}
	}
	if wake.IsZero() || (!s.mu.wakeAt.IsZero() && !wake.Before(s.mu.wakeAt)) {
		return
	}
	s.mu.wakeAt = wake
	d := wake.Sub(s.now())
	if s.mu.timer == nil {
		s.mu.timer = time.AfterFunc(d, s.onTimer)
	} else {
		s.mu.timer.Reset(d)
	}
}

func (s *Scheduler) onTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.wakeAt = time.Time{}
	granted, wake := s.mu.core.dispatch(s.now())
	s.signal(granted, wake)
}

// TenantStats is what one tenant got so far.
type TenantStats struct {
	Name    string
	Weight  uint32
	Running int           // slots held now
	Waiting int           // calls waiting now
	Grants  uint64        // slots granted
	Held    time.Duration // slot time held (wall time of its guest calls)
}

// Stats returns every tenant's figures, in the order tenants were first
// named.
func (s *Scheduler) Stats() []TenantStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c := s.mu.core
	out := make([]TenantStats, 0, len(c.order))
	for _, t := range c.order {
		c.advance(t, now)
		out = append(out, TenantStats{Name: t.name, Weight: uint32(t.weight), Running: t.running, Waiting: len(t.waiters),
			Grants: t.grants, Held: t.held})
	}
	return out
}
