/* cjson.c - sdk/c/eddy_json.c on its own, for json_test.go: each export
 * runs one reader function on bytes the test wrote into linear memory, so
 * that the test can place them where it likes (at the very end of memory,
 * where a load past the input traps). No eddy.c: this is no operator.
 * json_test.go builds it with and without -msimd128. */
#include <stdint.h>

#include "eddy_json.h"

#define EXPORT(name) __attribute__((export_name(#name)))

EXPORT(json_valid) int32_t json_valid(const uint8_t *b, uint32_t n) { return eddy_json_valid(b, n); }

EXPORT(json_value_end) int64_t json_value_end(const uint8_t *b, uint32_t n, uint32_t i) {
    return eddy_json_value_end(b, n, i);
}

/* The value of member name as (offset in b) << 32 | length, or the
 * negative status (MALFORMED -1; END, absent, as -2). */
EXPORT(json_lookup) int64_t json_lookup(const uint8_t *b, uint32_t n, const uint8_t *name, uint32_t name_len) {
    eddy_json_span v;
    int st = eddy_json_lookup(b, n, name, name_len, &v);
    if (st != EDDY_JSON_FIELD) return st == EDDY_JSON_END ? -2 : -1;
    return (int64_t)(v.ptr - b) << 32 | v.len;
}

/* The members of the object in b, each as its key's and its value's
 * offset and length (four uint32 to out, at most max members); the count,
 * or -1 if the object is malformed. */
EXPORT(json_members) int32_t json_members(const uint8_t *b, uint32_t n, uint32_t *out, uint32_t max) {
    eddy_json_iter it;
    eddy_json_span k, v;
    int32_t count = 0;
    if (!eddy_json_objects(&it, b, n)) return -1;
    for (;;) {
        int st = eddy_json_next(&it, &k, &v);
        if (st == EDDY_JSON_END) return count;
        if (st == EDDY_JSON_MALFORMED) return -1;
        if ((uint32_t)count < max) {
            out[4 * count] = (uint32_t)(k.ptr - b);
            out[4 * count + 1] = k.len;
            out[4 * count + 2] = (uint32_t)(v.ptr - b);
            out[4 * count + 3] = v.len;
        }
        count++;
    }
}

EXPORT(json_unquote) uint32_t json_unquote(const uint8_t *b, uint32_t n, uint8_t *dst) {
    eddy_json_span raw = {b, n};
    return eddy_json_unquote(raw, dst);
}

EXPORT(json_equal) int32_t json_equal(const uint8_t *b, uint32_t n, const uint8_t *s, uint32_t s_len) {
    eddy_json_span raw = {b, n};
    return eddy_json_equal(raw, s, s_len);
}
