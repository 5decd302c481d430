//go:build !wasip1

package eddy

// Outside a Wasm guest there is no host: the calls below panic unless a
// test of this package has installed a fake one.

type fakeHost interface {
	emit(batch []byte)
	log(level int32, msg string)
	fail(msg string)
}

var testHost fakeHost

const errNoHost = "eddy: not running inside the Eddy host (build the module with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared)"

func hostEmit(batch []byte) {
	if testHost == nil {
		panic(errNoHost)
	}
	testHost.emit(batch)
}

func hostLog(level int32, msg string) {
	if testHost == nil {
		panic(errNoHost)
	}
	testHost.log(level, msg)
}

func hostFail(msg string) {
	if testHost == nil {
		panic(errNoHost)
	}
	testHost.fail(msg)
}
