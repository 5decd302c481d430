/*
 * nexmark_join.c - the two-input parts of the Nexmark queries
 * (examples/nexmark), a two-input keyed operator (eddy_keyed_co.c, ABI
 * version 5); the node's config {"query": NAME} picks the part:
 *
 *   q3  input [persons, auctions], key_by [id, seller]: Flink's regular
 *       inner join of the people of OR, ID and CA with their auctions of
 *       category 10, {name, city, state, id}, whichever side comes first
 *   q4  input [auctions, bids], key_by [id, auction]: the closing price of
 *       each auction (the highest of its bids from its dateTime to its
 *       expires, inclusive), {id, category, final}, when the watermark
 *       passes its expiry; an auction without such a bid gives nothing
 *
 * State is kept as in Flink's regular join: q3 keeps every matching
 * person, and the auctions of a person not seen yet; q4 clears an auction
 * when it closes, and bids whose auction has not come by the time their
 * own dateTime passes the watermark (a valid bid is never before its
 * auction). The Go reference in examples/nexmark computes the same
 * without Eddy.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o nexmark-join-c.wasm udfs/nexmark/c/nexmark_join.c \
 *     sdk/c/eddy.c sdk/c/eddy_keyed.c sdk/c/eddy_keyed_co.c sdk/c/eddy_json.c
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_keyed.h"
#include "nexmark_util.h"

enum { Q3 = 3, Q4 = 4 };

static int query;
static eddy_state one, many; /* q3: person, pending auctions; q4: auction, pending bids */
static eddy_buf out, scratch;

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("nexmark-join: config is not a JSON object");
        return 1;
    }
    for (;;) {
        int s = eddy_json_next(&it, &key, &value);
        if (s == EDDY_JSON_END) break;
        if (s == EDDY_JSON_MALFORMED) {
            eddy_fail("nexmark-join: config is not valid JSON");
            return 1;
        }
        if (!lit_equal(key, "query") || query) {
            eddy_fail("nexmark-join: config: unknown or repeated key %.*s", (int)key.len, key.ptr);
            return 1;
        }
        if (lit_equal(value, "q3")) query = Q3;
        else if (lit_equal(value, "q4")) query = Q4;
        else {
            eddy_fail("nexmark-join: config: query %.*s is not q3 or q4", (int)value.len, value.ptr);
            return 1;
        }
    }
    if (!query) {
        eddy_fail("nexmark-join: config: query is missing");
        return 1;
    }
    one = eddy_value_state(query == Q3 ? "person" : "auction", 0);
    many = eddy_list_state(query == Q3 ? "auctions" : "bids", 0);
    return one && many ? 0 : 1;
}

static int bad(const char *what) {
    eddy_fail("nexmark-join: q%d: %s", query, what);
    return 1;
}

/* ---- q3: the person's state is "" (not of OR, ID, CA) or its output
 * prefix {"name":…,"city":…,"state":… ---- */

static int q3_emit(const uint8_t *prefix, uint32_t plen, const uint8_t *id, uint32_t idlen, int64_t ts) {
    uint32_t klen;
    const uint8_t *k = eddy_current_key(&klen);
    out.len = 0;
    if (put(&out, prefix, plen) || puts_(&out, ",\"id\":") || put(&out, id, idlen) || puts_(&out, "}")) return 1;
    return eddy_emit_kv(k, klen, out.data, out.len, ts);
}

int eddy_op_process_left(const eddy_record *r) {
    if (query == Q4) { /* an auction */
        eddy_json_span cat = field(r->value, r->value_len, "category"), dt = field(r->value, r->value_len, "dateTime"),
                       ex = field(r->value, r->value_len, "expires");
        int64_t category, from, to, best = -1;
        eddy_iter it;
        const uint8_t *e;
        uint32_t elen;
        if (!as_int(cat, &category) || !as_int(dt, &from) || !as_int(ex, &to)) {
            return bad("an auction without category, dateTime or expires");
        }
        /* The bids that came first. */
        int32_t n = eddy_list_get(many, &it);
        if (n == EDDY_ERROR) return 1;
        while (eddy_list_next(&it, &e, &elen)) {
            if (elen != 16) return bad("a kept bid is not 16 bytes");
            int64_t price = rd64(e), at = rd64(e + 8);
            if (at >= from && at <= to && price > best) best = price;
        }
        if (n > 0 && eddy_state_clear(many)) return 1;
        uint8_t v[32];
        wr64(v, category);
        wr64(v + 8, from);
        wr64(v + 16, to);
        wr64(v + 24, best);
        if (eddy_value_put(one, v, sizeof v)) return 1;
        return eddy_timer_register(EDDY_EVENT_TIME, to);
    }
    /* q3: a person */
    eddy_json_span st = field(r->value, r->value_len, "state"), name = field(r->value, r->value_len, "name"),
                   city = field(r->value, r->value_len, "city");
    if (!st.ptr || !name.ptr || !city.ptr) return bad("a person without name, city or state");
    scratch.len = 0;
    if (lit_equal(st, "OR") || lit_equal(st, "ID") || lit_equal(st, "CA")) {
        if (puts_(&scratch, "{\"name\":") || put(&scratch, name.ptr, name.len) || puts_(&scratch, ",\"city\":") ||
            put(&scratch, city.ptr, city.len) || puts_(&scratch, ",\"state\":") || put(&scratch, st.ptr, st.len))
            return 1;
    }
    /* The auctions that came first, as their raw id. */
    eddy_iter it;
    const uint8_t *e;
    uint32_t elen;
    int32_t n = eddy_list_get(many, &it);
    if (n == EDDY_ERROR) return 1;
    while (scratch.len && eddy_list_next(&it, &e, &elen)) {
        if (q3_emit(scratch.data, scratch.len, e, elen, r->timestamp)) return 1;
    }
    if (n > 0 && eddy_state_clear(many)) return 1;
    return eddy_value_put(one, scratch.data ? scratch.data : (const uint8_t *)"", scratch.len);
}

int eddy_op_process_right(const eddy_record *r) {
    if (query == Q4) { /* a bid */
        eddy_json_span p = field(r->value, r->value_len, "price"), dt = field(r->value, r->value_len, "dateTime");
        int64_t price, at;
        uint8_t *v;
        if (!as_int(p, &price) || !as_int(dt, &at)) return bad("a bid without price or dateTime");
        int32_t n = eddy_value_get(one, &v);
        if (n == EDDY_ERROR) return 1;
        if (n == 32) {
            if (at >= rd64(v + 8) && at <= rd64(v + 16) && price > rd64(v + 24)) {
                wr64(v + 24, price);
                return eddy_value_put(one, v, 32);
            }
            return 0;
        }
        /* Before its auction: keep it until its own time passes. */
        uint8_t b[16];
        wr64(b, price);
        wr64(b + 8, at);
        if (eddy_list_add(many, b, sizeof b)) return 1;
        return eddy_timer_register(EDDY_EVENT_TIME, at);
    }
    /* q3: an auction */
    eddy_json_span cat = field(r->value, r->value_len, "category"), id = field(r->value, r->value_len, "id");
    int64_t category;
    uint8_t *v;
    if (!as_int(cat, &category) || !id.ptr) return bad("an auction without category or id");
    if (category != 10) return 0;
    int32_t n = eddy_value_get(one, &v);
    if (n == EDDY_ERROR) return 1;
    if (n == EDDY_ABSENT) return eddy_list_add(many, id.ptr, id.len); /* its seller comes later */
    return n > 0 ? q3_emit(v, (uint32_t)n, id.ptr, id.len, r->timestamp) : 0;
}

int eddy_op_timer(const eddy_timer *t) {
    uint8_t *v;
    if (query != Q4) return 0;
    int32_t n = eddy_value_get(one, &v);
    if (n == EDDY_ERROR) return 1;
    if (n != 32) return eddy_state_clear(many); /* bids whose auction never came */
    if (t->timestamp != rd64(v + 16)) return 0; /* a bid's timer from before its auction came */
    int64_t best = rd64(v + 24);
    if (best >= 0) {
        out.len = 0;
        if (puts_(&out, "{\"id\":") || put(&out, t->key, t->key_len) || puts_(&out, ",\"category\":") ||
            put_int(&out, rd64(v)) || puts_(&out, ",\"final\":") || put_int(&out, best) || puts_(&out, "}"))
            return 1;
        if (eddy_emit_kv(t->key, t->key_len, out.data, out.len, t->timestamp)) return 1;
    }
    return eddy_state_clear(one);
}
