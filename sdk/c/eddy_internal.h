/*
 * eddy_internal.h - what eddy.c shares with eddy_keyed.c. Not for
 * operators: the names are reserved (eddy__ prefix) and may change.
 */
#ifndef EDDY_INTERNAL_H
#define EDDY_INTERNAL_H

#include <stdint.h>

#include "eddy.h"

/* The module's ABI version when it is not 1: defined by eddy_keyed.c as 2
 * (weakly, so that eddy_keyed_schema.c's 4 replaces it) and by
 * eddy_aggregate.c as 3. eddy.c refers to it weakly (the attribute is
 * there, not here, so that the other definitions stay strong): linking one
 * of those files is what makes eddy_abi_version report its version. */
extern const int32_t eddy__abi_version;

/* Defined (strongly) by eddy_keyed.c and eddy_aggregate.c, so that linking
 * both fails with a duplicate symbol, as it should: an aggregate keeps no
 * state of its own. Nothing refers to it, so no module contains it. */
extern const int32_t eddy__stateful_or_aggregate;

/* The key of the record being processed or of the timer firing; it aliases
 * the batch. eddy__has_key is 0 outside those calls. */
extern const uint8_t *eddy__key;
extern uint32_t eddy__key_len;
extern int eddy__has_key;

/* 1 during eddy_open, the only call in which state may be declared. */
extern int eddy__opening;

/* Checks that [batch, batch+len) is the eddy_alloc buffer's (range names
 * it in the message otherwise), validates the whole batch (what names it),
 * then calls each for every record with the current key set to the
 * record's and eddy_emit allowed, and flushes the output. Returns the
 * status of the export: 0, or 1 after eddy_fail. */
int32_t eddy__run_batch(const char *range, const char *what, const uint8_t *batch, uint32_t len,
                        int (*each)(const eddy_record *r));

/* eddy__run_batch for the batches of eddy_process and eddy_process2, which
 * carry the field table (version 6) when the module declared fields: it
 * checks the table fits and points each record's fields_row at its row. */
int32_t eddy__run_input_batch(const uint8_t *batch, uint32_t len, int (*each)(const eddy_record *r));

/* Set by eddy_fields.c when eddy_open declared fields: the size of a row
 * of the field table (4 + 8 * paths), 0 without fields. */
extern uint32_t eddy__fields_row;

/* eddy_emit_parts (eddy_fields.c): r with its value the n parts at parts. */
int eddy__emit_parts(const eddy_record *r, const void *parts, uint32_t n);

/* The batch being run, for eddy_fields.c's bounds check of a span. */
extern const uint8_t *eddy__batch;
extern uint32_t eddy__batch_len;

/* Runs body as the body of an export that may emit (eddy_agg_create):
 * eddy_emit allowed, no current key, the output flushed when body returns
 * 0, dropped when it fails. Returns the status of the export. */
int32_t eddy__run_call(int (*body)(void));

/* The number of records of a batch that eddy__run_batch has checked: for
 * the each function of a batch that needs to know where it ends. */
uint32_t eddy__batch_count(const uint8_t *batch);

#endif /* EDDY_INTERNAL_H */
