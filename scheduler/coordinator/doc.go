// Package coordinator is the coordinator process's logic, shared by
// `eddy coordinator` and `eddy standalone`: one Raft member (package
// raftnode around package fsm) and one gRPC server for the Control and
// Cluster services, plus, while the member leads, the leader's loops.
//
// # Serving
//
// Every member serves Control. The leader answers; a follower forwards the
// call to the leader's API address (which it finds in the FSM's
// coordinator records) and relays the answer, or fails with UNAVAILABLE
// and a NotLeader detail when no leader is known. Only the leader serves
// Cluster: a follower answers UNAVAILABLE with a NotLeader detail naming
// the leader's API address, and the worker calls the leader itself.
//
// # The leader
//
// A member that wins an election waits for a Raft barrier, then runs one
// term: it holds the workers' heartbeats in memory (they are not Raft
// commands) and, whenever the FSM changes or a timer expires, decides and
// commits:
//   - liveness: a worker silent for HeartbeatTimeout is declared down
//     (fsm.WorkerDown), which sends its jobs to RESTARTING;
//   - restarts: a RESTARTING job waits its backoff (RestartStrategy), or is
//     failed with the last failure's cause once MaxAttempts restarts are
//     used up;
//   - placement: a waiting job, or a restarting one past its backoff, is
//     placed over the alive workers' free slots (package placement,
//     fsm.PlaceJob as the next attempt), or marked waiting with the message
//     "waiting for slots: job needs N, M free";
//   - checkpoints (checkpoint.go): for every running job whose tasks all
//     run, a checkpoint at the spec's interval (at most one in flight, the
//     minimum pause after the previous one, failed at the timeout) or a
//     savepoint that TriggerSavepoint asks for; triggers and completions
//     reach the workers in heartbeat answers, acknowledgements come back
//     through Cluster.AckCheckpoint. When every task acknowledged, the
//     leader writes the checkpoint manifest to the job's checkpoint storage
//     (a savepoint is then copied into a self-contained directory) and
//     commits the outcome; it deletes the files of checkpoints no longer
//     retained. A restarted attempt restores from the latest completed
//     checkpoint that is not bad; a failed task whose report names the
//     checkpoint it could not restore from (failed_restore_checkpoint)
//     marks it bad. The format and layout are package dataflow/checkpoint's.
//
// These decisions, and the answer to a heartbeat, are pure functions of the
// replicated state, the in-memory heartbeat view and the time (decide.go,
// status.go, checkpoint.go); the goroutines, timers, Raft proposals and
// storage I/O live around them.
// A new leader starts every worker's timeout afresh, so that workers have a
// full HeartbeatTimeout to find it: tasks keep running across a leader
// change.
//
// # The worker's side of Cluster
//
// See the proto's comments for the contract. In short: RegisterWorker at
// start (and after any NOT_FOUND heartbeat), then Heartbeat every
// heartbeat_interval_ms with every task held; apply the answer
// idempotently (start deployments' tasks not yet held, cancel cancel_tasks
// and every task of cancel_jobs, forget released terminal tasks, trigger
// and complete each checkpoint id once); send each task's checkpoint
// acknowledgement with AckCheckpoint.
//
// # Job logs
//
// Workers ship their tasks' log lines with their heartbeats; the leader
// keeps a bounded ring per job in memory only (logs.go: not in the FSM, so
// a leader change loses them), adds a line for each failed task report the
// worker's lines do not already explain, and serves them with JobLogs,
// a long poll, to the job's tenant only (found by tenant first, as for
// JobStatus).
//
// The package does not run tasks or parse Wasm: the caller injects a
// ModuleStore, a Validator and a Planner (Deps). It reads and writes
// checkpoint storage (package storage) only for checkpoint manifests,
// savepoint copies and the deletion of old checkpoints; the leader does
// that I/O in goroutines of its term, outside its decision loop.
package coordinator
