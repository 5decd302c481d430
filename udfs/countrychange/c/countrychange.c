/*
 * countrychange.c - the "country-change" example operator in C: a
 * card-fraud rule that alerts when a card is used in two countries within a
 * window of event time. It mirrors udfs/countrychange/detector, which
 * documents the configuration, the rules and the state encoding; change
 * both together.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o country-change-c.wasm \
 *     udfs/countrychange/c/countrychange.c sdk/c/eddy.c sdk/c/eddy_keyed.c sdk/c/eddy_json.c
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_keyed.h"

#define DEFAULT_WINDOW_MS 300000
#define MAX_WINDOW_MS 9007199254740992.0 /* 2^53 */

static int64_t window_ms = DEFAULT_WINDOW_MS;
static eddy_state last;

/* Scratch reused across records: the unescaped card and country, the
 * encoded state and the alert. */
static uint8_t *card, *country, *state, *out;
static uint32_t cap;

static int lit_equal(eddy_json_span raw, const char *s) {
    return eddy_json_equal(raw, (const uint8_t *)s, (uint32_t)strlen(s));
}

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    int seen_window = 0;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("country-change: config is not a JSON object");
        return 1;
    }
    for (;;) {
        double d;
        int st = eddy_json_next(&it, &key, &value);
        if (st == EDDY_JSON_MALFORMED) {
            eddy_fail("country-change: config is not valid JSON");
            return 1;
        }
        if (st == EDDY_JSON_END) break;
        if (!lit_equal(key, "window_ms") || seen_window) {
            eddy_fail("country-change: config: unknown or repeated key %.*s", (int)key.len, key.ptr);
            return 1;
        }
        seen_window = 1;
        if (!eddy_json_number(value, &d) || d != trunc(d) || d < 1 || d > MAX_WINDOW_MS) {
            eddy_fail("country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53");
            return 1;
        }
        window_ms = (int64_t)d;
    }
    last = eddy_value_state("last", 0);
    return last ? 0 : 1;
}

/* When the cleanup timer of a transaction at ts fires. */
static int64_t timer_for(int64_t ts) { return ts > INT64_MAX - window_ms ? INT64_MAX : ts + window_ms; }

static int reserve(uint32_t n) {
    /* An alert quotes three strings of at most n bytes each. */
    uint64_t need = 3 * (6 * (uint64_t)n + 2) + 64;
    if (need <= cap) return 1;
    free(card);
    free(country);
    free(state);
    free(out);
    card = malloc((size_t)need);
    country = malloc((size_t)need);
    state = malloc((size_t)need);
    out = malloc((size_t)need);
    cap = card && country && state && out ? (uint32_t)need : 0;
    if (!cap) eddy_fail("country-change: out of memory");
    return cap != 0;
}

static uint32_t append(uint8_t *dst, uint32_t at, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    memcpy(dst + at, s, n);
    return at + n;
}

int eddy_op_process(const eddy_record *r) {
    eddy_json_span card_raw, country_raw;
    uint32_t card_len, country_len, last_country_len = 0;
    uint8_t *stored;
    const uint8_t *last_country = NULL;
    int64_t ts = r->timestamp, last_ts = 0;
    int32_t n;
    int have, later = 1;
    uint64_t gap = 0;

    if (ts == EDDY_NO_TIMESTAMP) return 0;
    if (eddy_json_lookup(r->value, r->value_len, (const uint8_t *)"card", 4, &card_raw) != EDDY_JSON_FIELD ||
        eddy_json_kind_of(card_raw) != EDDY_JSON_STRING)
        return 0;
    if (eddy_json_lookup(r->value, r->value_len, (const uint8_t *)"country", 7, &country_raw) != EDDY_JSON_FIELD ||
        eddy_json_kind_of(country_raw) != EDDY_JSON_STRING)
        return 0;
    if (!reserve(r->value_len)) return 1;
    card_len = eddy_json_unquote(card_raw, card);
    country_len = eddy_json_unquote(country_raw, country);

    n = eddy_value_get(last, &stored);
    if (n == EDDY_ERROR) return 1;
    have = n != EDDY_ABSENT;
    if (have) {
        if (n < 8) {
            eddy_fail("country-change: the stored state has %d bytes, want at least 8", n);
            return 1;
        }
        memcpy(&last_ts, stored, 8);
        last_country = stored + 8;
        last_country_len = (uint32_t)n - 8;
        /* In uint64 the difference cannot overflow. */
        gap = (uint64_t)ts - (uint64_t)last_ts;
        if (ts < last_ts) {
            gap = (uint64_t)last_ts - (uint64_t)ts;
            later = 0;
        }
        if (gap <= (uint64_t)window_ms &&
            (country_len != last_country_len || memcmp(country, last_country, country_len) != 0)) {
            const uint8_t *from = later ? last_country : country, *to = later ? country : last_country;
            uint32_t from_len = later ? last_country_len : country_len, to_len = later ? country_len : last_country_len;
            uint32_t at = 0;
            if (!reserve(last_country_len > r->value_len ? last_country_len : r->value_len)) return 1;
            at = append(out, at, "{\"card\":");
            at += eddy_json_quote(out + at, card, card_len);
            at = append(out, at, ",\"from\":");
            at += eddy_json_quote(out + at, from, from_len);
            at = append(out, at, ",\"to\":");
            at += eddy_json_quote(out + at, to, to_len);
            at += (uint32_t)snprintf((char *)out + at, 64, ",\"gap_ms\":%lld,\"ts\":%lld}", (long long)gap, (long long)ts);
            if (eddy_emit_kv(r->key, r->key_len, out, at, ts)) return 1;
        }
    }
    if (!later) return 0;
    memcpy(state, &ts, 8);
    memcpy(state + 8, country, country_len);
    if (eddy_value_put(last, state, 8 + country_len)) return 1;
    if (have && eddy_timer_delete(EDDY_EVENT_TIME, timer_for(last_ts))) return 1;
    return eddy_timer_register(EDDY_EVENT_TIME, timer_for(ts));
}

/* Clears the card's state when its cleanup timer fires, unless a later
 * transaction has replaced the one that set the timer. */
int eddy_op_timer(const eddy_timer *t) {
    uint8_t *stored;
    int64_t last_ts;
    int32_t n = eddy_value_get(last, &stored);
    if (n == EDDY_ERROR) return 1;
    if (n == EDDY_ABSENT) return 0;
    if (n < 8) {
        eddy_fail("country-change: the stored state has %d bytes, want at least 8", n);
        return 1;
    }
    memcpy(&last_ts, stored, 8);
    if (timer_for(last_ts) <= t->timestamp) return eddy_state_clear(last);
    return 0;
}
