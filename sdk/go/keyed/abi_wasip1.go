package keyed

import (
	"unsafe"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// The Wasm side of ABI version 2: the state, timer and time imports, and
// the eddy_on_timer export. The Go linker imports only the functions a
// module calls, so each import has a wrapper of its own: a module that uses
// only value state imports only state_declare, state_get and state_put
// (and state_clear if it clears).

//go:wasmimport eddy state_declare
func stateDeclare(kind int32, name string, ttlMs int64) int32

//go:wasmimport eddy state_get
func stateGet(id int32, key unsafe.Pointer, keyLen uint32, dst unsafe.Pointer, dstCap uint32) int32

//go:wasmimport eddy state_put
func statePut(id int32, key unsafe.Pointer, keyLen uint32, val unsafe.Pointer, valLen uint32)

//go:wasmimport eddy state_clear
func stateClear(id int32, key unsafe.Pointer, keyLen uint32)

//go:wasmimport eddy state_append
func stateAppend(id int32, key unsafe.Pointer, keyLen uint32, val unsafe.Pointer, valLen uint32)

//go:wasmimport eddy state_list
func stateList(id int32, key unsafe.Pointer, keyLen uint32, dst unsafe.Pointer, dstCap uint32) int32

//go:wasmimport eddy state_map_get
func stateMapGet(id int32, key unsafe.Pointer, keyLen uint32, uk unsafe.Pointer, ukLen uint32, dst unsafe.Pointer, dstCap uint32) int32

//go:wasmimport eddy state_map_put
func stateMapPut(id int32, key unsafe.Pointer, keyLen uint32, uk unsafe.Pointer, ukLen uint32, val unsafe.Pointer, valLen uint32)

//go:wasmimport eddy state_map_delete
func stateMapDelete(id int32, key unsafe.Pointer, keyLen uint32, uk unsafe.Pointer, ukLen uint32)

//go:wasmimport eddy state_map_entries
func stateMapEntries(id int32, key unsafe.Pointer, keyLen uint32, dst unsafe.Pointer, dstCap uint32) int32

//go:wasmimport eddy timer_register
func timerRegister(kind int32, key unsafe.Pointer, keyLen uint32, ts int64)

//go:wasmimport eddy timer_delete
func timerDelete(kind int32, key unsafe.Pointer, keyLen uint32, ts int64)

//go:wasmimport eddy current_watermark
func currentWatermark() int64

//go:wasmimport eddy processing_time
func processingTime() int64

//go:wasmimport eddy state_declare2
func stateDeclare2(kind int32, name string, ttlMs int64, schema uint32) int32

//go:wasmimport eddy state_get2
func stateGet2(id int32, key unsafe.Pointer, keyLen uint32, dst unsafe.Pointer, dstCap uint32, schema unsafe.Pointer) int32

// ptr is a slice as the (pointer, length) pair of an import. The whole
// capacity is offered where the host writes (dst, dst_cap).
func ptr(b []byte) (unsafe.Pointer, uint32) {
	return unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))
}

func hostDeclare(kind int32, name string, ttlMs int64) int32 { return stateDeclare(kind, name, ttlMs) }

func hostDeclare2(kind int32, name string, ttlMs int64, schema uint32) int32 {
	return stateDeclare2(kind, name, ttlMs, schema)
}

func hostGet2(id int32, key, dst []byte, schema *uint32) int32 {
	k, kn := ptr(key)
	d, dn := ptr(dst)
	return stateGet2(id, k, kn, d, dn, unsafe.Pointer(schema))
}

func hostGet(id int32, key, _, dst []byte) int32 {
	k, kn := ptr(key)
	d, dn := ptr(dst)
	return stateGet(id, k, kn, d, dn)
}

func hostList(id int32, key, _, dst []byte) int32 {
	k, kn := ptr(key)
	d, dn := ptr(dst)
	return stateList(id, k, kn, d, dn)
}

func hostMapGet(id int32, key, userKey, dst []byte) int32 {
	k, kn := ptr(key)
	u, un := ptr(userKey)
	d, dn := ptr(dst)
	return stateMapGet(id, k, kn, u, un, d, dn)
}

func hostMapEntries(id int32, key, _, dst []byte) int32 {
	k, kn := ptr(key)
	d, dn := ptr(dst)
	return stateMapEntries(id, k, kn, d, dn)
}

func hostPut(id int32, key, value []byte) {
	k, kn := ptr(key)
	v, vn := ptr(value)
	statePut(id, k, kn, v, vn)
}

func hostAppend(id int32, key, value []byte) {
	k, kn := ptr(key)
	v, vn := ptr(value)
	stateAppend(id, k, kn, v, vn)
}

func hostMapPut(id int32, key, userKey, value []byte) {
	k, kn := ptr(key)
	u, un := ptr(userKey)
	v, vn := ptr(value)
	stateMapPut(id, k, kn, u, un, v, vn)
}

func hostClear(id int32, key []byte) {
	k, kn := ptr(key)
	stateClear(id, k, kn)
}

func hostMapDelete(id int32, key, userKey []byte) {
	k, kn := ptr(key)
	u, un := ptr(userKey)
	stateMapDelete(id, k, kn, u, un)
}

func hostTimerRegister(kind int32, key []byte, ts int64) {
	k, kn := ptr(key)
	timerRegister(kind, k, kn, ts)
}

func hostTimerDelete(kind int32, key []byte, ts int64) {
	k, kn := ptr(key)
	timerDelete(kind, k, kn, ts)
}

func hostWatermark() int64 { return currentWatermark() }

func hostProcessingTime() int64 { return processingTime() }

// The host writes the batch of fired timers where it writes input batches:
// into the buffer eddy_alloc returned.
//
//go:wasmexport eddy_on_timer
func exportOnTimer(ptr, n uint32) int32 {
	batch, ok := guest.InputSpan("timer batch", ptr, n)
	if !ok {
		return abi.StatusError
	}
	return onTimers(batch)
}
