/*
 * counter_v2.c - version 2 of the "counter" example operator in C, the
 * module a hot swap replaces udfs/counter/c with. It counts records per key
 * like version 1 but stores the count as JSON text, {"n":N}, in schema
 * version 1 of the "count" state (ABI version 4, abi/ABI.md "Version 4"),
 * and emits {"key":K,"count":N,"v":2} so that its output differs visibly
 * from version 1's. A count version 1 wrote (schema 0: 8 bytes, a u64 in
 * little endian) is converted on read, so every key's count goes on where
 * version 1 left it.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o counter-v2-c.wasm \
 *     udfs/counter/c-v2/counter_v2.c sdk/c/eddy.c sdk/c/eddy_keyed.c \
 *     sdk/c/eddy_keyed_schema.c sdk/c/eddy_json.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_keyed.h"

/* The schema versions of "count". */
enum { COUNT_U64 = 0, COUNT_JSON = 1 };

static eddy_state count;

/* Scratch: the output value. */
static uint8_t *out;
static uint32_t out_cap;

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("counter v2: config is not a JSON object");
        return 1;
    }
    switch (eddy_json_next(&it, &key, &value)) {
    case EDDY_JSON_END: break;
    case EDDY_JSON_MALFORMED: eddy_fail("counter v2: config is not valid JSON"); return 1;
    default: eddy_fail("counter v2: config: unknown key %.*s", (int)key.len, key.ptr); return 1;
    }
    count = eddy_value_state2("count", 0, COUNT_JSON);
    return count ? 0 : 1;
}

/* Parses the decimal digits of [p, p+len) into *n; 0 if they are not a
 * u64 without sign or leading zeros. */
static int parse_u64(const uint8_t *p, uint32_t len, uint64_t *n) {
    uint64_t v = 0;
    uint32_t i;
    if (len == 0 || len > 20 || (len > 1 && p[0] == '0')) return 0;
    for (i = 0; i < len; i++) {
        uint64_t d;
        if (p[i] < '0' || p[i] > '9') return 0;
        d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *n = v;
    return 1;
}

/* Reads the stored count in either schema into *n (0 when absent). */
static int read_count(uint64_t *n) {
    static const char open[] = "{\"n\":";
    uint8_t *stored;
    uint32_t schema;
    int32_t len = eddy_value_get2(count, &stored, &schema);
    *n = 0;
    if (len == EDDY_ERROR) return 1;
    if (len == EDDY_ABSENT) return 0;
    switch (schema) {
    case COUNT_U64:
        if (len != 8) {
            eddy_fail("counter v2: the stored count (schema 0) has %d bytes, want 8", len);
            return 1;
        }
        memcpy(n, stored, 8); /* little endian, as Wasm is */
        return 0;
    case COUNT_JSON:
        if ((uint32_t)len < sizeof open || memcmp(stored, open, sizeof open - 1) != 0 || stored[len - 1] != '}' ||
            !parse_u64(stored + sizeof open - 1, (uint32_t)len - (uint32_t)sizeof open, n)) {
            eddy_fail("counter v2: the stored count (schema 1) is not {\"n\":N}: %.*s", len, stored);
            return 1;
        }
        return 0;
    }
    eddy_fail("counter v2: the stored count has schema version %u, which this version does not know", schema);
    return 1;
}

int eddy_op_process(const eddy_record *r) {
    static const char open[] = "{\"key\":", mid[] = ",\"count\":", tail[] = ",\"v\":2}";
    char text[32];
    uint64_t n, need;
    uint32_t at;
    int text_len;
    if (read_count(&n)) return 1;
    n++;
    text_len = snprintf(text, sizeof text, "{\"n\":%llu}", (unsigned long long)n);
    if (eddy_value_put(count, (const uint8_t *)text, (uint32_t)text_len)) return 1;

    need = sizeof open + 6 * (uint64_t)r->key_len + 2 + sizeof mid + 21 + sizeof tail;
    if (need > out_cap) {
        free(out);
        out = malloc((size_t)need);
        out_cap = out ? (uint32_t)need : 0;
        if (!out) {
            eddy_fail("counter v2: out of memory");
            return 1;
        }
    }
    memcpy(out, open, sizeof open - 1);
    at = sizeof open - 1;
    at += eddy_json_quote(out + at, r->key, r->key_len);
    memcpy(out + at, mid, sizeof mid - 1);
    at += sizeof mid - 1;
    at += (uint32_t)snprintf((char *)out + at, 21, "%llu", (unsigned long long)n);
    memcpy(out + at, tail, sizeof tail - 1);
    at += sizeof tail - 1;
    return eddy_emit_kv(r->key, r->key_len, out, at, r->timestamp);
}
