//go:build !unix

package host

import "context"

// withGuestMemory leaves wazero's own allocator on systems without mmap:
// growing memory then copies it (see memory_unix.go).
func withGuestMemory(ctx context.Context) context.Context { return ctx }
