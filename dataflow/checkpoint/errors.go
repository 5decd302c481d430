package checkpoint

import (
	"errors"
	"fmt"
)

// ErrRestore marks the failure to restore from a checkpoint that cannot be
// read: a missing or corrupt manifest or state file (the error also wraps
// the cause, such as storage.ErrNotFound, storage.ErrCorrupt,
// state.ErrCorrupt or ErrCorrupt). An earlier checkpoint may still be
// restorable. A [RestoreError] matches it and names the checkpoint.
var ErrRestore = errors.New("checkpoint: cannot restore")

// ErrIncompatible marks a checkpoint that was read but does not fit the
// job: a source at another parallelism, another max parallelism. An
// earlier checkpoint of the same job will not fit either.
var ErrIncompatible = errors.New("checkpoint: does not fit the job")

// ErrCorrupt marks a manifest that is not one: it does not decode, is too
// large, or its fields contradict each other or the checkpoint manifest
// that lists it.
var ErrCorrupt = errors.New("checkpoint: corrupt manifest")

// RestoreError is the failure to restore from checkpoint Checkpoint, which
// cannot be read (see ErrRestore). It matches ErrRestore and whatever Err
// matches. The worker reports Checkpoint to the leader beside the error
// (TaskReport.failed_restore_checkpoint), which then marks that checkpoint
// bad and restores the next attempt from the one before: the id travels as
// a field, not in the error's text.
type RestoreError struct {
	// Checkpoint is the id of the checkpoint; 0 when the restoring side
	// does not know it (a savepoint whose manifest cannot be read).
	Checkpoint int64
	Err        error
}

func (e *RestoreError) Error() string {
	if e.Checkpoint <= 0 {
		return fmt.Sprintf("restore: %v", e.Err)
	}
	return fmt.Sprintf("restore checkpoint %d: %v", e.Checkpoint, e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// Is makes every RestoreError match ErrRestore.
func (e *RestoreError) Is(target error) bool { return target == ErrRestore }

// FailedRestore returns the checkpoint that err says could not be restored
// from: that of the outermost RestoreError it wraps, if it has an id.
func FailedRestore(err error) (int64, bool) {
	var re *RestoreError
	if errors.As(err, &re) && re.Checkpoint > 0 {
		return re.Checkpoint, true
	}
	return 0, false
}

// markedError reads as err and matches mark as well as everything err
// matches, so that messages stay one clear line without the sentinel's
// text.
type markedError struct{ err, mark error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.mark} }

func mark(err, mark error) error { return &markedError{err: err, mark: mark} }

// corrupt is an error marked ErrCorrupt.
func corrupt(format string, args ...any) error {
	return mark(fmt.Errorf(format, args...), ErrCorrupt)
}
