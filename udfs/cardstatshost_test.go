//go:build !wasip1

// The host package (wazero, Pebble) is native only; these tests run the
// modules through it.

package udfs_test

// card-stats through the real host (package host), as the window operator
// drives an aggregate module: one group per call.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/udfs/cardstats/stats"
)

// hostAgg is an aggregate module instance of the real host.
type hostAgg struct{ inst *host.Instance }

// hostModules are the modules compiled by the real host, shared by the
// tests: compiling a Go module takes seconds.
var hostModules struct {
	sync.Mutex
	engine  *host.Engine
	modules map[string]*host.Module
}

// hostModule compiles build/name.wasm with the real host, once.
func hostModule(t testing.TB, name string) *host.Module {
	t.Helper()
	hostModules.Lock()
	defer hostModules.Unlock()
	if hostModules.engine == nil {
		// Not closed: it lives as long as the test binary.
		e, err := host.NewEngine(context.Background(), host.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		hostModules.engine, hostModules.modules = e, map[string]*host.Module{}
	}
	if m, ok := hostModules.modules[name]; ok {
		return m
	}
	wasm, err := os.ReadFile(filepath.Join("build", name+".wasm"))
	if err != nil {
		t.Fatalf("%v (run make -C udfs)", err)
	}
	m, err := hostModules.engine.Compile(context.Background(), name, wasm)
	if err != nil {
		t.Fatal(err)
	}
	hostModules.modules[name] = m
	return m
}

func newHostAgg(t testing.TB, name string) hostAgg {
	t.Helper()
	m := hostModule(t, name)
	if !m.IsAggregate() || m.ABIVersion() != abi.AggregateVersion {
		t.Fatalf("%s: IsAggregate %v, ABI version %d", name, m.IsAggregate(), m.ABIVersion())
	}
	inst, err := m.NewInstance(context.Background(), host.InstanceConfig{Name: "test/" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	if err := inst.Open([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	return hostAgg{inst}
}

func (h hostAgg) create(t testing.TB) []byte {
	t.Helper()
	acc, err := h.inst.AggCreate()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(acc)
}

func (h hostAgg) add(t testing.TB, groups []addGroup) [][]byte {
	t.Helper()
	var out [][]byte
	for _, g := range groups {
		acc, err := h.inst.AggAdd(g.acc, g.recs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(acc))
	}
	return out
}

func (h hostAgg) merge(t testing.TB, groups []mergeGroup) [][]byte {
	t.Helper()
	var out [][]byte
	for _, g := range groups {
		acc, err := h.inst.AggMerge(g.acc, g.others)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(acc))
	}
	return out
}

func (h hostAgg) result(t testing.TB, accs [][]byte) [][]byte {
	t.Helper()
	var out [][]byte
	for i, a := range accs {
		r, err := h.inst.AggResult([]byte(fmt.Sprint("card-", i)), int64(i)*60_000-1, a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(r))
	}
	return out
}

// TestCardStatsHost runs card-stats in Go and C through the host API over
// random transactions with random splits into adds and merges; both must
// give the bytes of package stats at every step.
func TestCardStatsHost(t *testing.T) {
	names := []string{"native"}
	impls := []aggregator{&nativeStats{}}
	for _, lang := range modules {
		names = append(names, "card-stats-"+lang)
		impls = append(impls, newHostAgg(t, "card-stats-"+lang))
	}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			runAggScenario(t, rng, genCardTxns(rng, 1+rng.IntN(600)), names, impls)
		})
	}
}

// TestCardStatsHostBadAccumulator checks that an accumulator that does not
// decode fails the call with the aggregate's message, and leaves the
// instance usable.
func TestCardStatsHostBadAccumulator(t *testing.T) {
	txn := []abi.Record{{Value: []byte(`{"amount":2.5,"country":"FR"}`)}}
	good := stats.AppendEmpty(nil)
	for _, lang := range modules {
		h := newHostAgg(t, "card-stats-"+lang)
		for _, bad := range badAccumulators {
			_, want := stats.Decode(bad)
			calls := map[string]func() ([]byte, error){
				"add":    func() ([]byte, error) { return h.inst.AggAdd(bad, txn) },
				"merge":  func() ([]byte, error) { return h.inst.AggMerge(good, [][]byte{good, bad}) },
				"result": func() ([]byte, error) { return h.inst.AggResult([]byte("k"), 59_999, bad) },
			}
			for what, call := range calls {
				out, err := call()
				if err == nil || !errors.Is(err, host.ErrOperatorFailed) || !strings.Contains(err.Error(), want.Error()) {
					t.Errorf("%s: %s of %x = %q, %v; want ErrOperatorFailed with %q", lang, what, bad, out, err, want)
				}
			}
		}
		acc, err := h.inst.AggAdd(good, txn)
		if err != nil {
			t.Fatalf("%s: the instance is unusable after the failures: %v", lang, err)
		}
		if want, _, _ := stats.AddValue(nil, good, txn[0].Value, nil); !bytes.Equal(acc, want) {
			t.Fatalf("%s: %x, want %x", lang, acc, want)
		}
	}
}
