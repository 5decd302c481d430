/*
 * eddy_window.h - window functions in C: the apply of a window node
 * (`aggregate: {apply: {module: ...}}` in a job spec), in the style of
 * Flink's ProcessWindowFunction. When a window fires, the function sees
 * the whole window at once (abi/ABI.md, "Window functions"):
 *
 *     int eddy_op_window(const eddy_window *w, const eddy_record *elems, uint32_t n);
 *
 * elems are the window's n elements in event-time order (arrival order for
 * equal timestamps), each as it entered the window; they alias the input
 * batch, valid only during the call. A window that fires again within the
 * allowed lateness comes again, whole, with its late elements. The
 * function emits any number of records with eddy_emit; the host sets their
 * timestamp to w->end - 1 and keeps their key and value. It returns 0, or
 * nonzero after eddy_fail to fail the task.
 *
 *     int eddy_op_window(const eddy_window *w, const eddy_record *elems, uint32_t n) {
 *         char out[64];
 *         int len;
 *         if (n == 0) return 0;
 *         len = snprintf(out, sizeof out, "{\"span_ms\":%lld}",
 *                        (long long)(elems[n - 1].timestamp - elems[0].timestamp));
 *         return eddy_emit_kv(w->key, w->key_len, (const uint8_t *)out, (uint32_t)len, w->end - 1);
 *     }
 *
 * A window function is an ordinary operator module built on eddy_process:
 * the host hands it one batch per firing, whose record 0 describes the
 * window; this file decodes that record and hands eddy_op_window the rest.
 * eddy_op_open and eddy_op_close work as for every module (with their weak
 * defaults from eddy.c).
 *
 * Build: add eddy_window.c to the sources, and define eddy_op_window
 * instead of eddy_op_process (the linker refuses both, and refuses
 * eddy_aggregate.c with it). The module's ABI version does not change: 1,
 * or 2 with eddy_keyed.c, but a window function node offers no keyed state
 * or timers.
 */
#ifndef EDDY_WINDOW_H
#define EDDY_WINDOW_H

#include <stdint.h>

#include "eddy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The value length of a window descriptor: start and end, two int64. */
#define EDDY_WINDOW_DESCRIPTOR_LEN 16

/* The window that fired. key aliases the input batch. */
typedef struct eddy_window {
    const uint8_t *key; /* the window's key (the node's key_by key) */
    uint32_t key_len;
    int64_t start; /* ms since the Unix epoch */
    int64_t end;   /* exclusive; end - 1 is the window's last millisecond */
} eddy_window;

/* Implemented by the window function; see above. */
int eddy_op_window(const eddy_window *w, const eddy_record *elems, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif /* EDDY_WINDOW_H */
