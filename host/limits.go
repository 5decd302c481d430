package host

import (
	"context"
	"time"

	"github.com/eddy-stream/eddy/abi"
)

// InstanceLimits are bounds of one tenant's instances that are tighter
// than the engine's (Config): its quota, which a worker applies to every
// instance of the tenant's tasks. A zero field bounds nothing beyond the
// engine's own limit, and a limit above the engine's is the engine's: a
// tenant's quota narrows what the worker's operator allows, it never
// widens it.
type InstanceLimits struct {
	// MemoryBytes bounds the linear memory of one instance, rounded down
	// to whole 64 KiB pages (at least one).
	MemoryBytes uint64
	// CallTimeout is the deadline of one guest call (one batch).
	CallTimeout time.Duration
	// EmitBytes and EmitRecords bound what one guest call may emit
	// (Config.MaxEmitBytes, MaxEmitRecords).
	EmitBytes   int64
	EmitRecords int64
}

type limitsKey struct{}

// WithInstanceLimits returns a context whose instances (Module.NewInstance
// with it, or with a context derived from it) are bound by l. The limits
// ride on the context so that one call by the worker for a deployment
// reaches every instance of every operator of its tasks, wasm operators
// and window aggregates alike, without each layer in between carrying
// them.
func WithInstanceLimits(ctx context.Context, l InstanceLimits) context.Context {
	return context.WithValue(ctx, limitsKey{}, l)
}

// InstanceLimitsFrom returns the limits WithInstanceLimits put in ctx (the
// zero InstanceLimits if none).
func InstanceLimitsFrom(ctx context.Context) InstanceLimits {
	l, _ := ctx.Value(limitsKey{}).(InstanceLimits)
	return l
}

// applyLimits narrows an instance's memory limit, deadline and emit
// bounds to l. wazero's memory limit is one per runtime, so a tighter
// bound of one instance is its memory allocator's (withGuestMemory
// refuses to grow beyond i.memLimit: memory.grow then returns -1 to the
// guest, as at the runtime's limit).
func (i *Instance) applyLimits(l InstanceLimits) error {
	if l.CallTimeout > 0 && l.CallTimeout < i.timeout {
		i.timeout = l.CallTimeout
	}
	if l.EmitBytes > 0 && uint64(l.EmitBytes) < i.limits.bytes {
		i.limits.bytes = uint64(l.EmitBytes)
	}
	if l.EmitRecords > 0 && uint64(l.EmitRecords) < i.limits.records {
		i.limits.records = uint64(l.EmitRecords)
	}
	if l.MemoryBytes == 0 || l.MemoryBytes >= i.memLimit {
		return nil
	}
	limit := max(l.MemoryBytes/wasmPageSize, 1) * wasmPageSize
	if mem, ok := i.module.compiled.ExportedMemories()[abi.ExportMemory]; ok {
		if initial := uint64(mem.Min()) * wasmPageSize; initial > limit {
			return markf([]error{ErrMemoryLimit}, "%s: the module starts with %s of memory, above the tenant's memory limit of %s",
				i.who, sizeString(initial), sizeString(limit))
		}
	}
	i.memLimit = limit
	return nil
}

// boundedMemory backs a linear memory that never grows beyond limit, where
// memory cannot be mapped (memory_other.go). It grows like append
// (capacity doubling) so that a guest growing page by page does not copy
// its memory each time; a guest's memory never shrinks, so bytes past the
// length within the capacity are still zero.
type boundedMemory struct {
	limit uint64
	buf   []byte
}

func (b *boundedMemory) Reallocate(size uint64) []byte {
	if size > b.limit {
		return nil
	}
	if size <= uint64(cap(b.buf)) {
		b.buf = b.buf[:size]
		return b.buf
	}
	grown := make([]byte, size, min(max(size, 2*uint64(cap(b.buf))), b.limit))
	copy(grown, b.buf)
	b.buf = grown
	return b.buf
}

func (b *boundedMemory) Free() { b.buf = nil }
