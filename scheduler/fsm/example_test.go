package fsm_test

import (
	"fmt"
	"time"

	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// The leader encodes a command with its clock; Raft commits it; every member
// applies it at the same log index and answers queries from the result.
func Example() {
	f := fsm.New()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	index := uint64(0)
	apply := func(cmd fsm.Command) any {
		data, err := fsm.Encode(cmd, now)
		if err != nil {
			panic(err)
		}
		index++ // Raft's log index; here, as if every entry were a command
		res, err := f.ApplyCommand(index, data)
		if err != nil {
			return err
		}
		return res
	}
	apply(&fsm.RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "boot-1"})
	job := apply(&fsm.SubmitJob{Tenant: fsm.DefaultTenant, Name: "demo", Tasks: []string{"src#0", "src#1"}}).(fsm.Job)
	apply(&fsm.PlaceJob{JobID: job.ID, Attempt: 1, Deployment: map[string]string{"src#0": "w1", "src#1": "w1"}})
	fmt.Println(apply(&fsm.TaskFinished{JobID: job.ID, Attempt: 2, TaskID: "src#0"}))

	j, _ := f.Job(fsm.DefaultTenant, job.ID)
	w, _ := f.Worker("w1")
	fmt.Println(j.ID, j.State, j.Attempt, j.Deployment["src#1"])
	fmt.Println(w.ID, w.UsedSlots, "of", w.Slots, "slots used")
	// Output:
	// apply task_finished at index 4: job job-2 task "src#0": attempt 2, current is 1: fsm: stale job attempt
	// job-2 RUNNING 1 w1
	// w1 2 of 2 slots used
}
