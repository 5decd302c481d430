/*
 * counter.c - the "counter" example operator in C: a running count of
 * records per key in keyed state. It mirrors udfs/counter/counting, which
 * documents the output and the state encoding; change both together.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o counter-c.wasm \
 *     udfs/counter/c/counter.c sdk/c/eddy.c sdk/c/eddy_keyed.c sdk/c/eddy_json.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_keyed.h"

static eddy_state count;

/* Scratch: the output value. */
static uint8_t *out;
static uint32_t out_cap;

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("counter: config is not a JSON object");
        return 1;
    }
    switch (eddy_json_next(&it, &key, &value)) {
    case EDDY_JSON_END: break;
    case EDDY_JSON_MALFORMED: eddy_fail("counter: config is not valid JSON"); return 1;
    default: eddy_fail("counter: config: unknown key %.*s", (int)key.len, key.ptr); return 1;
    }
    count = eddy_value_state("count", 0);
    return count ? 0 : 1;
}

int eddy_op_process(const eddy_record *r) {
    static const char open[] = "{\"key\":", mid[] = ",\"count\":";
    uint8_t *stored;
    uint64_t n = 0, need;
    uint32_t at;
    int32_t len = eddy_value_get(count, &stored);
    if (len == EDDY_ERROR) return 1;
    if (len != EDDY_ABSENT) {
        if (len != 8) {
            eddy_fail("counter: the stored count has %d bytes, want 8", len);
            return 1;
        }
        memcpy(&n, stored, 8); /* little endian, as Wasm is */
    }
    n++;
    if (eddy_value_put(count, (const uint8_t *)&n, 8)) return 1;

    need = sizeof open + 6 * (uint64_t)r->key_len + 2 + sizeof mid + 21 + 1;
    if (need > out_cap) {
        free(out);
        out = malloc((size_t)need);
        out_cap = out ? (uint32_t)need : 0;
        if (!out) {
            eddy_fail("counter: out of memory");
            return 1;
        }
    }
    memcpy(out, open, sizeof open - 1);
    at = sizeof open - 1;
    at += eddy_json_quote(out + at, r->key, r->key_len);
    memcpy(out + at, mid, sizeof mid - 1);
    at += sizeof mid - 1;
    at += (uint32_t)snprintf((char *)out + at, 21, "%llu", (unsigned long long)n);
    out[at++] = '}';
    return eddy_emit_kv(r->key, r->key_len, out, at, r->timestamp);
}
