/*
 * regularjoin.c - the "regular-join" example operator in C: a two-input
 * keyed operator (eddy_keyed_co.c, ABI version 5), the unwindowed inner
 * join of Nexmark q3. It mirrors udfs/regularjoin/go, which documents the
 * configuration and the output; change both together.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o regular-join-c.wasm \
 *     udfs/regularjoin/c/regularjoin.c sdk/c/eddy.c sdk/c/eddy_keyed.c sdk/c/eddy_keyed_co.c sdk/c/eddy_json.c
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_keyed.h"

#define MAX_MS 9007199254740992.0 /* 2^53 */

static eddy_state sides[2]; /* EDDY_LEFT, EDDY_RIGHT */
static int64_t report_at;

/* Scratch: the output value. */
static uint8_t *out;
static uint32_t out_cap;

static int reserve(uint32_t n) {
    if (n <= out_cap) return 0;
    free(out);
    out = malloc(n);
    if (!out) {
        out_cap = 0;
        eddy_fail("regular-join: out of memory");
        return 1;
    }
    out_cap = n;
    return 0;
}

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("regular-join: config: not a JSON object");
        return 1;
    }
    for (;;) {
        double d;
        int st = eddy_json_next(&it, &key, &value);
        if (st == EDDY_JSON_END) break;
        if (st == EDDY_JSON_MALFORMED) {
            eddy_fail("regular-join: config: not valid JSON");
            return 1;
        }
        if (!eddy_json_equal(key, (const uint8_t *)"report_at", 9)) continue;
        if (!eddy_json_number(value, &d) || d != trunc(d) || d < 0 || d > MAX_MS) {
            eddy_fail("regular-join: config: report_at must be a time in ms from 0 to 2^53");
            return 1;
        }
        report_at = (int64_t)d;
    }
    sides[EDDY_LEFT] = eddy_list_state("left", 0);
    sides[EDDY_RIGHT] = eddy_list_state("right", 0);
    return sides[EDDY_LEFT] && sides[EDDY_RIGHT] ? 0 : 1;
}

/* emit_pair emits {"left":l,"right":r} under the record's key. */
static int emit_pair(const eddy_record *rec, const uint8_t *l, uint32_t ll, const uint8_t *r, uint32_t rl) {
    uint32_t n = 0;
    if (reserve(ll + rl + 20)) return 1;
    memcpy(out + n, "{\"left\":", 8), n += 8;
    memcpy(out + n, l, ll), n += ll;
    memcpy(out + n, ",\"right\":", 9), n += 9;
    memcpy(out + n, r, rl), n += rl;
    out[n++] = '}';
    return eddy_emit_kv(rec->key, rec->key_len, out, n, rec->timestamp);
}

static int process(int side, const eddy_record *r) {
    eddy_iter it;
    const uint8_t *v;
    uint32_t vl;
    int32_t mine, other;
    if ((mine = eddy_list_get(sides[side], &it)) == EDDY_ERROR) return 1;
    if ((other = eddy_list_get(sides[1 - side], &it)) == EDDY_ERROR) return 1;
    if (report_at > 0 && mine == 0 && other == 0 && eddy_timer_register(EDDY_EVENT_TIME, report_at)) return 1;
    while (eddy_list_next(&it, &v, &vl)) {
        int rc = side == EDDY_LEFT ? emit_pair(r, r->value, r->value_len, v, vl) : emit_pair(r, v, vl, r->value, r->value_len);
        if (rc) return 1;
    }
    return eddy_list_add(sides[side], r->value, r->value_len);
}

int eddy_op_process_left(const eddy_record *r) { return process(EDDY_LEFT, r); }
int eddy_op_process_right(const eddy_record *r) { return process(EDDY_RIGHT, r); }

/* The key's report: the records each input had; then its state is cleared. */
int eddy_op_timer(const eddy_timer *t) {
    eddy_iter it;
    int32_t nl, nr;
    uint32_t i, n;
    if ((nl = eddy_list_get(sides[EDDY_LEFT], &it)) == EDDY_ERROR) return 1;
    if ((nr = eddy_list_get(sides[EDDY_RIGHT], &it)) == EDDY_ERROR) return 1;
    if (reserve(t->key_len * 6 + 64)) return 1;
    n = (uint32_t)snprintf((char *)out, out_cap, "{\"key\":\"");
    for (i = 0; i < t->key_len; i++) {
        uint8_t c = t->key[i];
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = c;
        } else if (c < 0x20) {
            n += (uint32_t)snprintf((char *)out + n, out_cap - n, "\\u%04x", c);
        } else {
            out[n++] = c;
        }
    }
    n += (uint32_t)snprintf((char *)out + n, out_cap - n, "\",\"left\":%d,\"right\":%d}", (int)nl, (int)nr);
    if (eddy_emit_kv(t->key, t->key_len, out, n, t->timestamp)) return 1;
    if (eddy_state_clear(sides[EDDY_LEFT])) return 1;
    return eddy_state_clear(sides[EDDY_RIGHT]);
}
