// Package checkpoint is the checkpoint format that the three parties of a
// checkpoint share: the task that snapshots (package dataflow), the worker
// that starts a restoring deployment (scheduler/worker) and the leader that
// writes checkpoint manifests, copies savepoints and deletes what is no
// longer retained (scheduler/coordinator). It holds the manifests
// ([Manifest], [TaskManifest] and its node, source and sink snapshots),
// the storage layout (every key of a checkpoint is built by one function
// here), reading and writing manifests, the list of files a checkpoint or
// savepoint references ([ReadContents]), and the errors of a restore that
// cross the process boundary ([ErrRestore], [RestoreError],
// [ErrIncompatible]). docs/rfcs/2026-11-30-checkpoints.md describes the
// protocol around it.
//
// # Layout
//
// In a job's checkpoint storage, under a root:
//
//	<root>/chk/<id>/_manifest.json   checkpoint manifest (the leader: ManifestKey)
//	<root>/chk/<id>/<task>.json      task manifest (a task: TaskManifestKey)
//	<root>/shared/<sha256>           state files, content-addressed, shared between checkpoints (StateFileKey)
//
// A job's root is [JobRoot], tenants/<tenant>/jobs/<job>. A savepoint is a
// root of its own, [SavepointDir] (tenants/<tenant>/savepoints/<job>-<id>),
// holding the same layout, with its manifest at [SavepointManifestKey]
// instead. A task manifest records its state files by keys relative to the
// root ("shared/<sha256>", as package state writes them), and nothing else
// in it names an object of checkpoint storage (source positions are the
// connector's, a sink's staged entries name its own output), so a copy
// under another root moves the files and copies the task manifests byte
// for byte. A restore resolves state files against the root its task
// manifests are under ([RootOf]).
//
// # Not for
//
// Taking or restoring snapshots (packages dataflow and state), deciding
// when to checkpoint or which checkpoint to restore (scheduler/coordinator),
// or the blob store itself (storage). It imports storage only: no wazero,
// Pebble, gRPC, dataflow or state, so that every party reads the same
// contract without depending on the others.
package checkpoint
