// Package connectors turns the source and sink specs of a job
// (jobspec.SourceSpec, jobspec.SinkSpec) into stream.Source and
// stream.Sink instances: the seeded data generator (sequences and the
// card transactions of the fraud-detection demo), JSON-lines files in and
// out, stdout, and a discarding sink for benchmarks.
//
// Every connector instance is one parallel instance (subtask) of its node:
// Registry.NewSource and Registry.NewSink are called once per subtask, and
// Open tells the instance which subtask it is. Sources split their input by
// subtask so that the union over all subtasks does not depend on the
// parallelism; that is what makes a rescaled or re-run job produce the same
// records.
//
// Checkpoints: the generator and file sources are stream.Checkpointed —
// their position (the next record number; the byte offset and number of
// the next line) is all their state, so seeking to it and reading on gives
// exactly the records after it. The file sink is stream.Transactional
// when the deployment checkpoints: it stages each checkpoint's output under
// a hidden name and publishes it when the checkpoint completes (see
// fileSink), which makes its output exactly-once across restarts.
//
// It is not for parsing or validating whole job specs (package jobspec),
// for moving records between tasks, batching, watermarks, backpressure or
// deciding when to checkpoint (package dataflow).
package connectors
