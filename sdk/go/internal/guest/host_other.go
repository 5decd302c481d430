//go:build !wasip1

package guest

import (
	"encoding/binary"

	"github.com/eddy-stream/eddy/abi"
)

// Outside a Wasm guest there is no host: the calls below panic unless a
// test has installed a fake one with SetTestHost.

// Host is the version 1 imports, for tests that run the SDK natively.
type Host interface {
	Emit(batch []byte)
	Log(level int32, msg string)
	Fail(msg string)
}

var testHost Host

// SetTestHost makes h the host of a native test and resets the guest:
// registered operator, output buffer and version-independent call state.
// It returns a function that undoes it.
func SetTestHost(h Host, op Operator) (undo func()) {
	testHost, registered = h, op
	out.Reset(outBuf[:])
	emitting, opening, key, hasKey = false, false, nil, false
	fieldPaths, fieldRowSize, fieldBatch, fieldRow = 0, 0, nil, -1
	partTable, partsKept = nil, 0
	return func() { testHost, registered = nil, nil }
}

// ErrNoHost is the panic of every import outside a Wasm guest.
const ErrNoHost = "eddy: not running inside the Eddy host (build the module with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared)"

func hostEmit(batch []byte) {
	if testHost == nil {
		panic(ErrNoHost)
	}
	testHost.Emit(batch)
}

func hostLog(level int32, msg string) {
	if testHost == nil {
		panic(ErrNoHost)
	}
	testHost.Log(level, msg)
}

func hostFail(msg string) {
	if testHost == nil {
		panic(ErrNoHost)
	}
	testHost.Fail(msg)
}

// partsByAddress is false outside Wasm: a native pointer is not an address
// in a module's memory, so EmitParts gathers the value itself and emits
// it whole (what the host would have gathered).
const partsByAddress = false

func putParts([]byte, [][]byte) { panic("guest: part lists outside Wasm") }

// Outside Wasm a part cannot be an address in the module's memory, so it
// is an index (from 1, 0 being no part) into partTable in the low half,
// and the length in the high half as in Wasm. The parts made during Open
// (the operator's constants) are kept; those made while processing are
// dropped at the start of the next batch, which their bytes need not
// outlive.
var (
	partTable [][]byte
	partsKept int
)

func partOf(b []byte) uint64 {
	partTable = append(partTable, b)
	return uint64(len(partTable)) | uint64(len(b))<<32
}

func partBytes(p uint64) []byte {
	if uint32(p) == 0 {
		return nil
	}
	return partTable[uint32(p)-1]
}

func spanParts(batch []byte, row int, dst []uint64) bool {
	le := binary.LittleEndian
	entries := batch[row+4 : row+4+8*len(dst)]
	for j := range dst {
		off := le.Uint32(entries[8*j:])
		if off == abi.FieldAbsent {
			dst[j] = 0
			continue
		}
		end := int(off) + int(le.Uint32(entries[8*j+4:]))
		dst[j] = partOf(batch[off:end:end])
	}
	return le.Uint32(batch[row:]) == 1
}

func rowWord(batch []byte, at int) uint64 { return binary.LittleEndian.Uint64(batch[at:]) }

func keepParts() { partsKept = len(partTable) }
func dropParts() { clear(partTable[partsKept:]); partTable = partTable[:partsKept] }
