/*
 * eddy_aggregate.h - aggregate modules in C: the incremental aggregate of
 * a window node (`aggregate: {wasm: {module: ...}}` in a job spec), in the
 * style of Flink's AggregateFunction. It is the guest side of ABI version
 * 3 (abi/ABI.md, "Aggregate modules").
 *
 * An aggregate folds records into an accumulator, a byte string of its own
 * design that the window operator stores between calls and in
 * checkpoints. The aggregate implements four functions, each of which
 * appends its output to dst, a buffer the SDK owns and reuses (dst->len is
 * 0 on entry), so that folding allocates nothing once the buffers have
 * grown (eddy_buf is declared in eddy.h):
 *
 *     int eddy_op_agg_create(eddy_buf *dst);
 *         an empty accumulator. Called once per instance, after
 *         eddy_op_open; the host reuses it for every new window, so it
 *         must depend on nothing but the configuration.
 *     int eddy_op_agg_add(eddy_buf *dst, const uint8_t *acc, uint32_t acc_len, const eddy_record *r);
 *         acc with the window's input record r added (Flink's add).
 *     int eddy_op_agg_merge(eddy_buf *dst, const uint8_t *a, uint32_t a_len, const uint8_t *b, uint32_t b_len);
 *         the merge of two accumulators: a is what the group has folded
 *         so far (its header's accumulator first), b the group's next one.
 *         Merging must be associative, and merging with an empty
 *         accumulator must give the other one back unchanged.
 *     int eddy_op_agg_result(eddy_buf *dst, const uint8_t *acc, uint32_t acc_len);
 *         the window's result: exactly one JSON value. The host checks it.
 *
 * eddy_op_open (configuration) and eddy_op_close work as for every module
 * and keep their weak defaults from eddy.c. Each function returns 0 on
 * success; to fail the task, call eddy_fail and return nonzero, as for an
 * accumulator that does not decode. The inputs alias the host's batch or
 * the SDK's buffers: valid only during the call, never to be modified, and
 * never overlapping dst. Do not call eddy_emit: the SDK emits what the ABI
 * asks for.
 *
 * An accumulator outlives the instance (the window operator stores it and
 * hands it to other instances of the module, possibly after a restart), so
 * it must be self-contained bytes in an encoding later versions of the
 * module can still read.
 *
 * Build: add eddy_aggregate.c to the sources. Linking it makes the module
 * declare ABI version 3 and export eddy_agg_create, eddy_agg_add,
 * eddy_agg_merge and eddy_agg_result; its eddy_process fails every call
 * with a message saying the module is an aggregate. A module is an
 * aggregate or an operator: do not define eddy_op_process, and do not link
 * eddy_keyed.c (an aggregate keeps no state of its own) or eddy_window.c;
 * the linker refuses either with a duplicate symbol.
 */
#ifndef EDDY_AGGREGATE_H
#define EDDY_AGGREGATE_H

#include <stdint.h>

#include "eddy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version a module linked with eddy_aggregate.c declares. */
#define EDDY_AGGREGATE_ABI_VERSION 3

/* Implemented by the aggregate; see above. */
int eddy_op_agg_create(eddy_buf *dst);
int eddy_op_agg_add(eddy_buf *dst, const uint8_t *acc, uint32_t acc_len, const eddy_record *r);
int eddy_op_agg_merge(eddy_buf *dst, const uint8_t *a, uint32_t a_len, const uint8_t *b, uint32_t b_len);
int eddy_op_agg_result(eddy_buf *dst, const uint8_t *acc, uint32_t acc_len);

#ifdef __cplusplus
}
#endif

#endif /* EDDY_AGGREGATE_H */
