//go:build !unix

package host

import (
	"context"

	"github.com/tetratelabs/wazero/experimental"
)

// withGuestMemory keeps a Go slice on systems without mmap, growing by
// doubling (so growing copies; see memory_unix.go), and bounded by limit
// when it is not 0.
func withGuestMemory(ctx context.Context, limit uint64) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(capacity, maximum uint64) experimental.LinearMemory {
		if limit > 0 {
			maximum = min(maximum, limit)
		}
		return &boundedMemory{limit: maximum, buf: make([]byte, 0, min(capacity, maximum))}
	}))
}
