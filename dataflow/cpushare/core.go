package cpushare

import (
	"math"
	"time"
)

// core is the scheduler's deterministic state machine: it does no locking,
// no I/O and reads no clock; every event carries its time. Scheduler wraps
// it with a mutex, channels and a timer.
type core struct {
	slots    int
	halfLife time.Duration
	linger   time.Duration
	inUse    int
	tenants  map[string]*tenant
	// order is the tenants in creation order, so that ties are broken the
	// same way in every run.
	order []*tenant
	// free recycles waiters granted on the spot, so that an uncontended
	// Acquire allocates nothing.
	free []*waiter
	// grants is dispatch's result, reused: the caller consumes it before
	// its next call into the core.
	grants []*waiter
}

// tenant is the scheduler's view of one tenant.
type tenant struct {
	name    string
	weight  float64
	running int       // slots held now
	waiters []*waiter // FIFO
	// usage is slot-seconds held, decayed with the half-life, as of last:
	// the tenant's recent CPU use. usage/weight is its virtual time.
	usage       float64
	last        time.Time
	lastRelease time.Time // zero until the first release
	grants      uint64
	held        time.Duration // slot time ever held, not decayed
}

// waiter is one Acquire waiting for a slot. ready is closed when granted
// (made only for a waiter that has to block).
type waiter struct {
	t       *tenant
	granted bool
	ready   chan struct{}
}

func newCore(cfg Config) *core {
	return &core{slots: cfg.Slots, halfLife: cfg.HalfLife, linger: cfg.Linger, tenants: map[string]*tenant{}}
}

// tenant returns the tenant named name, creating it, and sets its weight.
func (c *core) tenant(name string, weight uint32, now time.Time) *tenant {
	t := c.tenants[name]
	if t == nil {
		t = &tenant{name: name, last: now}
		c.tenants[name] = t
		c.order = append(c.order, t)
	}
	t.weight = float64(max(weight, 1)) // 0 means the default share
	return t
}

// advance brings t's usage up to now: the slots it held since t.last count
// in full, then the whole decays. (Holding a slot is counted as using CPU:
// the wall time of a guest call approximates its CPU time, see RATIONALE.)
func (c *core) advance(t *tenant, now time.Time) {
	dt := now.Sub(t.last)
	if dt <= 0 {
		return
	}
	t.held += time.Duration(t.running) * dt
	t.usage = t.usage*math.Exp2(-float64(dt)/float64(c.halfLife)) + float64(t.running)*dt.Seconds()
	t.last = now
}

// lingering reports whether t released a slot less than linger ago and
// holds or wants none now: a tenant between two short calls, for which a
// slot is kept free (see dispatch).
func (c *core) lingering(t *tenant, now time.Time) bool {
	return t.running == 0 && len(t.waiters) == 0 && !t.lastRelease.IsZero() && now.Sub(t.lastRelease) < c.linger
}

func (c *core) active(t *tenant, now time.Time) bool {
	return t.running > 0 || len(t.waiters) > 0 || c.lingering(t, now)
}

// request queues an Acquire of t and grants what can be granted. The
// returned waiter's granted field says whether it got its slot at once.
func (c *core) request(t *tenant, now time.Time) (*waiter, []*waiter, time.Time) {
	var w *waiter
	if n := len(c.free); n > 0 {
		w, c.free = c.free[n-1], c.free[:n-1]
		*w = waiter{t: t}
	} else {
		w = &waiter{t: t}
	}
	t.waiters = append(t.waiters, w)
	granted, wake := c.dispatch(now)
	return w, granted, wake
}

// recycle takes back a waiter granted by request on the spot, whose
// channel nobody holds.
func (c *core) recycle(w *waiter) {
	w.t = nil
	c.free = append(c.free, w)
}

// release returns one slot of t.
func (c *core) release(t *tenant, now time.Time) ([]*waiter, time.Time) {
	c.advance(t, now)
	t.running--
	c.inUse--
	t.lastRelease = now
	return c.dispatch(now)
}

// cancel withdraws a waiter whose caller gave up; a slot granted to it in
// the meantime is released.
func (c *core) cancel(w *waiter, now time.Time) ([]*waiter, time.Time) {
	if w.granted {
		return c.release(w.t, now)
	}
	t := w.t
	for i, x := range t.waiters {
		if x == w {
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			break
		}
	}
	return c.dispatch(now)
}

// capOf returns an active tenant's concurrency cap: its weight's share of
// the slots, at least one. A tenant at its cap gets another slot only when
// nobody under theirs could use it (work conservation).
func (c *core) capOf(t *tenant, total float64) int {
	return max(1, int(math.Round(float64(c.slots)*t.weight/total)))
}

// dispatch grants free slots to waiters: first to tenants under their cap,
// lowest virtual time (decayed usage / weight) first; then, if slots are
// still free, to tenants over their cap, except for one slot kept per
// lingering tenant (one that has just released and will likely ask again
// within a batch's gap: without it a light tenant would wait behind a
// heavy tenant's long call every batch). wake, when not zero, is when a
// linger ends and dispatch must run again.
func (c *core) dispatch(now time.Time) (granted []*waiter, wake time.Time) {
	granted = c.grants[:0]
	defer func() { c.grants = granted[:0] }()
	var total float64
	for _, t := range c.order {
		c.advance(t, now)
		if c.active(t, now) {
			total += t.weight
		}
	}
	for c.inUse < c.slots {
		var under, over *tenant
		reserved := 0
		for _, t := range c.order {
			if c.lingering(t, now) {
				if t.running < c.capOf(t, total) {
					reserved++
					if end := t.lastRelease.Add(c.linger); wake.IsZero() || end.Before(wake) {
						wake = end
					}
				}
				continue
			}
			if len(t.waiters) == 0 {
				continue
			}
			if t.running < c.capOf(t, total) {
				if under == nil || before(t, under) {
					under = t
				}
			} else if over == nil || before(t, over) {
				over = t
			}
		}
		pick := under
		if pick == nil {
			if over == nil || c.slots-c.inUse <= reserved {
				break
			}
			pick = over
		}
		w := pick.waiters[0]
		// Shifted rather than resliced, so that the queue's array is
		// reused and an uncontended Acquire allocates nothing.
		n := copy(pick.waiters, pick.waiters[1:])
		pick.waiters[n] = nil
		pick.waiters = pick.waiters[:n]
		pick.running++
		pick.grants++
		c.inUse++
		w.granted = true
		granted = append(granted, w)
	}
	if !c.anyWaiting() {
		wake = time.Time{} // a linger ending changes nothing for nobody
	}
	return granted, wake
}

func (c *core) anyWaiting() bool {
	for _, t := range c.order {
		if len(t.waiters) > 0 {
			return true
		}
	}
	return false
}

// before orders tenants by virtual time; equal times keep creation order.
func before(a, b *tenant) bool {
	return a.usage/a.weight < b.usage/b.weight
}
