// Package window is Eddy's built-in keyed window operator with built-in
// aggregates: the `window:` + `aggregate: count | sum(f) | min(f) | max(f) |
// avg(f)` nodes of a job spec, with the semantics of Flink's event-time
// windows (WindowOperator with EventTimeTrigger, allowed lateness and a
// late-data side output).
//
// It is for event-time tumbling, sliding and session windows and for
// count-triggered global windows over JSON records that the task has
// already partitioned by key (Record.Key is the key_by key), aggregated by
// built-ins or by a Wasm module (an aggregate module or a window function,
// abi/ABI.md "Version 3"; wasm.go). It is not for processing-time windows,
// for custom triggers or evictors, nor for deciding when the watermark
// advances (the task does, and calls ProcessWatermark).
//
// # Semantics
//
// Window assignment follows Flink's assigners, aligned to the epoch:
// tumbling(size) puts a record at t in [t - t mod size, … + size);
// sliding(size, slide) puts it in every [k·slide, k·slide + size) that
// contains t (size/slide windows; when slide does not divide size, the
// floor or the ceiling of it depending on where t falls, exactly as
// SlidingEventTimeWindows); session(gap) opens [t, t+gap)
// and merges it with every session of the key it overlaps or touches, so
// one late record can bridge two sessions.
//
// A time window fires when the watermark reaches its last millisecond
// (end-1). Its state is kept until the watermark reaches end-1 +
// allowed_lateness; a record arriving in between updates it and the window
// fires again at once with the updated result (Flink's EventTimeTrigger
// fires on late elements). Earlier results are not retracted: consumers
// see every firing and the last one is the most complete. A record none of
// whose windows is still kept is late: it goes unchanged to the
// late_output side port when set, and is otherwise dropped and counted
// (Operator.Dropped).
//
// global with trigger {count: N} is a tumbling count window per key: it
// fires and purges every N records of a key in arrival order. As Flink's
// GlobalWindows with a CountTrigger it never fires on the watermark, so a
// key's last partial count is not emitted, not even at the end of a bounded
// input; allowed_lateness and late_output do not apply to it (a global
// window is never late) and New refuses them. Its result reports the
// event-time span of the counted records as window_start (earliest) and
// window_end (latest + 1).
//
// Every record needs event time (Record.Timestamp): a record without it is
// an error of the task, as windows cannot place it.
//
// # Results
//
// A firing emits one record: key = the key, timestamp = window_end - 1,
// value = {"key":"<key>","window_start":ms,"window_end":ms,"count":N,…},
// one member per aggregate, named by its kind, or kind_field when a kind
// appears more than once. sum, min, max and avg read a top-level numeric
// member of the record value; a record without it (or with a non-numeric
// one, or a value that is not a JSON object) is counted by count but
// contributes nothing else. min, max and avg of no numbers are null, sum
// is 0; a non-finite result (a sum overflowing float64) is null too.
//
// # State
//
// Accumulators live in the task's state.Store, not in memory, so the number
// of open windows is bounded by disk rather than RAM. Tumbling and sliding
// windows keep one accumulator per (key, pane), a pane being the time
// between two consecutive window boundaries (the slide when it divides the
// size, else at most two a slide), and all the panes of a key are one value
// (state "panes"), with the start of the key's earliest window not yet
// fired: a record updates its pane only, however many windows it is in, a
// window merges its panes when it fires, and the records of an input batch
// are grouped by key, so that a key's value is read and written once per
// batch (with a Wasm aggregate, one eddy_agg_add call adds the whole
// batch, a group per key and pane). Their firing and cleanup times are not
// store timers but an index in memory of when each key is next due,
// derived from the values and rebuilt from them when the operator opens
// (after a restore or a rescale, from whatever key groups the task then
// owns). Global windows keep a value per key (ns nil), and sessions one
// value per key holding the key's open sessions with their accumulators,
// so that merging reads and writes one entry; they fire with event-time
// timers of the store. With built-ins or a window function they take a
// batch record by record. With a Wasm aggregate they group its records by
// key as fixed windows do, one read and write per key, and add them with
// one eddy_agg_add call, a group per (key, window) (batch.go): a global
// window's records up to each firing, a session's records in arrival
// order, starting from the accumulator the record-by-record path would add
// the first of them to, so that results and accumulators are the same. A
// record that merges sessions which records of the batch went to needs
// their accumulators with those records added: it and its key's later
// records are added by a further call (a round), each such merge costing
// one; a record behind the watermark, which may be late or fire its
// session again at once, is added on its own after the records before it. Windows fire at end-1 and are cleaned up at
// end-1+allowed_lateness; results are emitted in order of time, then key
// group, then key, as timers pop. A key holds the panes from its oldest
// window not yet cleaned up to its newest record: its state does not grow
// with the length of the stream.
//
// Snapshots taken before tumbling and sliding windows kept a key's panes
// as one value (when they kept a map entry per pane, state "pane", and a
// store timer per window) are not readable by this version: their window
// state is ignored on restore. No release had shipped with that layout.
package window
