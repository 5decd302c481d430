package eddy

import (
	"fmt"
	"unsafe"

	"github.com/eddy-stream/eddy/abi"
)

// The Wasm side of the ABI: exports the host calls and imports the guest
// calls. Everything else in the package is plain Go so that it can be
// tested natively (see host_other.go).

//go:wasmimport eddy emit
func emitImport(ptr unsafe.Pointer, n uint32)

// A string parameter is passed as (ptr i32, len i32).
//
//go:wasmimport eddy log
func logImport(level int32, msg string)

//go:wasmimport eddy fail
func failImport(msg string)

func hostEmit(batch []byte) { emitImport(unsafe.Pointer(unsafe.SliceData(batch)), uint32(len(batch))) }

func hostLog(level int32, msg string) { logImport(level, msg) }

func hostFail(msg string) { failImport(msg) }

// input is the one growing buffer of eddy_alloc: the host writes the
// configuration and then every batch into it. It stays referenced here so
// the collector keeps it while the host writes into it.
var input []byte

// minInput saves the reallocations a tiny configuration buffer followed by
// the first batch would otherwise cause.
const minInput = 64 << 10

// maxInput bounds eddy_alloc below what a 32-bit address space can hold, so
// absurd sizes return 0 as the ABI asks instead of crashing the runtime.
const maxInput = 1 << 30

//go:wasmexport eddy_abi_version
func exportABIVersion() int32 { return abi.Version }

// Allocation failures in Go are fatal (they trap) rather than returning 0,
// so only sizes beyond maxInput get the ABI's 0.
//
//go:wasmexport eddy_alloc
func exportAlloc(size uint32) uint32 {
	if size > maxInput {
		return 0
	}
	if uint32(len(input)) < size || len(input) == 0 {
		// The ABI lets each call invalidate the previous buffer, so the old
		// contents need not be kept; dropping it first lets the collector
		// reuse its memory for the new one.
		grown := max(size, minInput, min(2*uint32(len(input)), maxInput))
		input = nil
		input = make([]byte, grown)
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

// inputSpan returns the part of the eddy_alloc buffer at [ptr, ptr+n). The
// host must pass a range of that buffer; checking it means the guest never
// builds a slice over memory it does not own.
func inputSpan(ptr, n uint32) ([]byte, bool) {
	if len(input) == 0 {
		return nil, false
	}
	base := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
	if ptr < base || uint64(ptr-base)+uint64(n) > uint64(len(input)) {
		return nil, false
	}
	off := ptr - base
	return input[off : off+n : off+n], true
}

func outsideInput(what string, ptr, n uint32) int32 {
	return fail(fmt.Sprintf("eddy: %s [%d, %d) is not inside the buffer returned by eddy_alloc",
		what, ptr, uint64(ptr)+uint64(n)))
}

//go:wasmexport eddy_open
func exportOpen(ptr, n uint32) int32 {
	config, ok := inputSpan(ptr, n)
	if !ok {
		return outsideInput("config", ptr, n)
	}
	return guestOpen(config)
}

//go:wasmexport eddy_process
func exportProcess(ptr, n uint32) int32 {
	batch, ok := inputSpan(ptr, n)
	if !ok {
		return outsideInput("batch", ptr, n)
	}
	return guestProcess(batch)
}

//go:wasmexport eddy_close
func exportClose() int32 { return guestClose() }
