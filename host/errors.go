package host

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Errors returned by this package wrap one (sometimes two)
// of them, so callers classify with errors.Is; the message itself is one
// line that names the module or operator, the call and the problem.
var (
	// ErrInvalidModule: the module does not satisfy the ABI and was refused
	// before it ran (not Wasm, missing or mistyped export, forbidden import,
	// unsupported ABI version).
	ErrInvalidModule = errors.New("host: invalid module")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack
	// overflow, …) or broke the call protocol.
	ErrTrap = errors.New("host: guest trapped")
	// ErrDeadline: a guest call ran past Config.CallTimeout and was stopped.
	ErrDeadline = errors.New("host: guest call exceeded its deadline")
	// ErrMemoryLimit: the guest ran out of memory at Config.MemoryLimit (or
	// its own declared maximum), or a batch cannot fit in it.
	ErrMemoryLimit = errors.New("host: guest memory limit reached")
	// ErrEmitLimit: one guest call emitted more records or bytes than
	// Config.MaxEmitRecords or Config.MaxEmitBytes allow.
	ErrEmitLimit = errors.New("host: guest call emitted too much")
	// ErrOperatorFailed: the guest returned a failure status, normally after
	// calling the fail import with a message.
	ErrOperatorFailed = errors.New("host: operator failed")
	// ErrBadPointer: the guest handed the host a range outside its memory or
	// an output batch that does not decode.
	ErrBadPointer = errors.New("host: guest passed a bad pointer")
	// ErrExited: the guest called WASI proc_exit.
	ErrExited = errors.New("host: guest exited")
	// ErrClosed: the Instance, its Module or its Engine was closed (also
	// after the caller's emit callback panicked). An instance made unusable
	// by a guest failure returns that failure's error instead.
	ErrClosed = errors.New("host: instance closed")
)

// markedError carries a readable message and the sentinels (and cause) it
// wraps. The sentinels are marks, not text: printing "host: guest trapped:"
// in front of every message would make the one line a user sees longer and
// no clearer.
type markedError struct {
	msg  string
	errs []error
}

func (e *markedError) Error() string   { return e.msg }
func (e *markedError) Unwrap() []error { return e.errs }

// mark returns an error with err's message that also matches marks.
func mark(err error, marks ...error) error {
	return &markedError{msg: err.Error(), errs: append([]error{err}, marks...)}
}

// markf formats a message and marks it; %w verbs in format wrap as usual.
func markf(marks []error, format string, args ...any) error {
	return mark(fmt.Errorf(format, args...), marks...)
}

// firstLine keeps the first line of a message: wazero appends a Wasm stack
// trace that belongs in a debug log, not in a job's status line.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// oneLine folds a guest-supplied message onto one line and bounds its size.
func oneLine(s string, max int) string {
	if len(s) > max {
		for max > 0 && !utf8.RuneStart(s[max]) {
			max--
		}
		s = s[:max] + "…"
	}
	return strings.Join(strings.Fields(s), " ")
}

// sizeString renders a byte count the way a limit is usually written.
func sizeString(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
