package guest

import (
	"fmt"
	"unsafe"

	"github.com/eddy-stream/eddy/abi"
)

// The Wasm side of the version 1 ABI: exports the host calls and imports
// the guest calls. Everything else in the package is plain Go so that it
// can be tested natively (see host_other.go). //go:wasmexport works in any
// package linked into the module, so importing package eddy (which imports
// this one) is what defines these exports.

//go:wasmimport eddy emit
func emitImport(ptr unsafe.Pointer, n uint32)

// A string parameter is passed as (ptr i32, len i32).
//
//go:wasmimport eddy log
func logImport(level int32, msg string)

//go:wasmimport eddy fail
func failImport(msg string)

func hostEmit(batch []byte) { emitImport(unsafe.Pointer(unsafe.SliceData(batch)), uint32(len(batch))) }

// partsByAddress is true where a part list can name a slice by its
// address in the module's memory (version 7's values in parts).
const partsByAddress = true

// putParts writes parts into list (abi.PartSize bytes each, as
// Writer.AppendPartList returned it): one 8-byte store per part, the
// address in the low half and the length in the high one, which is the
// ABI's little-endian (u32 address, u32 length). Go's wasm backend makes
// every bounds check and byte store cost, so the loop uses neither.
func putParts(list []byte, parts [][]byte) {
	if len(list) < abi.PartSize*len(parts) {
		panic("guest: part list too short")
	}
	base := unsafe.Pointer(unsafe.SliceData(list))
	for p, b := range parts {
		*(*uint64)(unsafe.Add(base, abi.PartSize*p)) = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))&0xFFFFFFFF) | uint64(len(b))<<32
	}
}

// partOf is b as a part of a part list: its address in the module's
// memory in the low half, its length in the high one.
func partOf(b []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))&0xFFFFFFFF | uint64(len(b))<<32
}

// spanParts sets dst[j] to the part of row entry j of the row at offset
// row of batch (after its u32 validity word: 8 bytes a path, u32 offset
// in batch and u32 length, as the host wrote them), 0 when the entry is
// absent, and reports whether the validity word is 1. The entry is the
// part but for the batch's address, which it adds: one 8-byte load, a
// compare and a store a path, with no bounds check (the callers stay
// inside the declared span paths of a row of the table RunInput checked).
func spanParts(batch []byte, row int, dst []uint64) bool {
	base := unsafe.Pointer(unsafe.SliceData(batch))
	at := unsafe.Add(base, row+4)
	for j := range dst {
		e := *(*uint64)(unsafe.Add(at, 8*j))
		if uint32(e) == abi.FieldAbsent {
			dst[j] = 0
			continue
		}
		dst[j] = e + uint64(uintptr(base))
	}
	return *(*uint32)(unsafe.Add(base, row)) == 1
}

// rowWord is RowWord's load, with no bounds check: its callers stay
// inside a row of the table RunInput checked.
func rowWord(batch []byte, at int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(batch)), at))
}

// partBytes is for the native fallback of EmitPartList, never taken in
// Wasm (partsByAddress).
func partBytes(uint64) []byte { panic("guest: partBytes in Wasm") }

// keepParts and dropParts have nothing to do in Wasm, where a part is an
// address (see host_other.go).
func keepParts() {}
func dropParts() {}

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
func exportABIVersion() int32 { return ABIVersion() }

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

// InputSpan returns the part of the eddy_alloc buffer at [ptr, ptr+n). When
// the host passed a range outside it, InputSpan fails the current call and
// returns false: the caller returns abi.StatusError. Checking means the
// guest never builds a slice over memory it does not own.
func InputSpan(what string, ptr, n uint32) ([]byte, bool) {
	if len(input) != 0 {
		base := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
		if ptr >= base && uint64(ptr-base)+uint64(n) <= uint64(len(input)) {
			off := ptr - base
			return input[off : off+n : off+n], true
		}
	}
	fail(fmt.Sprintf("eddy: %s [%d, %d) is not inside the buffer returned by eddy_alloc",
		what, ptr, uint64(ptr)+uint64(n)))
	return nil, false
}

//go:wasmexport eddy_open
func exportOpen(ptr, n uint32) int32 {
	config, ok := InputSpan("config", ptr, n)
	if !ok {
		return abi.StatusError
	}
	return Open(config)
}

//go:wasmexport eddy_process
func exportProcess(ptr, n uint32) int32 {
	batch, ok := InputSpan("batch", ptr, n)
	if !ok {
		return abi.StatusError
	}
	return Process(batch)
}

//go:wasmexport eddy_close
func exportClose() int32 { return Close() }
