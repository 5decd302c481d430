//go:build unix

package host

import (
	"context"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// withGuestMemory makes the instances instantiated under ctx keep their
// linear memory in a mapping of its own, reserved at its maximum and
// touched only as the guest uses it.
//
// Without it wazero keeps the memory in a Go slice and grows it with
// append: each memory.grow of a page past the capacity allocates a larger
// slice and copies the old one, which stays on the heap until the
// collector runs, and the collector lets the heap double before it does.
// A memory.grow bomb held to 64 MiB cost the process 260–350 MiB that
// way. A mapping never moves, so growing copies nothing; its pages cost
// nothing until written (MAP_NORESERVE); and it is unmapped when the
// instance closes, not when the collector gets round to it. The bound per
// instance is then its memory limit, in pages the guest wrote.
//
// limit, when not 0, bounds the memory below the module's maximum: an
// instance's own limit (InstanceLimits) below the runtime's.
func withGuestMemory(ctx context.Context, limit uint64) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, maximum uint64) experimental.LinearMemory {
		if limit > 0 {
			maximum = min(maximum, limit)
		}
		return &mappedMemory{max: maximum}
	}))
}

// mappedMemory is a linear memory in an anonymous private mapping of max
// bytes, made on the first Reallocate.
type mappedMemory struct {
	buf []byte // the whole mapping; nil before the first Reallocate and after Free
	max uint64
}

// Reallocate returns the first size bytes of the mapping, which never
// moves: nil (memory.grow fails) past the maximum or if it cannot be
// mapped.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if m.buf == nil {
		if m.max == 0 {
			return []byte{}
		}
		b, err := syscall.Mmap(-1, 0, int(m.max), syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
		if err != nil {
			return nil
		}
		m.buf = b
	}
	return m.buf[:size]
}

// Free unmaps the memory. wazero calls it when the instance closes, which
// the host does only once no guest call of it is running (Instance.release,
// Engine.Close after the calls drained).
func (m *mappedMemory) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}
