//go:build !wasip1

package keyed

import "github.com/eddy-stream/eddy/sdk/go/internal/guest"

// Outside a Wasm guest there is no host: the calls below panic unless a
// test of this package has installed a fake one. Its methods mirror the
// imports, with slices for (pointer, length) pairs; a dst slice's length is
// the import's dst_cap.
type fakeHost interface {
	declare(kind int32, name string, ttlMs int64) int32
	get(id int32, key, dst []byte) int32
	declare2(kind int32, name string, ttlMs int64, schema uint32) int32
	get2(id int32, key, dst []byte, schema *uint32) int32
	list(id int32, key, dst []byte) int32
	mapGet(id int32, key, userKey, dst []byte) int32
	mapEntries(id int32, key, dst []byte) int32
	put(id int32, key, value []byte)
	append(id int32, key, value []byte)
	mapPut(id int32, key, userKey, value []byte)
	clear(id int32, key []byte)
	mapDelete(id int32, key, userKey []byte)
	timer(register bool, kind int32, key []byte, ts int64)
	watermark() int64
	processingTime() int64
}

var testHost fakeHost

func host() fakeHost {
	if testHost == nil {
		panic(guest.ErrNoHost)
	}
	return testHost
}

func hostDeclare(kind int32, name string, ttlMs int64) int32 {
	return host().declare(kind, name, ttlMs)
}

func hostGet(id int32, key, _, dst []byte) int32 { return host().get(id, key, dst) }
func hostDeclare2(kind int32, name string, ttlMs int64, schema uint32) int32 {
	return host().declare2(kind, name, ttlMs, schema)
}
func hostGet2(id int32, key, dst []byte, schema *uint32) int32 {
	return host().get2(id, key, dst, schema)
}
func hostList(id int32, key, _, dst []byte) int32 { return host().list(id, key, dst) }
func hostMapGet(id int32, key, userKey, dst []byte) int32 {
	return host().mapGet(id, key, userKey, dst)
}
func hostMapEntries(id int32, key, _, dst []byte) int32 { return host().mapEntries(id, key, dst) }

func hostPut(id int32, key, value []byte)             { host().put(id, key, value) }
func hostAppend(id int32, key, value []byte)          { host().append(id, key, value) }
func hostMapPut(id int32, key, userKey, value []byte) { host().mapPut(id, key, userKey, value) }
func hostClear(id int32, key []byte)                  { host().clear(id, key) }
func hostMapDelete(id int32, key, userKey []byte)     { host().mapDelete(id, key, userKey) }

func hostTimerRegister(kind int32, key []byte, ts int64) { host().timer(true, kind, key, ts) }
func hostTimerDelete(kind int32, key []byte, ts int64)   { host().timer(false, kind, key, ts) }

func hostWatermark() int64      { return host().watermark() }
func hostProcessingTime() int64 { return host().processingTime() }
