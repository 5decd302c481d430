package eddy

import (
	"fmt"
	"runtime/debug"

	"github.com/eddy-stream/eddy/abi"
)

// The guest's state. Everything handed to the host lives in package-level
// variables so that the garbage collector never frees memory the host is
// about to read; the host calls the module from one goroutine, so nothing
// here needs locking.
var (
	registered Operator

	// outBuf is the output batch: entries from the front, data from the
	// back (abi.Writer), handed to the host as a whole.
	outBuf [OutputBufferSize]byte
	out    = newOutput()
	// spill holds a record larger than outBuf while the host reads it.
	spill []byte

	// records is reused across batches to decode without allocating.
	records []Record

	// emitting is true while Emit may hand batches to the host: the ABI
	// allows emit only during eddy_process and eddy_close.
	emitting bool
)

func newOutput() abi.Writer {
	var w abi.Writer
	w.Reset(outBuf[:])
	return w
}

func emit(r *Record) {
	if !emitting {
		panic("eddy: Emit called outside Process and Close")
	}
	if out.Append(r) {
		return
	}
	flush()
	if out.Append(r) {
		return
	}
	// Larger than the whole output buffer: hand it over alone, after the
	// records before it so that order is kept.
	spill = make([]byte, abi.HeaderSize+abi.RecordSize(r))
	var w abi.Writer
	w.Reset(spill)
	w.Append(r)
	hostEmit(w.Bytes())
	spill = nil // a rare giant record should not pin its memory
}

func flush() {
	if out.Len() == 0 {
		return
	}
	hostEmit(out.Bytes())
	out.Reset(outBuf[:])
}

// fail reports msg to the host as the reason of the current call's failure
// and returns the status that goes with it. Output not yet handed over is
// dropped: the task is failing, and it must not leak into a later call.
func fail(msg string) int32 {
	out.Reset(outBuf[:])
	hostFail(msg)
	return abi.StatusError
}

// recovered turns a panic in operator code into a failed call, with the
// stack in the task log and one line as the error.
func recovered(p any) int32 {
	hostLog(abi.LogError, fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
	return fail(fmt.Sprintf("panic: %v", p))
}

const errNoOperator = "eddy: no operator registered: call eddy.Register from an init function (main never runs in a c-shared module)"

// guestOpen implements eddy_open on the configuration bytes.
func guestOpen(config []byte) (status int32) {
	if registered == nil {
		return fail(errNoOperator)
	}
	defer func() {
		if p := recover(); p != nil {
			status = recovered(p)
		}
	}()
	// The host overwrites the configuration with the first batch.
	own := append([]byte(nil), config...)
	if err := registered.Open(own); err != nil {
		return fail(err.Error())
	}
	return abi.StatusOK
}

// guestProcess implements eddy_process on one input batch.
func guestProcess(batch []byte) (status int32) {
	if registered == nil {
		return fail(errNoOperator)
	}
	recs, err := abi.DecodeBatch(batch, records[:0])
	records = recs[:0]
	if err != nil {
		return fail("eddy: input batch: " + err.Error())
	}
	// One deferred recover per batch, not per record: a panic fails the
	// task anyway, so where in the batch it happened does not matter.
	emitting = true
	defer func() {
		emitting = false
		if p := recover(); p != nil {
			status = recovered(p)
		}
	}()
	for i := range recs {
		if err := registered.Process(&recs[i]); err != nil {
			return fail(err.Error())
		}
	}
	flush()
	return abi.StatusOK
}

// guestClose implements eddy_close.
func guestClose() (status int32) {
	if registered == nil {
		return fail(errNoOperator)
	}
	emitting = true
	defer func() {
		emitting = false
		if p := recover(); p != nil {
			status = recovered(p)
		}
	}()
	if err := registered.Close(); err != nil {
		return fail(err.Error())
	}
	flush()
	return abi.StatusOK
}
