package cpushare

import (
	"testing"
	"time"
)

// simTenant is one tenant of a simulation: threads callers, each making
// calls of length call, with gap between the end of one and the next
// request.
type simTenant struct {
	name    string
	weight  uint32
	threads int
	call    time.Duration
	gap     time.Duration
}

type simThread struct {
	t      *tenant
	spec   simTenant
	w      *waiter   // pending request, nil while holding or in its gap
	until  time.Time // end of the call or of the gap
	asking bool
}

// simulate runs the core for d of simulated time in steps of 50µs and
// returns each tenant's slot time held.
func simulate(t *testing.T, cfg Config, tenants []simTenant, d time.Duration) map[string]time.Duration {
	t.Helper()
	c := newCore(cfg)
	now := time.Unix(1000, 0)
	var threads []*simThread
	byWaiter := map[*waiter]*simThread{}
	// start begins the calls of the threads whose requests were granted.
	start := func(granted []*waiter) {
		for _, w := range granted {
			th := byWaiter[w]
			delete(byWaiter, w)
			th.w = nil
			th.until = now.Add(th.spec.call)
		}
	}
	for _, spec := range tenants {
		tn := c.tenant(spec.name, spec.weight, now)
		for range spec.threads {
			threads = append(threads, &simThread{t: tn, spec: spec, asking: true, until: now})
		}
	}
	const step = 50 * time.Microsecond
	for end := now.Add(d); now.Before(end); now = now.Add(step) {
		for _, th := range threads {
			if th.w != nil || now.Before(th.until) {
				continue
			}
			if !th.asking {
				// Its call ended.
				granted, _ := c.release(th.t, now)
				start(granted)
				th.asking = true
				th.until = now.Add(th.spec.gap)
				continue
			}
			w, granted, _ := c.request(th.t, now)
			th.w = w
			th.asking = false
			byWaiter[w] = th
			start(granted)
		}
		// The linger's end is a timer in Scheduler: dispatch every step.
		granted, _ := c.dispatch(now)
		start(granted)
		if c.inUse > c.slots {
			t.Fatalf("%d slots in use of %d", c.inUse, c.slots)
		}
	}
	held := map[string]time.Duration{}
	for _, tn := range c.order {
		c.advance(tn, now)
		held[tn.name] = tn.held
	}
	return held
}

func TestShares(t *testing.T) {
	cfg := func(slots int) Config {
		c := DefaultConfig()
		c.Slots = slots
		return c
	}
	const run = 10 * time.Second
	cases := []struct {
		name    string
		cfg     Config
		tenants []simTenant
		// want is the share of the slot time each tenant should get, in
		// tenant order, ±tolerance.
		want      []float64
		tolerance float64
		// busy: the fraction of slot time used over all tenants, at least.
		busy float64
	}{
		{"1:1 two slots", cfg(2),
			[]simTenant{{"a", 1, 4, 2 * time.Millisecond, 0}, {"b", 1, 4, 2 * time.Millisecond, 0}},
			[]float64{0.5, 0.5}, 0.05, 0.95},
		{"3:1 four slots", cfg(4),
			[]simTenant{{"a", 3, 6, 2 * time.Millisecond, 0}, {"b", 1, 6, 2 * time.Millisecond, 0}},
			[]float64{0.75, 0.25}, 0.05, 0.95},
		{"3:1 one slot, by virtual time", cfg(1),
			[]simTenant{{"a", 3, 3, time.Millisecond, 0}, {"b", 1, 3, time.Millisecond, 0}},
			[]float64{0.75, 0.25}, 0.05, 0.95},
		{"3:1 two slots, long and short calls", cfg(2),
			[]simTenant{{"a", 3, 4, 5 * time.Millisecond, 0}, {"b", 1, 4, 300 * time.Microsecond, 0}},
			[]float64{0.75, 0.25}, 0.1, 0.9},
		{"alone uses every slot", cfg(4),
			[]simTenant{{"a", 1, 8, time.Millisecond, 0}},
			[]float64{1}, 0, 0.95},
		{"busy neighbour of a light tenant keeps one slot", cfg(2),
			// b holds one slot at most: a may have the other, not b's
			// slot while b is between two batches.
			[]simTenant{{"a", 1, 2, 10 * time.Millisecond, 0}, {"b", 1, 1, time.Millisecond, 500 * time.Microsecond}},
			nil, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			held := simulate(t, tc.cfg, tc.tenants, run)
			t.Logf("held %v", held)
			var total time.Duration
			for _, h := range held {
				total += h
			}
			if busy := float64(total) / float64(time.Duration(tc.cfg.Slots)*run); busy < tc.busy {
				t.Errorf("slots were busy %.2f of the time, want at least %.2f (held %v)", busy, tc.busy, held)
			}
			for i, want := range tc.want {
				name := tc.tenants[i].name
				got := float64(held[name]) / float64(total)
				if got < want-tc.tolerance || got > want+tc.tolerance {
					t.Errorf("tenant %s got %.3f of the slot time, want %.2f±%.2f (held %v)", name, got, want, tc.tolerance, held)
				}
			}
			if tc.name == "busy neighbour of a light tenant keeps one slot" {
				// b alone would hold a slot 1ms of every 1.5ms: 2/3 of
				// the run. Beside a it must keep nearly that.
				if got, alone := held["b"], run*2/3; got < alone*9/10 {
					t.Errorf("b held %v beside a, %v alone", got, alone)
				}
				if got := held["a"]; got < run*9/10 {
					t.Errorf("a held %v, want about one slot all the time (%v)", got, run)
				}
			}
		})
	}
}

func TestCancelWithdraws(t *testing.T) {
	c := newCore(Config{Slots: 1, HalfLife: time.Second})
	now := time.Unix(1000, 0)
	a := c.tenant("a", 1, now)
	b := c.tenant("b", 1, now)
	w1, _, _ := c.request(a, now)
	if !w1.granted {
		t.Fatal("the first request of a free scheduler waits")
	}
	w2, _, _ := c.request(b, now)
	w3, _, _ := c.request(b, now)
	if w2.granted || w3.granted {
		t.Fatal("granted beyond the one slot")
	}
	c.cancel(w2, now)
	granted, _ := c.release(a, now.Add(time.Millisecond))
	if len(granted) != 1 || granted[0] != w3 {
		t.Fatalf("after a's release granted %v, want b's remaining request", granted)
	}
	// Cancelling a waiter that was granted in the meantime gives its slot back.
	c.cancel(w3, now.Add(2*time.Millisecond))
	if c.inUse != 0 || a.running != 0 || b.running != 0 || len(b.waiters) != 0 {
		t.Fatalf("left in use %d, a %d, b %d running, b %d waiting", c.inUse, a.running, b.running, len(b.waiters))
	}
}
