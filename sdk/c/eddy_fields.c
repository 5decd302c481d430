/*
 * eddy_fields.c - fields the host extracts (ABI versions 6 and 7); see
 * eddy_fields.h and abi/ABI.md. Mirrors sdk/go/fields.
 */
#include "eddy_fields.h"

#include <stdlib.h>
#include <string.h>

#include "eddy_internal.h"

#define IMPORT(name) __attribute__((import_module("eddy"), import_name(name)))

IMPORT("fields") void eddy_host_fields(const uint8_t *list, uint32_t len);

/* Linking this file makes the module declare version 7 (eddy.c). */
const int32_t eddy__fields_version = 7;

#define ABSENT 0xFFFFFFFFu

/* The field list being built by eddy_field: u32 n, then the paths. */
static eddy_buf list;
static uint32_t npaths;
/* Bit i: path i is a number field. */
static uint64_t numbers;

static int put32(uint32_t v) { return eddy_buf_append(&list, &v, 4); }

static int declare(uint32_t nkeys, const char *const *keys, uint32_t flag) {
    uint32_t i;
    if (!eddy__opening) {
        eddy_fail("eddy_field: fields are declared in eddy_op_open");
        return -1;
    }
    if (npaths == EDDY_MAX_FIELDS) {
        eddy_fail("eddy_field: more than %d fields", EDDY_MAX_FIELDS);
        return -1;
    }
    if (nkeys == 0 || nkeys > EDDY_MAX_FIELD_KEYS) {
        eddy_fail("eddy_field: a path has 1 to %d keys, not %u", EDDY_MAX_FIELD_KEYS, nkeys);
        return -1;
    }
    if (list.len == 0 && put32(0)) return -1;
    if (put32(nkeys | flag)) return -1;
    for (i = 0; i < nkeys; i++) {
        uint32_t n = (uint32_t)strlen(keys[i]);
        if (put32(n) || eddy_buf_append(&list, keys[i], n)) return -1;
    }
    if (flag) numbers |= (uint64_t)1 << npaths;
    npaths++;
    memcpy(list.data, &npaths, 4);
    return (int)npaths - 1;
}

int eddy_field(uint32_t nkeys, const char *const *keys) { return declare(nkeys, keys, 0); }

int eddy_field1(const char *key) { return eddy_field(1, &key); }

int eddy_number_field(uint32_t nkeys, const char *const *keys) { return declare(nkeys, keys, 0x80000000u); }

int eddy_number_field1(const char *key) { return eddy_number_field(1, &key); }

/* Called by eddy.c when eddy_op_open has returned 0: one fields call with
 * the whole list (the host traps on a bad one, failing the open). */
int eddy__fields_commit(void) {
    if (npaths == 0) return 0;
    eddy_host_fields(list.data, list.len);
    eddy__fields_row = 4 + 8 * npaths;
    free(list.data);
    list.data = NULL;
    list.len = list.cap = 0;
    return 0;
}

int eddy_record_valid(const eddy_record *r) {
    uint32_t st;
    if (r->fields_row == NULL) return 0;
    memcpy(&st, r->fields_row, 4);
    return st == 1;
}

eddy_json_span eddy_record_field(const eddy_record *r, int index) {
    eddy_json_span s = {NULL, 0};
    uint32_t off, len;
    if (r->fields_row == NULL || index < 0 || (uint32_t)index >= npaths || (numbers >> index & 1)) return s;
    memcpy(&off, r->fields_row + 4 + 8 * (uint32_t)index, 4);
    memcpy(&len, r->fields_row + 8 + 8 * (uint32_t)index, 4);
    /* The host puts spans inside the value; a span outside the batch
     * (a broken host) reads as absent rather than past it. */
    if (off == ABSENT || (uint64_t)off + len > eddy__batch_len) return s;
    s.ptr = eddy__batch + off;
    s.len = len;
    return s;
}

int eddy_record_number(const eddy_record *r, int index, double *out) {
    double x;
    if (r->fields_row == NULL || index < 0 || (uint32_t)index >= npaths || !(numbers >> index & 1)) return 0;
    memcpy(&x, r->fields_row + 4 + 8 * (uint32_t)index, 8);
    if (x != x) return 0; /* NaN: absent or not a number */
    *out = x;
    return 1;
}

/* An eddy_json_span is a pointer and a uint32_t: in wasm32, the 8 bytes of
 * a part of the ABI's part list, so the array is the list. */
_Static_assert(sizeof(eddy_json_span) == 8, "eddy_json_span is not a wasm32 part");

int eddy_emit_parts(const eddy_record *r, const eddy_json_span *parts, uint32_t n) {
    return eddy__emit_parts(r, parts, n);
}
