//go:build !wasip1

package fields

import "github.com/eddy-stream/eddy/sdk/go/internal/guest"

// Outside a Wasm guest there is no host: hostFields panics unless a test of
// this package has installed a fake one.
var testHost func(list []byte)

func hostFields(list []byte) {
	if testHost == nil {
		panic(guest.ErrNoHost)
	}
	testHost(list)
}
