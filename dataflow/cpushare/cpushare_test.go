package cpushare

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

func newScheduler(t *testing.T, slots int) *Scheduler {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Slots = slots
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default", DefaultConfig(), true},
		{"no slots", Config{HalfLife: time.Second}, false},
		{"no half-life", Config{Slots: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// A tenant alone gets every slot at once, and nothing is left held.
func TestAloneGetsEverySlot(t *testing.T) {
	s := newScheduler(t, 3)
	g := s.Tenant("a", 1)
	var releases []func()
	for range 3 {
		r, err := g.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a fourth Acquire of 3 slots returned %v, want the deadline", err)
	}
	for _, r := range releases {
		r()
	}
	st := s.Stats()[0]
	if st.Running != 0 || st.Waiting != 0 || st.Grants != 3 {
		t.Fatalf("after the releases: %+v", st)
	}
}

// A cancelled wait hands nothing out and leaves nothing behind: the slot
// goes to the next waiter.
func TestCancelledWait(t *testing.T) {
	s := newScheduler(t, 1)
	a, b := s.Tenant("a", 1), s.Tenant("b", 1)
	release, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx)
		errc <- err
	}()
	testkit.Eventually(t, 5*time.Second, "b waits", func() bool { return s.Stats()[1].Waiting == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire returned %v", err)
	}
	release()
	// The slot is free again: another Acquire gets it at once.
	r2, err := b.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2()
	for _, st := range s.Stats() {
		if st.Running != 0 || st.Waiting != 0 {
			t.Fatalf("left behind: %+v", st)
		}
	}
}

// Hammer: many goroutines of two tenants; every slot is given back, never
// more than Slots are held at once.
func TestHammer(t *testing.T) {
	s := newScheduler(t, 2)
	var mu sync.Mutex
	holding, most := 0, 0
	var wg sync.WaitGroup
	for i := range 8 {
		g := s.Tenant([]string{"a", "b"}[i%2], uint32(1+i%2))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				release, err := g.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holding++
				most = max(most, holding)
				mu.Unlock()
				mu.Lock()
				holding--
				mu.Unlock()
				release()
			}
		}()
	}
	wg.Wait()
	if most > 2 {
		t.Errorf("%d slots held at once of 2", most)
	}
	var grants uint64
	for _, st := range s.Stats() {
		grants += st.Grants
		if st.Running != 0 || st.Waiting != 0 {
			t.Errorf("left behind: %+v", st)
		}
	}
	if grants != 8*500 {
		t.Errorf("%d grants, want %d", grants, 8*500)
	}
}

// BenchmarkAcquireRelease is the cost the gate adds to each guest call
// when slots are free.
func BenchmarkAcquireRelease(b *testing.B) {
	s, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	g := s.Tenant("a", 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		release, err := g.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}
