/*
 * counter_variants.c - versions of udfs/counter/c/counter.c that the hot
 * swap tests replace it with (dataflow/swap_test.go). One source, built
 * with one -D per variant by udfs/Makefile:
 *
 *   -DCOUNTER_PLUS     counter-plus-c.wasm: the same state and encoding,
 *                      output {"key":K,"count":N,"v":"plus"}: a compatible
 *                      v2 whose output differs visibly.
 *   -DCOUNTER_KIND     counter-kind-c.wasm: declares "count" as list state
 *                      (a kind change: the swap is refused).
 *   -DCOUNTER_RENAMED  counter-renamed-c.wasm: declares "total" instead of
 *                      "count" (a dropped state: refused unless allowed).
 *   -DCOUNTER_TRAP     counter-trap-c.wasm: the states of counter-c, but it
 *                      fails on its first record (the rollback test).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_keyed.h"

static eddy_state count;

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
#if defined(COUNTER_KIND)
    count = eddy_list_state("count", 0);
#elif defined(COUNTER_RENAMED)
    count = eddy_value_state("total", 0);
#else
    count = eddy_value_state("count", 0);
#endif
    return count ? 0 : 1;
}

int eddy_op_process(const eddy_record *r) {
#if defined(COUNTER_PLUS)
    static const char open[] = "{\"key\":", mid[] = ",\"count\":", end[] = ",\"v\":\"plus\"}";
#else
    static const char open[] = "{\"key\":", mid[] = ",\"count\":", end[] = "}";
#endif
    uint8_t *stored;
    uint64_t n = 0, need;
    uint32_t at;
    int32_t len;
#if defined(COUNTER_TRAP)
    (void)r;
    eddy_fail("counter-trap: refusing record");
    return 1;
#endif
#if defined(COUNTER_KIND)
    /* Never swapped in (refused at prepare); it counts list elements. */
    len = eddy_list_add(count, (const uint8_t *)"", 0) ? EDDY_ERROR : 0;
    if (len == EDDY_ERROR) return 1;
    n = 0;
#else
    len = eddy_value_get(count, &stored);
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
#endif
    (void)stored;

    need = sizeof open + 6 * (uint64_t)r->key_len + 2 + sizeof mid + 21 + sizeof end;
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
    memcpy(out + at, end, sizeof end - 1);
    at += sizeof end - 1;
    return eddy_emit_kv(r->key, r->key_len, out, at, r->timestamp);
}
