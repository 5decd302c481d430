package cpushare_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/cpushare"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// Two tenants run real guest calls through the gate: a CPU-heavy one (long
// calls) and a light one (short calls), each with more callers than
// slots. Each must get its weight's share of the slot time.
func TestGuestCallsShareByWeight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs guest code for a few seconds")
	}
	cases := []struct {
		name         string
		heavy, light uint32
	}{
		{"1:1", 1, 1},
		{"3:1", 3, 1},
		{"1:3", 1, 3},
	}
	ctx := context.Background()
	e, err := host.NewEngine(ctx, host.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	burn, err := e.Load(ctx, "../../host/testdata/burn.wasm")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]abi.Record, 16)
	for i := range recs {
		recs[i] = abi.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := cpushare.New(cpushare.Config{Slots: 1, HalfLife: 100 * time.Millisecond, Linger: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			gates := map[string]host.Gate{"heavy": s.Tenant("heavy", tc.heavy), "light": s.Tenant("light", tc.light)}
			spins := map[string]string{"heavy": `{"spins": 20000}`, "light": `{"spins": 500}`}
			calls := map[string]int{}
			var mu sync.Mutex
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for _, name := range []string{"heavy", "light"} {
				for range 2 {
					inst, err := burn.NewInstance(ctx, host.InstanceConfig{Name: name, Gate: gates[name]})
					if err != nil {
						t.Fatal(err)
					}
					defer inst.Close()
					if err := inst.Open([]byte(spins[name])); err != nil {
						t.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							select {
							case <-stop:
								return
							default:
							}
							if err := inst.Process(recs, nil); err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							calls[name]++
							mu.Unlock()
						}
					}()
				}
			}
			stopped := false
			defer func() { // on a failed wait, before the instances close
				if !stopped {
					close(stop)
					wg.Wait()
				}
			}()
			testkit.Eventually(t, 30*time.Second, "1.5 s of slot time handed out", func() bool {
				var held time.Duration
				for _, st := range s.Stats() {
					held += st.Held
				}
				return held >= 1500*time.Millisecond
			})
			close(stop)
			wg.Wait()
			stopped = true
			st := s.Stats()
			total := st[0].Held + st[1].Held
			got := float64(st[0].Held) / float64(total)
			want := float64(tc.heavy) / float64(tc.heavy+tc.light)
			t.Logf("heavy held %v in %d calls, light %v in %d calls: heavy share %.2f, want %.2f",
				st[0].Held, calls["heavy"], st[1].Held, calls["light"], got, want)
			if got < want-0.12 || got > want+0.12 {
				t.Errorf("heavy tenant got %.2f of the slot time, want %.2f±0.12", got, want)
			}
			if calls["light"] == 0 || calls["heavy"] == 0 {
				t.Errorf("a tenant made no call: %v", calls)
			}
		})
	}
}
