/*
 * counter.c - the "counter" example operator in C: a running count of
 * records per key in keyed state, and with idle_ms a report of the keys
 * that went quiet, on processing-time timers. It mirrors
 * udfs/counter/counting, which documents the configuration, the output and
 * the state encoding; change both together.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o counter-c.wasm \
 *     udfs/counter/c/counter.c sdk/c/eddy.c sdk/c/eddy_keyed.c sdk/c/eddy_json.c
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_keyed.h"

#define MAX_IDLE_MS 9007199254740992.0 /* 2^53 */

static eddy_state count;
static eddy_state idle; /* with idle_ms: the key's deadline */
static int64_t idle_ms;

/* Scratch: the output value. */
static uint8_t *out;
static uint32_t out_cap;

static int lit_equal(eddy_json_span raw, const char *s) {
    return eddy_json_equal(raw, (const uint8_t *)s, (uint32_t)strlen(s));
}

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("counter: config is not a JSON object");
        return 1;
    }
    for (;;) {
        double d;
        int st = eddy_json_next(&it, &key, &value);
        if (st == EDDY_JSON_END) break;
        if (st == EDDY_JSON_MALFORMED) {
            eddy_fail("counter: config is not valid JSON");
            return 1;
        }
        if (!lit_equal(key, "idle_ms")) {
            eddy_fail("counter: config: unknown key %.*s", (int)key.len, key.ptr);
            return 1;
        }
        if (idle_ms) {
            eddy_fail("counter: config: repeated key idle_ms");
            return 1;
        }
        if (!eddy_json_number(value, &d) || d != trunc(d) || d < 1 || d > MAX_IDLE_MS) {
            eddy_fail("counter: config: idle_ms must be a whole number of milliseconds from 1 to 2^53");
            return 1;
        }
        idle_ms = (int64_t)d;
    }
    count = eddy_value_state("count", 0);
    if (!count) return 1;
    if (idle_ms) {
        idle = eddy_value_state("idle", 0);
        if (!idle) return 1;
    }
    return 0;
}

/* read_u64 reads a stored count or deadline into *n: 1 when there is one,
 * 0 when absent, -1 after eddy_fail. */
static int read_u64(eddy_state s, uint64_t *n) {
    uint8_t *stored;
    int32_t len = eddy_value_get(s, &stored);
    if (len == EDDY_ERROR) return -1;
    if (len == EDDY_ABSENT) return 0;
    if (len != 8) {
        eddy_fail("counter: the stored count has %d bytes, want 8", len);
        return -1;
    }
    memcpy(n, stored, 8); /* little endian, as Wasm is */
    return 1;
}

/* emit_count emits {"key":K,"count":N} (with ,"idle":true when idle). */
static int emit_count(const uint8_t *k, uint32_t klen, uint64_t n, int is_idle, int64_t ts) {
    static const char open[] = "{\"key\":", mid[] = ",\"count\":", idle_tail[] = ",\"idle\":true";
    uint64_t need = sizeof open + 6 * (uint64_t)klen + 2 + sizeof mid + 21 + sizeof idle_tail + 1;
    uint32_t at;
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
    at += eddy_json_quote(out + at, k, klen);
    memcpy(out + at, mid, sizeof mid - 1);
    at += sizeof mid - 1;
    at += (uint32_t)snprintf((char *)out + at, 21, "%llu", (unsigned long long)n);
    if (is_idle) {
        memcpy(out + at, idle_tail, sizeof idle_tail - 1);
        at += sizeof idle_tail - 1;
    }
    out[at++] = '}';
    return eddy_emit_kv(k, klen, out, at, ts);
}

/* touch moves the key's idle timer to now + idle_ms. */
static int touch(void) {
    int64_t now = eddy_processing_time();
    int64_t deadline = now > INT64_MAX - idle_ms ? INT64_MAX : now + idle_ms;
    uint64_t prev;
    int had = read_u64(idle, &prev);
    if (had < 0) return 1;
    if (had) {
        if ((int64_t)prev == deadline) return 0;
        if (eddy_timer_delete(EDDY_PROCESSING_TIME, (int64_t)prev)) return 1;
    }
    if (eddy_timer_register(EDDY_PROCESSING_TIME, deadline)) return 1;
    return eddy_value_put(idle, (const uint8_t *)&deadline, 8);
}

int eddy_op_process(const eddy_record *r) {
    uint64_t n = 0;
    if (read_u64(count, &n) < 0) return 1;
    n++;
    if (eddy_value_put(count, (const uint8_t *)&n, 8)) return 1;
    if (idle_ms && touch()) return 1;
    return emit_count(r->key, r->key_len, n, 0, r->timestamp);
}

/* Reports the key idle when the timer of its last record fires. */
int eddy_op_timer(const eddy_timer *t) {
    uint64_t deadline, n = 0;
    int had;
    if (!idle_ms || t->kind != EDDY_PROCESSING_TIME) return 0;
    had = read_u64(idle, &deadline);
    if (had <= 0 || (int64_t)deadline != t->timestamp) return had < 0;
    if (read_u64(count, &n) < 0) return 1;
    if (eddy_state_clear(idle)) return 1;
    return emit_count(t->key, t->key_len, n, 1, EDDY_NO_TIMESTAMP);
}
