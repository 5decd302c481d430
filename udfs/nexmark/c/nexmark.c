/*
 * nexmark.c - the user logic of the Nexmark queries (examples/nexmark) as
 * one C module; the node's config {"query": NAME, ...} picks the part:
 *
 *   stateless (any node):
 *     bids, persons, auctions  the inner object of each event of that kind
 *                              (others dropped), so that later nodes can
 *                              key_by its fields; bids with key_window_ms
 *                              set the record key to the start of the
 *                              tumbling window of that size (q7)
 *     q0   bids as {auction, bidder, price, dateTime, extra}
 *     q1   q0 with the price in euros: price * 0.908, exact to 3 decimals
 *     q2   {auction, price} of the bids whose auction % 123 == 0
 *   keyed (key_by):
 *     q4avg keyed by category, reads nexmark_join.c's closing prices
 *          {id, category, final}: emits the running average (integer, as
 *          Flink's AVG of a BIGINT) {category, avg, auctions} at each
 *          auction that closes
 *     q5   keyed by window_end, reads a sliding window's counts per
 *          auction: emits {auction, num, window_end} of the auctions with
 *          the most bids of each window once the window is complete
 *     q7   keyed by the key bids/key_window_ms set: emits the bids with the
 *          highest price of each window_ms tumbling window when it ends
 *     q8   keyed by a window join's key (person id): emits {id, name,
 *          starttime} once per person and window_ms window
 *     q12  keyed by bidder: counts bids per processing-time window of
 *          window_ms, emits {bidder, bid_count, starttime, endtime}
 *
 * The Go reference in examples/nexmark computes the same from the events
 * without Eddy; the native Go operators in examples/nexmark/native are the
 * same logic for `make bench-nexmark`. Change them together.
 *
 * q0 and q1 declare the bid's members as fields the host extracts (ABI
 * version 6, eddy_fields.h): the host checks each event and finds them,
 * and the module only writes the output. q2 reads the event itself: it
 * stops after auction and price, which the host's full check of each
 * event would not.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o nexmark-c.wasm \
 *     udfs/nexmark/c/nexmark.c sdk/c/eddy.c sdk/c/eddy_keyed.c sdk/c/eddy_json.c sdk/c/eddy_fields.c
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_fields.h"
#include "eddy_json.h"
#include "eddy_keyed.h"
#include "nexmark_util.h"

enum { Q_BIDS, Q_PERSONS, Q_AUCTIONS, Q0, Q1, Q2, Q4AVG, Q5, Q7, Q8, Q12 };

static const char *const names[] = {"bids", "persons", "auctions", "q0", "q1", "q2", "q4avg", "q5", "q7", "q8", "q12"};

static int query = -1;
static int64_t window_ms;     /* q7, q8, q12; bids with key_window_ms */
static eddy_state st;         /* the keyed queries' one value state */
static eddy_buf out, scratch; /* the output value; the state being built */

/* The field indexes of q0 and q1 (declare_bid); -1 before. */
static int f_type = -1, f_bid, f_auction, f_bidder, f_price, f_date_time, f_extra;

static int declare_bid(void);

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("nexmark: config is not a JSON object");
        return 1;
    }
    for (;;) {
        double d;
        int s = eddy_json_next(&it, &key, &value);
        if (s == EDDY_JSON_END) break;
        if (s == EDDY_JSON_MALFORMED) {
            eddy_fail("nexmark: config is not valid JSON");
            return 1;
        }
        if (lit_equal(key, "query") && query < 0) {
            for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
                if (lit_equal(value, names[i])) query = i;
            }
            if (query < 0) {
                eddy_fail("nexmark: config: query %.*s is not one of bids, persons, auctions, q0, q1, q2, q4avg, q5, q7, q8, q12",
                          (int)value.len, value.ptr);
                return 1;
            }
        } else if ((lit_equal(key, "window_ms") || lit_equal(key, "key_window_ms")) && window_ms == 0) {
            if (!eddy_json_number(value, &d) || d != trunc(d) || d < 1 || d > 9007199254740992.0) {
                eddy_fail("nexmark: config: %.*s must be a whole number of milliseconds from 1 to 2^53",
                          (int)key.len, key.ptr);
                return 1;
            }
            window_ms = (int64_t)d;
        } else {
            eddy_fail("nexmark: config: unknown or repeated key %.*s", (int)key.len, key.ptr);
            return 1;
        }
    }
    if (query < 0) {
        eddy_fail("nexmark: config: query is missing");
        return 1;
    }
    if ((query == Q7 || query == Q8 || query == Q12) && window_ms == 0) {
        eddy_fail("nexmark: config: %s needs window_ms", names[query]);
        return 1;
    }
    if (query >= Q4AVG) {
        st = eddy_value_state(names[query], 0);
        if (!st) return 1;
    }
    if (query == Q0 || query == Q1) return declare_bid();
    return 0;
}

/* ---- small writers ---- */

static int put_span(eddy_buf *b, eddy_json_span s) { return put(b, s.ptr, s.len); }

/* ---- the stateless queries ---- */

/* Events are read in one pass, as Flink's Nexmark views select them
 * (WHERE event_type = N): an event whose event_type is not the one
 * wanted is dropped as soon as that member is read, without scanning the
 * rest; the wanted member is then taken or iterated in place. A record
 * that is not such an event, or malformed before the member wanted, is
 * dropped too (the source makes none). */
static int event_type_is(eddy_json_iter *top, int type) {
    eddy_json_span v;
    return eddy_json_value(top, &v) == EDDY_JSON_FIELD && v.len == 1 && v.ptr[0] == (uint8_t)('0' + type);
}

/* The object under name in an event of type, or a NULL span. */
static eddy_json_span inner(const eddy_record *r, int type, const char *name) {
    eddy_json_iter top;
    eddy_json_span key, v = {0, 0};
    if (!eddy_json_objects(&top, r->value, r->value_len)) return v;
    while (eddy_json_next_key(&top, &key) == EDDY_JSON_FIELD) {
        if (lit_equal(key, "event_type")) {
            if (!event_type_is(&top, type)) break;
        } else if (lit_equal(key, name)) {
            if (eddy_json_value(&top, &v) != EDDY_JSON_FIELD || eddy_json_kind_of(v) != EDDY_JSON_OBJECT) break;
            return v;
        }
    }
    v.ptr = NULL;
    v.len = 0;
    return v;
}

/* A bid's fields. */
typedef struct bid {
    eddy_json_span auction, bidder, price, date_time, extra;
} bid;

static void bid_member(bid *b, eddy_json_span key, eddy_json_span v) {
    if (lit_equal(key, "auction")) b->auction = v;
    else if (lit_equal(key, "bidder")) b->bidder = v;
    else if (lit_equal(key, "price")) b->price = v;
    else if (lit_equal(key, "dateTime")) b->date_time = v;
    else if (lit_equal(key, "extra")) b->extra = v;
}

static int bid_complete(const bid *b) {
    return b->auction.ptr && b->bidder.ptr && b->price.ptr && b->date_time.ptr && b->extra.ptr;
}

/* The fields of a bid object (a bid q7 kept in its state). */
static int bid_fields(eddy_json_span obj, bid *b) {
    eddy_json_iter it;
    eddy_json_span key, v;
    int st;
    memset(b, 0, sizeof *b);
    if (!eddy_json_objects(&it, obj.ptr, obj.len)) return 0;
    while ((st = eddy_json_next(&it, &key, &v)) == EDDY_JSON_FIELD) bid_member(b, key, v);
    return st == EDDY_JSON_END && bid_complete(b);
}

/* The bid of a bid event, its object iterated in place: 1 with every
 * field, or with auction and price only when !all (q2 stops there); 0 when
 * the record is not a bid event; -1 when the bid lacks a field. */
static int read_bid(const eddy_record *r, bid *b, int all) {
    eddy_json_iter top, in;
    eddy_json_span key, v;
    int st;
    memset(b, 0, sizeof *b);
    if (!eddy_json_objects(&top, r->value, r->value_len)) return 0;
    while (eddy_json_next_key(&top, &key) == EDDY_JSON_FIELD) {
        if (lit_equal(key, "event_type")) {
            if (!event_type_is(&top, 2)) return 0;
            continue;
        }
        if (!lit_equal(key, "bid")) continue;
        if (!eddy_json_enter(&top, &in) || !in.object) return 0;
        while ((st = eddy_json_next(&in, &key, &v)) == EDDY_JSON_FIELD) {
            bid_member(b, key, v);
            if (!all && b->auction.ptr && b->price.ptr) return 1;
        }
        if (st == EDDY_JSON_MALFORMED) return 0;
        return bid_complete(b) ? 1 : -1;
    }
    return 0;
}

static int bid_path(const char *member) {
    const char *path[2] = {"bid", member};
    return eddy_field(2, path);
}

static int declare_bid(void) {
    f_type = eddy_field1("event_type");
    f_bid = eddy_field1("bid");
    f_auction = bid_path("auction");
    f_bidder = bid_path("bidder");
    f_price = bid_path("price");
    f_date_time = bid_path("dateTime");
    f_extra = bid_path("extra");
    return f_type < 0 || f_bid < 0 || f_auction < 0 || f_bidder < 0 || f_price < 0 || f_date_time < 0 || f_extra < 0;
}

/* read_bid from the fields the host found: the same results, except that
 * an event that is not valid JSON to its end is dropped too. */
static int field_bid(const eddy_record *r, bid *b) {
    eddy_json_span t;
    if (!eddy_record_valid(r)) return 0;
    t = eddy_record_field(r, f_type);
    if (!(t.len == 1 && t.ptr[0] == '2') || eddy_json_kind_of(eddy_record_field(r, f_bid)) != EDDY_JSON_OBJECT) return 0;
    b->auction = eddy_record_field(r, f_auction);
    b->bidder = eddy_record_field(r, f_bidder);
    b->price = eddy_record_field(r, f_price);
    b->date_time = eddy_record_field(r, f_date_time);
    b->extra = eddy_record_field(r, f_extra);
    return bid_complete(b) ? 1 : -1;
}

/* {auction, bidder, price, dateTime, extra}; price_milli >= 0 writes the
 * price as price_milli / 1000 with three decimals. */
static int put_bid(eddy_buf *b, const bid *x, int64_t price_milli) {
    if (puts_(b, "{\"auction\":") || put_span(b, x->auction) || puts_(b, ",\"bidder\":") || put_span(b, x->bidder) ||
        puts_(b, ",\"price\":"))
        return 1;
    if (price_milli < 0) {
        if (put_span(b, x->price)) return 1;
    } else {
        char frac[4] = {(char)('0' + price_milli / 100 % 10), (char)('0' + price_milli / 10 % 10),
                        (char)('0' + price_milli % 10), 0};
        if (put_int(b, price_milli / 1000) || puts_(b, ".") || puts_(b, frac)) return 1;
    }
    return puts_(b, ",\"dateTime\":") || put_span(b, x->date_time) || puts_(b, ",\"extra\":") || put_span(b, x->extra) ||
           puts_(b, "}");
}

static int emit_out(const eddy_record *r, const uint8_t *key, uint32_t key_len) {
    return eddy_emit_kv(key, key_len, out.data, out.len, r->timestamp);
}

static int stateless(const eddy_record *r) {
    eddy_json_span obj;
    bid b;
    int64_t auction, price;
    out.len = 0;
    switch (query) {
    case Q_PERSONS:
    case Q_AUCTIONS:
        obj = query == Q_PERSONS ? inner(r, 0, "person") : inner(r, 1, "auction");
        return obj.ptr ? eddy_emit_kv(r->key, r->key_len, obj.ptr, obj.len, r->timestamp) : 0;
    case Q_BIDS:
        obj = inner(r, 2, "bid");
        if (!obj.ptr) return 0;
        if (window_ms) {
            int64_t start = r->timestamp - (r->timestamp % window_ms + window_ms) % window_ms;
            if (put_int(&out, start)) return 1;
            return eddy_emit_kv(out.data, out.len, obj.ptr, obj.len, r->timestamp);
        }
        return eddy_emit_kv(r->key, r->key_len, obj.ptr, obj.len, r->timestamp);
    }
    switch (f_type >= 0 ? field_bid(r, &b) : read_bid(r, &b, query != Q2)) {
    case 0:
        return 0;
    case -1:
        eddy_fail("nexmark: %s: a bid without auction, bidder, price, dateTime or extra", names[query]);
        return 1;
    }
    switch (query) {
    case Q0:
        if (put_bid(&out, &b, -1)) return 1;
        break;
    case Q1:
        if (!as_int(b.price, &price) || price < 0 || price > INT64_MAX / 908) {
            eddy_fail("nexmark: q1: price %.*s is not a whole number of cents", (int)b.price.len, b.price.ptr);
            return 1;
        }
        if (put_bid(&out, &b, price * 908)) return 1;
        break;
    case Q2:
        if (!as_int(b.auction, &auction)) return 0;
        if (auction % 123 != 0) return 0;
        if (puts_(&out, "{\"auction\":") || put_span(&out, b.auction) || puts_(&out, ",\"price\":") ||
            put_span(&out, b.price) || puts_(&out, "}"))
            return 1;
        break;
    }
    return emit_out(r, r->key, r->key_len);
}

/* ---- the keyed queries: state is [int64 a][int64 b][entries: uint32 len, bytes] ---- */

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static int put_entry(eddy_buf *b, const uint8_t *p, uint32_t n) {
    uint8_t l[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    return put(b, l, 4) || put(b, p, n);
}

/* Reads the current key's state: *v its bytes (NULL, 0 when absent). */
static int load(uint8_t **v, int32_t *n) {
    *n = eddy_value_get(st, v);
    if (*n == EDDY_ERROR) return 1;
    if (*n == EDDY_ABSENT || *n < 16) *n = 0;
    return 0;
}

static int bad(const char *what) {
    eddy_fail("nexmark: %s: %s", names[query], what);
    return 1;
}

/* Keeps a candidate (entry bytes e) of the current key with score x:
 * state a = the highest score, entries = those that have it. On the first
 * candidate of a key, sets an event-time timer at due. */
static int keep_max(int64_t x, const uint8_t *e, uint32_t en, int64_t due) {
    uint8_t *v;
    int32_t n;
    if (load(&v, &n)) return 1;
    if (n && x < rd64(v)) return 0;
    scratch.len = 0;
    if (!eddy_buf_reserve(&scratch, 16)) return 1;
    wr64(scratch.data, x);
    wr64(scratch.data + 8, due);
    scratch.len = 16;
    if (n && x == rd64(v) && put(&scratch, v + 16, (uint32_t)n - 16)) return 1;
    if (put_entry(&scratch, e, en)) return 1;
    if (!n && eddy_timer_register(EDDY_EVENT_TIME, due)) return 1;
    return eddy_value_put(st, scratch.data, scratch.len);
}

static int q5(const eddy_record *r) {
    eddy_json_span key = field(r->value, r->value_len, "key"), count = field(r->value, r->value_len, "count"),
                   end = field(r->value, r->value_len, "window_end");
    int64_t c, e;
    if (eddy_json_kind_of(key) != EDDY_JSON_STRING || !as_int(count, &c) || !as_int(end, &e))
        return bad("input is not a window result with key, count and window_end");
    /* The auction id is the window's key, a string holding the number. */
    return keep_max(c, key.ptr + 1, key.len - 2, e - 1);
}

static int q7(const eddy_record *r) {
    eddy_json_span p = field(r->value, r->value_len, "price");
    int64_t price;
    if (r->timestamp == EDDY_NO_TIMESTAMP) return bad("a bid without event time");
    if (!as_int(p, &price)) return bad("a bid without a price");
    int64_t start = r->timestamp - (r->timestamp % window_ms + window_ms) % window_ms;
    return keep_max(price, r->value, r->value_len, start + window_ms - 1);
}

static int q8(const eddy_record *r) {
    uint8_t *v, buf[16];
    int32_t n;
    eddy_json_span left = field(r->value, r->value_len, "left");
    if (r->timestamp == EDDY_NO_TIMESTAMP) return bad("a joined record without event time");
    if (eddy_json_kind_of(left) != EDDY_JSON_OBJECT) return bad("input is not a join result {left, right}");
    if (load(&v, &n)) return 1;
    if (n && rd64(v) >= r->timestamp) return 0; /* this person's window is out already */
    eddy_json_span id = field(left.ptr, left.len, "id"), name = field(left.ptr, left.len, "name");
    if (!id.ptr || !name.ptr) return bad("a person without id or name");
    out.len = 0;
    if (puts_(&out, "{\"id\":") || put_span(&out, id) || puts_(&out, ",\"name\":") || put_span(&out, name) ||
        puts_(&out, ",\"starttime\":") || put_int(&out, r->timestamp + 1 - window_ms) || puts_(&out, "}"))
        return 1;
    wr64(buf, r->timestamp);
    wr64(buf + 8, 0);
    if (eddy_value_put(st, buf, 16)) return 1;
    return emit_out(r, r->key, r->key_len);
}

/* q12's output for the current key: count bids in the window ending at end. */
static int q12_emit(int64_t count, int64_t end, int64_t ts) {
    uint32_t klen;
    const uint8_t *k = eddy_current_key(&klen);
    out.len = 0;
    if (puts_(&out, "{\"bidder\":") || put(&out, k, klen) || puts_(&out, ",\"bid_count\":") || put_int(&out, count) ||
        puts_(&out, ",\"starttime\":") || put_int(&out, end - window_ms) || puts_(&out, ",\"endtime\":") ||
        put_int(&out, end) || puts_(&out, "}"))
        return 1;
    return eddy_emit_kv(k, klen, out.data, out.len, ts);
}

static int q12(const eddy_record *r) {
    uint8_t *v, buf[16];
    int32_t n;
    int64_t now = eddy_processing_time(), count = 0, end;
    if (load(&v, &n)) return 1;
    if (n) {
        count = rd64(v);
        end = rd64(v + 8);
        if (now >= end) { /* its timer is due but has not fired yet */
            if (q12_emit(count, end, r->timestamp)) return 1;
            count = 0;
        }
    }
    if (count == 0) {
        end = now - (now % window_ms + window_ms) % window_ms + window_ms;
        if (eddy_timer_register(EDDY_PROCESSING_TIME, end)) return 1;
        /* At the end of a bounded input the watermark reaches +inf and
         * fires this; pending processing-time timers are dropped then. */
        if (eddy_timer_register(EDDY_EVENT_TIME, INT64_MAX)) return 1;
    }
    wr64(buf, count + 1);
    wr64(buf + 8, end);
    return eddy_value_put(st, buf, 16);
}

static int q4avg(const eddy_record *r) {
    uint8_t *v, buf[16];
    int32_t n;
    int64_t final, sum = 0, count = 0;
    uint32_t klen;
    const uint8_t *k = eddy_current_key(&klen);
    if (!as_int(field(r->value, r->value_len, "final"), &final)) return bad("input is not a closing price {id, category, final}");
    if (load(&v, &n)) return 1;
    if (n) {
        sum = rd64(v);
        count = rd64(v + 8);
    }
    sum += final;
    count++;
    wr64(buf, sum);
    wr64(buf + 8, count);
    if (eddy_value_put(st, buf, 16)) return 1;
    out.len = 0;
    if (puts_(&out, "{\"category\":") || put(&out, k, klen) || puts_(&out, ",\"avg\":") || put_int(&out, sum / count) ||
        puts_(&out, ",\"auctions\":") || put_int(&out, count) || puts_(&out, "}"))
        return 1;
    return emit_out(r, k, klen);
}

int eddy_op_process(const eddy_record *r) {
    switch (query) {
    case Q4AVG: return q4avg(r);
    case Q5: return q5(r);
    case Q7: return q7(r);
    case Q8: return q8(r);
    case Q12: return q12(r);
    default: return stateless(r);
    }
}

int eddy_op_timer(const eddy_timer *t) {
    uint8_t *v;
    int32_t n;
    if (load(&v, &n)) return 1;
    if (!n) return 0;
    if (query == Q12) {
        int64_t end = rd64(v + 8);
        if (t->kind == EDDY_PROCESSING_TIME && t->timestamp != end) return 0; /* an older window's */
        if (q12_emit(rd64(v), end, t->kind == EDDY_EVENT_TIME ? end - 1 : t->timestamp)) return 1;
        return eddy_state_clear(st);
    }
    if (query == Q8) return 0;
    /* q5, q7: the window is complete: emit the entries with the highest score. */
    int64_t best = rd64(v);
    for (uint32_t i = 16; i + 4 <= (uint32_t)n;) {
        uint32_t en = rd32(v + i);
        const uint8_t *e = v + i + 4;
        i += 4 + en;
        out.len = 0;
        if (query == Q5) {
            if (puts_(&out, "{\"auction\":") || put(&out, e, en) || puts_(&out, ",\"num\":") || put_int(&out, best) ||
                puts_(&out, ",\"window_end\":") || put_int(&out, t->timestamp + 1) || puts_(&out, "}"))
                return 1;
        } else {
            eddy_json_span obj = {e, en};
            bid b;
            if (!bid_fields(obj, &b)) return bad("a kept bid lost a field");
            if (put_bid(&out, &b, -1)) return 1;
        }
        if (eddy_emit_kv(t->key, t->key_len, out.data, out.len, t->timestamp)) return 1;
    }
    return eddy_state_clear(st);
}
