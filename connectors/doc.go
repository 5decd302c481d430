// Package connectors turns the source and sink specs of a job
// (jobspec.SourceSpec, jobspec.SinkSpec) into dataflow.Source and
// dataflow.Sink instances: the seeded data generator (sequences and the
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
// It is not for parsing or validating whole job specs (package jobspec),
// for moving records between tasks, batching, watermarks or backpressure
// (package dataflow), nor for checkpointing source positions: the
// connectors here are replayable from the start because they are
// deterministic (generator) or bounded (file), and that is all a restart
// relies on for now.
package connectors
