// Package fsm is the coordinator's replicated state machine: the tenants,
// coordinator members, modules, workers and jobs that every member of the
// Raft group agrees on.
//
// The FSM is deterministic and does no I/O. It never reads a clock: every
// command carries the time at which the leader proposed it, and identifiers
// such as job ids are counted in the replicated state. Applying the same log
// to two FSMs therefore yields byte-identical snapshots ([FSM.MarshalState]).
//
// Writers build a [Command] (for example [SubmitJob]), encode it with
// [Encode] and hand the bytes to Raft; every member then calls
// [FSM.Apply]. A command that is invalid in the current state (an unknown
// tenant, a stale task attempt, a placement onto a dead worker, an unknown
// command type) is not applied: Apply returns an error value that Raft hands
// back to the proposer, and the state is left untouched. Apply never panics on
// bad input.
//
// Readers call the query methods ([FSM.Jobs], [FSM.Workers], ...), which are
// safe for concurrent use and return copies.
//
// Everything is namespaced by tenant. Tenant [DefaultTenant] exists from the
// start; nothing here assumes it is the only one.
//
// What the FSM is not: it does not decide placements (package placement
// does, on the leader, and the result is committed with [PlaceJob]); it does
// not detect dead workers (the leader watches heartbeats, which are not Raft
// commands, and commits [WorkerDown]); it does not schedule restarts with
// backoff or decide when to checkpoint. It records what the leader decided,
// checks the decision against the replicated state, and answers queries.
//
// # Checkpoints
//
// A job has at most one checkpoint in flight ([TriggerCheckpoint], with an
// id above every id the job used, across attempts), which ends completed
// ([CheckpointCompleted]) or failed ([CheckpointFailed], or implicitly when
// its attempt or the job ends). The job keeps the latest Retain completed
// checkpoints and every savepoint; a checkpoint that stops being retained
// (superseded, failed, or copied into a savepoint) moves to
// Job.CheckpointsToDelete until the leader deleted its files
// ([CheckpointsDeleted]). CheckpointFailed of a completed checkpoint marks
// it bad: restoring from it failed, and [Job.LatestRestorable] skips it.
// Checkpoint commands never change Job.Updated.
//
// # Hot swaps
//
// A job has at most one swap in flight, the last of Job.Swaps:
// [BeginSwap] records it PREPARING; [EndSwap] refuses or fails it while
// the workers prepare, leaving the job as it was; a [TriggerCheckpoint]
// with Swap set (a savepoint) makes it SWAPPING, and the completion of
// that savepoint makes it SWAPPED: the node's module and configuration
// are then in Job.Overrides, for every later attempt. A swap that fails
// while SWAPPING (EndSwap, its savepoint failing, or its attempt ending)
// restarts the job from its last checkpoint with the old version, since
// some tasks may have switched at the barrier already. A SWAPPED swap is
// armed until the next checkpoint completes: a task failure then rolls it
// back (ROLLED_BACK, the override restored to what it was), and the next
// attempt restores from the swap savepoint, its latest restorable one.
// Swap commands, like checkpoint commands, leave Job.Updated alone unless
// they restart the job.
//
// # Formats
//
// Commands are JSON envelopes {"v":1,"type":"submit_job","at":MILLIS,
// "body":{...}}; snapshots are one JSON document with a "format" number,
// every collection sorted. The JSON field tags of the exported types are part
// of both formats: rename one only together with a version bump and a
// decoder for the old form, since old logs and snapshots must stay readable.
package fsm
