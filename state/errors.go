package state

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these (or an
// error of the storage engine) with context; test with errors.Is.
var (
	// ErrInvalid reports an argument or configuration this package cannot
	// use: an empty scope, a bad key-group range, an unknown timer kind.
	ErrInvalid = errors.New("state: invalid argument")
	// ErrNotOwned reports a key whose key group is outside the task's range:
	// the record was routed to the wrong subtask.
	ErrNotOwned = errors.New("state: key group not owned by this task")
	// ErrRangeInUse reports an OpenTask whose key groups overlap those of a
	// Store of the same scope that is still open.
	ErrRangeInUse = errors.New("state: key-group range already open")
	// ErrClosed reports use of a closed Store or Backend.
	ErrClosed = errors.New("state: closed")
	// ErrCorrupt reports bytes that are not a valid key or value: a damaged
	// checkpoint, or one written by an incompatible version.
	ErrCorrupt = errors.New("state: corrupt entry")
	// ErrDirNotOwned reports a Pebble directory that is not empty and was
	// not created by this package: it is not wiped.
	ErrDirNotOwned = errors.New("state: directory holds something other than eddy state")
)
