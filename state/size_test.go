package state

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// TestSize: a task's Size counts its own keyed state, not that of the
// task owning the other key groups nor of another operator.
func TestSize(t *testing.T) {
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			e := &env{t: t, kind: kind, clock: newFakeClock()}
			e.backend = kind.open(t, e.clock.now)
			left, right := Range{0, testMaxP / 2}, Range{testMaxP / 2, testMaxP}
			a := e.open(testScope, left)
			b := e.open(testScope, right)
			other := e.open(Scope{Tenant: "default", Job: "job", Operator: "other"}, Range{0, testMaxP})
			if n, err := a.(*store).Size(); err != nil || n != 0 {
				t.Fatalf("empty store: %d, %v", n, err)
			}
			val := make([]byte, 4<<10) // incompressible: Pebble counts bytes on disk
			_, _ = rand.NewChaCha8([32]byte{1}).Read(val)
			const many = 2048 // 8 MiB: more than a test memtable
			for i := range many {
				must(t, a.ValuePut("s", keyInGroups(left, i), nil, val, 0))
			}
			for i := range 8 {
				must(t, b.ValuePut("s", keyInGroups(right, i), nil, val, 0))
				must(t, other.ValuePut("s", []byte("k"+strconv.Itoa(i)), nil, val, 0))
			}
			want := int64(many * len(val))
			if strings.HasPrefix(kind.name, "pebble") {
				// What is still in the memtable is not counted: most of it
				// has been flushed (the test memtable is 4 MiB).
				want /= 4
			}
			testkit.Eventually(t, 20*time.Second, "the written state to be counted", func() bool {
				n, err := a.(*store).Size()
				return err == nil && n >= want
			})
			na, _ := a.(*store).Size()
			nb, err := b.(*store).Size()
			if err != nil || nb > na/8 {
				t.Fatalf("the other key groups' task counts %d bytes (%v) beside %d", nb, err, na)
			}
			if no, err := other.(*store).Size(); err != nil || no > na/8 {
				t.Fatalf("another operator counts %d bytes (%v) beside %d", no, err, na)
			}
		})
	}
}
