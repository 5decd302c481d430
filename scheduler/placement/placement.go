// Package placement decides which worker runs each task of a job: a pure
// function from the job's tasks and the workers' free slots to a
// deployment.
//
// Tasks are spread: each task goes to the worker with the fewest used slots
// that still has a free one, ties broken by worker id, so the result depends
// only on the input. When the job needs more slots than are free, nothing is
// placed and the error says how many it needs and how many are free: the job
// waits for slots as a whole (no partial deployments, which would hold slots
// without running).
//
// The package knows nothing of Raft or of the FSM: the leader builds the
// input from its replicated state, calls [Place], and commits the result
// (fsm.PlaceJob), which the FSM checks again against the state it is applied
// to. It is not a resource model beyond "one task, one slot".
package placement

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Worker is a candidate worker: an alive one, with its slot count and the
// slots its current tasks use.
type Worker struct {
	ID    string
	Slots int
	Used  int
}

// Free is the number of slots a new task may take.
func (w Worker) Free() int { return max(0, w.Slots-w.Used) }

// ErrInsufficientSlots is matched (errors.Is) by the *InsufficientSlotsError
// Place returns when the workers have too few free slots.
var ErrInsufficientSlots = errors.New("placement: not enough free slots")

// ErrInvalidInput is matched by the errors Place returns for input it cannot
// place whatever the slots: an empty or repeated task id, a repeated worker
// id, a negative slot count.
var ErrInvalidInput = errors.New("placement: invalid input")

// InsufficientSlotsError says how many slots a job needs and how many are
// free. Its message is meant for the job's status.
type InsufficientSlotsError struct {
	Needed int
	Free   int
}

func (e *InsufficientSlotsError) Error() string {
	return fmt.Sprintf("waiting for slots: job needs %d, %d free", e.Needed, e.Free)
}

// Is makes errors.Is(err, ErrInsufficientSlots) true.
func (e *InsufficientSlotsError) Is(target error) bool { return target == ErrInsufficientSlots }

// Place assigns each task (needing one slot) to a worker and returns the
// deployment: task id → worker id. The input slices are not modified.
//
// It returns an *InsufficientSlotsError if fewer slots are free than there
// are tasks, and an error matching ErrInvalidInput for malformed input.
func Place(tasks []string, workers []Worker) (map[string]string, error) {
	seenTasks := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		if t == "" {
			return nil, fmt.Errorf("%w: empty task id", ErrInvalidInput)
		}
		if seenTasks[t] {
			return nil, fmt.Errorf("%w: task %q twice", ErrInvalidInput, t)
		}
		seenTasks[t] = true
	}

	// Work on a copy sorted by (used, id); after each assignment the chosen
	// worker moves right to keep the order, so the head is always the next
	// choice.
	candidates := make([]Worker, 0, len(workers))
	seenWorkers := make(map[string]bool, len(workers))
	free := 0
	for _, w := range workers {
		if w.ID == "" {
			return nil, fmt.Errorf("%w: empty worker id", ErrInvalidInput)
		}
		if seenWorkers[w.ID] {
			return nil, fmt.Errorf("%w: worker %q twice", ErrInvalidInput, w.ID)
		}
		if w.Slots < 0 || w.Used < 0 {
			return nil, fmt.Errorf("%w: worker %q: %d slots, %d used", ErrInvalidInput, w.ID, w.Slots, w.Used)
		}
		seenWorkers[w.ID] = true
		if w.Free() > 0 {
			candidates = append(candidates, w)
			free += w.Free()
		}
	}
	if len(tasks) > free {
		return nil, &InsufficientSlotsError{Needed: len(tasks), Free: free}
	}

	less := func(a, b Worker) int { return cmp.Or(cmp.Compare(a.Used, b.Used), cmp.Compare(a.ID, b.ID)) }
	slices.SortFunc(candidates, less)
	deployment := make(map[string]string, len(tasks))
	for _, t := range tasks {
		// There is always a head with a free slot: the count was checked,
		// and full workers are removed below.
		deployment[t] = candidates[0].ID
		candidates[0].Used++
		if candidates[0].Free() == 0 {
			candidates = candidates[1:]
			continue
		}
		// Bubble the head right to its place; one step per worker passed.
		for i := 0; i+1 < len(candidates) && less(candidates[i], candidates[i+1]) > 0; i++ {
			candidates[i], candidates[i+1] = candidates[i+1], candidates[i]
		}
	}
	return deployment, nil
}
