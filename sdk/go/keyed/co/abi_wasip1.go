package co

import (
	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// The host writes each batch where it writes every input batch: into the
// buffer eddy_alloc returned.
//
//go:wasmexport eddy_process2
func exportProcess2(input, ptr, n uint32) int32 {
	batch, ok := guest.InputSpan("batch", ptr, n)
	if !ok {
		return abi.StatusError
	}
	return process2(input, batch)
}
