/*
 * nexmark_util.h - the small writers and readers nexmark.c and
 * nexmark_join.c share: appending to an eddy_buf, reading JSON fields
 * and integers, and the little-endian int64 of their state encodings.
 */
#ifndef NEXMARK_UTIL_H
#define NEXMARK_UTIL_H

#include <math.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"

static inline int lit_equal(eddy_json_span raw, const char *s) {
    return eddy_json_equal(raw, (const uint8_t *)s, (uint32_t)strlen(s));
}

static inline int put(eddy_buf *b, const void *p, uint32_t n) { return eddy_buf_append(b, p, n); }
static inline int puts_(eddy_buf *b, const char *s) { return put(b, s, (uint32_t)strlen(s)); }

static inline int put_int(eddy_buf *b, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) tmp[sizeof tmp - 1 - n++] = '-';
    return put(b, tmp + sizeof tmp - n, (uint32_t)n);
}

/* A field of the object in value, or a NULL span. */
static inline eddy_json_span field(const uint8_t *v, uint32_t n, const char *name) {
    eddy_json_span s = {0, 0};
    if (eddy_json_lookup(v, n, (const uint8_t *)name, (uint32_t)strlen(name), &s) != EDDY_JSON_FIELD) s.ptr = NULL;
    return s;
}

/* A raw JSON number as an int64 (the model's ids, prices and times are
 * integers below 2^53); 0 when it is not one. */
static inline int as_int(eddy_json_span s, int64_t *v) {
    double d;
    if (s.ptr == NULL || eddy_json_kind_of(s) != EDDY_JSON_NUMBER || !eddy_json_number(s, &d) || d != trunc(d)) return 0;
    *v = (int64_t)d;
    return 1;
}

static inline int64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return (int64_t)v;
}

static inline void wr64(uint8_t *p, int64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)v >> (8 * i));
}

#endif
