package aggregate

import (
	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

// The Wasm side of ABI version 3: the aggregate exports. The host writes
// each batch where it writes input batches, into the buffer eddy_alloc
// returned; guest.InputSpan checks that it did.

//go:wasmexport eddy_agg_create
func exportCreate() int32 { return create() }

//go:wasmexport eddy_agg_add
func exportAdd(ptr, n uint32) int32 {
	batch, ok := guest.InputSpan(abi.ExportAggAdd+" batch", ptr, n)
	if !ok {
		return abi.StatusError
	}
	return add(batch)
}

//go:wasmexport eddy_agg_merge
func exportMerge(ptr, n uint32) int32 {
	batch, ok := guest.InputSpan(abi.ExportAggMerge+" batch", ptr, n)
	if !ok {
		return abi.StatusError
	}
	return merge(batch)
}

//go:wasmexport eddy_agg_result
func exportResult(ptr, n uint32) int32 {
	batch, ok := guest.InputSpan(abi.ExportAggResult+" batch", ptr, n)
	if !ok {
		return abi.StatusError
	}
	return results(batch)
}
