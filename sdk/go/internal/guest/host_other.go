//go:build !wasip1

package guest

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
