// Package state is the keyed state of Eddy operators: key groups, the
// encoding of state addresses into one ordered keyspace, the value, list and
// map state kinds with optional TTL, event- and processing-time timers, and
// the snapshot and restore of a task's key-group range, including its state
// files in a checkpoint ([SnapshotTo], [RestoreFrom]).
//
// It is not for operator (non-keyed) state, for the blob store itself or the
// layout of checkpoints above the state files (see storage and
// dataflow/checkpoint), nor for deciding when timers fire (the task's
// watermark and processing-time service do; PopTimers only hands back what
// is due).
//
// # Use
//
// A worker opens one [Backend], [OpenPebble] by default or [NewMemory] for
// small, latency-critical state, shared by all its tasks. Each task opens a
// [Store] for its [Scope] (tenant, job, operator uid) and its key-group
// [Range]:
//
//	backend, err := state.OpenPebble(state.DefaultPebbleConfig(dir))
//	groups := state.KeyGroupRange(subtask, parallelism, maxParallelism)
//	st, err := backend.OpenTask(state.Scope{Tenant: "default", Job: "card-activity", Operator: "per_card"}, maxParallelism, groups)
//	if err := st.Restore(entriesFromCheckpoint); err != nil { … }
//	count, ok, err := st.ValueGet("count", key, nil, buf[:0])
//	err = st.ValuePut("count", key, nil, next, 0)
//	err = st.TimerRegister(state.EventTime, key, window, windowEnd)
//	err = st.PopTimers(state.EventTime, watermark, fire)
//	err = st.Snapshot(writeToCheckpoint)
//
// Wasm host functions and window operators call a Store once per record, so
// its methods append into caller buffers and reuse their own (ValueGet does
// not allocate), and a Store belongs to one goroutine, its task's.
//
// # Decisions
//
// Key groups. As in Flink, a key belongs to KeyGroup(key, maxParallelism),
// a fixed hash (see [KeyGroup]) mod the number of groups, and each subtask
// owns a contiguous range of groups, computed exactly as Flink does. The key
// group sits right after the scope in every key (see [EncodeKey]), so a
// task's state is one contiguous span: snapshots, restores and rescaling
// copy whole groups.
//
// No durability in the backend. The Pebble database runs without a
// write-ahead log and is wiped when a worker opens it; a Store opens with an
// empty range, removing what an earlier attempt of the task left. Without a
// WAL, what survives a crash is an arbitrary prefix of writes, so the only
// consistent state to start from is a checkpoint, which [Store.Restore]
// loads.
//
// Scope-relative snapshots. Snapshot entries omit the scope prefix (they
// start at the key group), so a savepoint restores under another job name
// or tenant, and a rescaled task filters entries by their first two bytes.
//
// Lists are one entry. A list's elements are concatenated in one value
// (frames with a length and optional expiry each); an append is a Pebble
// merge, a blind write, rather than a read to find the end. A list is read
// whole, which is what window functions do.
//
// TTL is stored with each value as an absolute expiry on the backend's clock
// (injectable). Expired entries read as absent and are removed lazily when
// read, by [Store.CleanupExpired], and by Snapshot and Restore.
//
// Timers live in the keyspace, per key group, ordered by kind and
// timestamp. A Store keeps an in-memory heap of each group's earliest timer
// (Flink's KeyGroupPartitionedPriorityQueue) and merges the groups when
// popping; see timerQueue for how it avoids re-scanning deleted timers.
//
// Checkpoint files. [SnapshotTo] writes a task's state to a blob store
// under a prefix's "shared/" folder, content-addressed by sha256, and
// returns a [SnapshotManifest] listing the files; [RestoreFrom] reads any
// number of manifests back into a Store, keeping its key groups. The memory
// backend writes one full entries file (see internal/entryfile). The Pebble
// backend is incremental, as RocksDB is in Flink: it takes a Pebble
// checkpoint restricted to the task's key span and uploads the table files
// not uploaded before, which after a small change is the few new ones. A
// restore opens the checkpoint read-only and reads the span through Pebble,
// which resolves versions, merges and deletions of the shared database. A
// restore downloads and checks every file before it changes the Store. Both
// kinds restore into either backend. File keys in a manifest are relative
// to the prefix, so a savepoint is a plain copy of the files.
//
// A snapshot has a synchronous part, [CaptureSnapshot] (a Pebble flush and
// checkpoint: hard links; or the memory state written to a local file), and
// an upload that may run while the task goes on ([SnapshotCapture.Upload]).
//
// Because the database is shared, a table file of a checkpoint may hold
// other tasks' keys as well (a restore never reads them): FullSize counts
// them, and the checkpoint storage of one job can hold bytes of another
// job on the same worker.
//
// Two backends, one implementation. Everything above is implemented once,
// over a small ordered key-value interface (engine) with a Pebble and a
// B-tree implementation, so the backends behave and snapshot identically;
// the tests run one suite against both.
package state
