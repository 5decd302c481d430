/*
 * eddy_internal.h - what eddy.c shares with eddy_keyed.c. Not for
 * operators: the names are reserved (eddy__ prefix) and may change.
 */
#ifndef EDDY_INTERNAL_H
#define EDDY_INTERNAL_H

#include <stdint.h>

#include "eddy.h"

/* Defined by eddy_keyed.c as 2. eddy.c refers to it weakly: linking
 * eddy_keyed.c is what makes eddy_abi_version report version 2. */
extern const int32_t eddy__keyed_abi_version __attribute__((weak));

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

#endif /* EDDY_INTERNAL_H */
