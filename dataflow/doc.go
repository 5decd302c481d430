// Package dataflow turns a job spec into a graph of tasks and runs them:
// sources, chains of operators working on record batches, bounded queues
// between tasks (backpressure), fan-out, union, and sinks.
//
// Job.Run runs every task of a job in this process. Job.RunDeployment runs
// a worker's share of them (PlanTasks names the tasks a coordinator
// places): channels to tasks on other workers are Exchange gRPC streams
// with credit-based flow control (exchange.proto), served by an Exchange.
//
// A Deployment with Checkpointing takes aligned checkpoints
// (docs/rfcs/2026-11-30-checkpoints.md): StartDeployment returns a Running
// whose Trigger injects barriers at the source tasks between two batches;
// tasks with several input channels align them (aligner), capture the
// keyed state of their nodes, their source's position and their sink's
// staged output, forward the barrier and go on; a goroutine of each task
// then uploads the capture, writes its task manifest and acknowledges
// (Checkpointing.Ack: asynchronous snapshots, task_upload.go). Complete
// lets sinks publish. With
// Checkpointing.Restore a deployment starts from a checkpoint instead,
// at the same or another parallelism of its keyed nodes.
//
// Running.PrepareSwap and a Trigger naming a swap replace a Wasm node's
// module in place (docs/rfcs/2026-12-02-hot-swap.md, swap.go): the new
// version is instantiated and opened beforehand, and each task of the
// node installs it at the swap savepoint's aligned barrier, after its
// snapshot, on the same keyed state and timers.
//
// It is the runtime only. The contracts it runs live in leaf packages:
// records, batches and the Source, Sink and Operator interfaces in
// dataflow/stream, the checkpoint format and layout in dataflow/checkpoint.
// It is not the place for connectors (package connectors implements
// stream.Source and stream.Sink), for running Wasm (package host) or for
// scheduling tasks onto machines (package scheduler).
package dataflow
