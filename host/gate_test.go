package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// refusingGate fails every Acquire with err.
type refusingGate struct{ err error }

func (g refusingGate) Acquire(context.Context) (func(), error) { return nil, g.err }

// Every guest call goes through the gate and gives its slot back; a gate
// that refuses fails the call with its reason.
func TestGate(t *testing.T) {
	e := newTestEngine(t, Config{})
	echo := loadFixture(t, e, "echo")
	t.Run("admits every call", func(t *testing.T) {
		g := newCountingGate()
		i, err := echo.NewInstance(context.Background(), InstanceConfig{Name: "gate/echo", Gate: g})
		if err != nil {
			t.Fatal(err)
		}
		defer i.Close()
		if err := i.Open(nil); err != nil {
			t.Fatal(err)
		}
		opened := g.n
		if opened < 2 { // _initialize, eddy_alloc for the configuration, eddy_open
			t.Fatalf("%d calls admitted by Open, want its guest calls", opened)
		}
		for range 3 {
			if err := i.Process([]abi.Record{{Key: []byte("k"), Value: []byte("v")}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := i.Finish(nil); err != nil {
			t.Fatal(err)
		}
		if g.n != opened+4 || g.released != g.n {
			t.Fatalf("admitted %d calls, released %d; want %d admitted, all released", g.n, g.released, opened+4)
		}
	})
	t.Run("refused", func(t *testing.T) {
		cause := errors.New("cpushare: tenant t: waiting for a CPU slot: context canceled")
		_, err := echo.NewInstance(context.Background(), InstanceConfig{Name: "gate/echo", Gate: refusingGate{cause}})
		if !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "operator gate/echo: ") {
			t.Fatalf("NewInstance with a refusing gate: %v", err)
		}
	})
}
