/*
 * eddy_keyed.h - keyed state, timers and event time for C operators on a
 * keyed node (one with key_by): the version 2 part of the Eddy ABI
 * (abi/ABI.md, "Version 2: keyed state, timers, time").
 *
 * Declare state handles in eddy_op_open; every access addresses the current
 * key, which the SDK sets to the key of the record being processed (in
 * eddy_op_process) or of the timer firing (in eddy_op_timer):
 *
 *     static eddy_state count;
 *
 *     int eddy_op_open(const uint8_t *config, uint32_t len) {
 *         count = eddy_value_state("count", 0);
 *         return count ? 0 : 1;
 *     }
 *
 *     int eddy_op_process(const eddy_record *r) {
 *         uint8_t *v;
 *         uint64_t n = 0;
 *         int32_t len = eddy_value_get(count, &v);
 *         if (len == EDDY_ERROR) return 1;
 *         if (len == 8) memcpy(&n, v, 8);
 *         n++;
 *         return eddy_value_put(count, (const uint8_t *)&n, 8);
 *     }
 *
 * Build: add eddy_keyed.c to the sources. Linking it is what makes the
 * module declare ABI version 2 (and export eddy_on_timer); a module built
 * without it stays at version 1, which every host accepts. wasm-ld imports
 * only the host functions a module calls.
 *
 * Errors: a function that returns int returns 0 on success and nonzero
 * after recording the failure with eddy_fail (called outside the calls
 * where it is valid, out of memory): return nonzero from the eddy_op_
 * function then. The get functions return EDDY_ERROR in that case.
 */
#ifndef EDDY_KEYED_H
#define EDDY_KEYED_H

#include <stdint.h>

#include "eddy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version a module linked with eddy_keyed.c declares. */
#define EDDY_KEYED_ABI_VERSION 2

/* Results of the get functions besides a length. */
#define EDDY_ABSENT (-1) /* no value, empty list or map */
#define EDDY_ERROR (-2)  /* failed: eddy_fail was called */

/* A declared state; NULL when the declaration failed. */
typedef struct eddy_state_s *eddy_state;

/* Declares a state called name (a C string) and returns its handle, or NULL
 * after eddy_fail. Valid only in eddy_op_open. ttl_ms > 0 makes a key's
 * state expire ttl_ms after it was last written (expired state reads as
 * absent); 0 or less means no expiry. Declaring a name again with the same
 * kind gives another handle to the same state. */
eddy_state eddy_value_state(const char *name, int64_t ttl_ms);
eddy_state eddy_list_state(const char *name, int64_t ttl_ms);
eddy_state eddy_map_state(const char *name, int64_t ttl_ms);

/* Removes the current key's value, list or map (any kind). */
int eddy_state_clear(eddy_state s);

/* Value state. eddy_value_get sets *out to the current key's value and
 * returns its length, or returns EDDY_ABSENT or EDDY_ERROR. *out points
 * into the handle's buffer: it is valid until the next eddy_value_get on s,
 * and may be modified. */
int32_t eddy_value_get(eddy_state s, uint8_t **out);
int eddy_value_put(eddy_state s, const uint8_t *value, uint32_t len);

/* Schema versions of value state (ABI version 4; abi/ABI.md, "Version 4").
 * Link eddy_keyed_schema.c besides eddy_keyed.c to use them: it makes the
 * module declare version 4 (a module that calls them without it fails to
 * link).
 *
 * eddy_value_state2 is eddy_value_state for values this module writes in
 * schema version schema (eddy_value_state writes 0). eddy_value_get2 is
 * eddy_value_get that also sets *schema to the version the value was
 * written with (0 when absent, or written by eddy_value_state's handle or
 * an older module); eddy_value_put on the handle writes its schema. A new
 * version of an operator converts what an older one stored:
 *
 *     count = eddy_value_state2("count", 0, 1);   (1: JSON text)
 *     ...
 *     int32_t len = eddy_value_get2(count, &v, &schema);
 *     if (len >= 0 && schema == 0) ... v is the old 8-byte u64 ...
 *
 * Only value state has schema versions. */
#define EDDY_SCHEMA_ABI_VERSION 4
eddy_state eddy_value_state2(const char *name, int64_t ttl_ms, uint32_t schema);
int32_t eddy_value_get2(eddy_state s, uint8_t **out, uint32_t *schema);

/* Two-input operators (ABI version 5; abi/ABI.md, "Version 5"): Flink's
 * KeyedCoProcessFunction, on a node with input: [left, right] and
 * key_by: [left_key, right_key]. Link eddy_keyed_co.c besides eddy_keyed.c
 * (instead of eddy_keyed_schema.c: version 5 includes version 4, and
 * linking both fails with a duplicate symbol). The module then exports
 * eddy_process2, and defines these two in place of eddy_op_process: the
 * records of the node's first input go to eddy_op_process_left, those of
 * its second to eddy_op_process_right, with the current key set to the
 * record's. State and timers are one key space for both inputs:
 * eddy_op_timer fires once per timer, whichever input set it. */
#define EDDY_CO_ABI_VERSION 5
#define EDDY_LEFT 0
#define EDDY_RIGHT 1
int eddy_op_process_left(const eddy_record *r);
int eddy_op_process_right(const eddy_record *r);

/* Iterates the elements of a list or the entries of a map. */
typedef struct eddy_iter {
    const uint8_t *next;
    uint32_t left;
} eddy_iter;

/* List state. eddy_list_get reads the current key's list, oldest first,
 * into the handle's buffer and returns its number of elements (0 when
 * empty) or EDDY_ERROR; then eddy_list_next returns 1 and sets the next
 * element until it returns 0. The elements are valid until the next
 * eddy_list_get on s. */
int eddy_list_add(eddy_state s, const uint8_t *value, uint32_t len);
int32_t eddy_list_get(eddy_state s, eddy_iter *it);
int eddy_list_next(eddy_iter *it, const uint8_t **value, uint32_t *len);

/* Map state: a map from user keys to values per key. eddy_map_get is
 * eddy_value_get for one user key. eddy_map_entries reads all entries of
 * the current key's map in user-key byte order and returns their number
 * (0 when empty) or EDDY_ERROR; eddy_map_next walks them. Entries are valid
 * until the next eddy_map_entries on s; eddy_map_get, _put and _delete on s
 * do not disturb them. */
int32_t eddy_map_get(eddy_state s, const uint8_t *user_key, uint32_t user_key_len, uint8_t **out);
int eddy_map_put(eddy_state s, const uint8_t *user_key, uint32_t user_key_len, const uint8_t *value,
                 uint32_t len);
int eddy_map_delete(eddy_state s, const uint8_t *user_key, uint32_t user_key_len);
int32_t eddy_map_entries(eddy_state s, eddy_iter *it);
int eddy_map_next(eddy_iter *it, const uint8_t **user_key, uint32_t *user_key_len, const uint8_t **value,
                  uint32_t *len);

/* Timer kinds. */
enum { EDDY_EVENT_TIME = 0, EDDY_PROCESSING_TIME = 1 };

/* Sets a timer of the given kind at ts (ms) for the current key: an
 * event-time timer fires when the watermark reaches ts, a processing-time
 * one when the wall clock does. One timer per kind, key and time: setting
 * it again changes nothing. eddy_timer_delete removes it if it is set. */
int eddy_timer_register(int kind, int64_t ts);
int eddy_timer_delete(int kind, int64_t ts);

/* A timer that fired. key aliases the host's batch: valid until
 * eddy_op_timer returns. */
typedef struct eddy_timer {
    int32_t kind; /* EDDY_EVENT_TIME or EDDY_PROCESSING_TIME */
    int64_t timestamp;
    const uint8_t *key;
    uint32_t key_len;
} eddy_timer;

/* Implemented by an operator that sets timers: called once per fired
 * timer, in the order the host hands them over (event-time timers in
 * timestamp order), with the current key set to the timer's. It may
 * eddy_emit. Returns 0, or nonzero after eddy_fail. eddy_keyed.c has a weak
 * default that fails the task. */
int eddy_op_timer(const eddy_timer *t);

/* The watermark before the task's first one. */
#define EDDY_NO_WATERMARK INT64_MIN

/* The task's event-time watermark in ms, or EDDY_NO_WATERMARK. */
int64_t eddy_current_watermark(void);

/* The host's wall clock, ms since the Unix epoch. */
int64_t eddy_processing_time(void);

/* The current key (sets *len), or NULL outside eddy_op_process and
 * eddy_op_timer. It aliases the batch. */
const uint8_t *eddy_current_key(uint32_t *len);

#ifdef __cplusplus
}
#endif

#endif /* EDDY_KEYED_H */
