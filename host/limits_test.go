package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
)

// TestInstanceLimits: a tenant's limits narrow one instance's memory and
// deadline below the engine's, and never widen them; other instances of the
// same module keep the engine's.
func TestInstanceLimits(t *testing.T) {
	one := []abi.Record{{Key: []byte("k"), Value: []byte("v")}}
	tests := []struct {
		name   string
		module string
		limits InstanceLimits
		is     error
		words  string
	}{
		{name: "memory below the engine's", module: "grow_bomb", limits: InstanceLimits{MemoryBytes: 3 << 20},
			is: ErrMemoryLimit, words: "memory limit of 3 MiB reached"},
		{name: "memory above the engine's is the engine's", module: "grow_bomb", limits: InstanceLimits{MemoryBytes: 1 << 30},
			is: ErrMemoryLimit, words: "memory limit of 8 MiB reached"},
		{name: "deadline below the engine's", module: "loop", limits: InstanceLimits{CallTimeout: 100 * time.Millisecond},
			is: ErrDeadline, words: "exceeded its 100ms deadline"},
		{name: "emitted bytes below the engine's", module: "echo", limits: InstanceLimits{EmitBytes: 10},
			is: ErrEmitLimit, words: "limit max_emit_bytes=10"},
	}
	e := newTestEngine(t, Config{MemoryLimit: 8 << 20, CallTimeout: 3 * time.Second})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadFixture(t, e, tt.module)
			ctx := WithInstanceLimits(context.Background(), tt.limits)
			i, err := m.NewInstance(ctx, InstanceConfig{Name: "job/" + tt.module + "[0]"})
			if err != nil {
				t.Fatalf("NewInstance: %v", err)
			}
			defer i.Close()
			if err := i.Open(nil); err != nil {
				t.Fatalf("Open: %v", err)
			}
			err = i.Process(one, func([]abi.Record) {})
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.words) {
				t.Fatalf("Process: %v, want %v with %q", err, tt.is, tt.words)
			}
		})
	}
	t.Run("an instance without limits keeps the engine's", func(t *testing.T) {
		i := newTestInstance(t, loadFixture(t, e, "grow_bomb"), "job/grow_bomb[1]")
		if err := i.Open(nil); err != nil {
			t.Fatal(err)
		}
		err := i.Process(one, func([]abi.Record) {})
		if !errors.Is(err, ErrMemoryLimit) || !strings.Contains(err.Error(), "memory limit of 8 MiB reached") {
			t.Fatalf("Process: %v", err)
		}
	})
	t.Run("a module whose initial memory exceeds the limit is refused at instantiation", func(t *testing.T) {
		m := loadFixture(t, e, "echo")
		_, err := m.NewInstance(WithInstanceLimits(context.Background(), InstanceLimits{MemoryBytes: 1}), InstanceConfig{Name: "job/echo[0]"})
		if !errors.Is(err, ErrMemoryLimit) || !strings.Contains(err.Error(), "above the tenant's memory limit of 64 KiB") {
			t.Fatalf("NewInstance: %v", err)
		}
	})
}
