// Package join is Eddy's built-in two-input joins, the `join:` nodes of a
// job spec: Flink's interval join (IntervalJoinOperator) and window join
// (a coGroup on event-time windows), on two inputs the task has already
// partitioned by their join keys (Record.Key is the key on both sides).
//
// It is not for a Wasm two-input operator, for processing-time joins, nor
// for deciding when the watermark advances (the task combines both
// inputs' watermarks by min and calls ProcessWatermark).
//
// # Output
//
// A joined record has the join key as its key and {"left": <left value>,
// "right": <right value>} as its value, the two values copied as they are
// (JSON values; an empty value is written as null). Its timestamp follows
// Flink: max(left, right) for an interval join, the window's end-1 for a
// window join.
//
// # Interval join
//
// A left record at tl joins every right record of the key at tr with
// tl+lower ≤ tr ≤ tl+upper (an exclusive bound moves in by 1ms). A record
// is late when its timestamp is below the watermark, as in Flink: it is
// dropped and counted (Dropped). Both sides are buffered in keyed map
// state by timestamp; a left record is removed once the watermark passes
// tl+upper, a right one once it passes tr-lower, by event-time timers, so
// state returns to empty when the input ends.
//
// # Window join
//
// Each record goes into its tumbling or sliding windows (aligned to the
// epoch, as the window operator's), or into a session of its key: a
// record at t opens [t, t+gap) and merges every session of the key it
// overlaps or touches, whichever side their records came from. When the
// watermark reaches a window's end-1, every pair of a left and a right
// record of the key in it is emitted, and the window's state is cleared.
// A record all of whose windows have fired (for sessions: whose merged
// session has) is late: dropped and counted.
package join
