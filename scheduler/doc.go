// Package scheduler holds Eddy's two cluster processes side by side: the
// coordinator (a Raft-replicated record of tenants, modules, workers and
// jobs, and the leader's loops that act on it) and the worker that runs
// what the leader places.
//
// The work is split so that everything that decides is deterministic and
// testable without a network, and everything that waits or talks lives at the
// edges:
//
//   - [github.com/eddy-stream/eddy/scheduler/fsm] is the replicated state
//     machine: commands in, state out, no I/O and no clocks.
//   - [github.com/eddy-stream/eddy/scheduler/placement] decides which worker
//     slot runs which task: a pure function.
//   - [github.com/eddy-stream/eddy/scheduler/raftnode] wires hashicorp/raft
//     (durable WAL, file snapshots, TCP transport) around an FSM.
//   - [github.com/eddy-stream/eddy/scheduler/coordinator] is the coordinator
//     process: a Raft member serving the Control and Cluster gRPC services,
//     and the leader's loops (liveness, placement, restarts).
//   - [github.com/eddy-stream/eddy/scheduler/worker] is the worker process:
//     it registers its slots, heartbeats and runs the deployments the
//     leader hands it with package dataflow.
//
// The gRPC contracts are in proto/; the checkpoint format both processes
// read and write is package dataflow/checkpoint.
package scheduler
