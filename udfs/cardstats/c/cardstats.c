/*
 * cardstats.c - the "card-stats" example aggregate in C: an aggregate
 * module (ABI version 3) that sums up each window's card transactions. It
 * mirrors udfs/cardstats/stats, which documents the result and the
 * accumulator encoding; the two produce the same bytes, accumulators
 * included. Change both together.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o card-stats-c.wasm \
 *     udfs/cardstats/c/cardstats.c sdk/c/eddy.c sdk/c/eddy_aggregate.c sdk/c/eddy_json.c
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_aggregate.h"
#include "eddy_json.h"

#define FORMAT 1
#define MAX_COUNTRY_LEN 255
#define MAX_CENTS 9007199254740992.0 /* 2^53 */
#define MAX_VARINT_LEN 10

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    int st;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("card-stats: config is not a JSON object");
        return 1;
    }
    st = eddy_json_next(&it, &key, &value);
    if (st == EDDY_JSON_MALFORMED) {
        eddy_fail("card-stats: config is not valid JSON");
        return 1;
    }
    if (st == EDDY_JSON_FIELD) {
        eddy_fail("card-stats: config: unknown key %.*s (card-stats takes no configuration)", (int)key.len, key.ptr);
        return 1;
    }
    return 0;
}

/* The unescaped country of the transaction being added; it grows to the
 * longest value seen. */
static uint8_t *country;
static uint32_t country_cap;

/* Reads the amount in cents and the country of a transaction (into
 * country). Returns 1 when the value counts, 0 when it does not, -1 after
 * eddy_fail. It reads the object once, to its end, and takes the first
 * "amount" and the first "country", as eddy_json_lookup would. */
static int parse_txn(const uint8_t *v, uint32_t n, int64_t *cents, uint32_t *country_len) {
    eddy_json_iter it;
    eddy_json_span key, value, amount = {NULL, 0}, c = {NULL, 0};
    double d, x;
    int st;
    if (!eddy_json_objects(&it, v, n)) return 0;
    while ((st = eddy_json_next(&it, &key, &value)) == EDDY_JSON_FIELD) {
        if (!amount.ptr && eddy_json_equal(key, (const uint8_t *)"amount", 6))
            amount = value;
        else if (!c.ptr && eddy_json_equal(key, (const uint8_t *)"country", 7))
            c = value;
    }
    if (st == EDDY_JSON_MALFORMED || !amount.ptr || eddy_json_kind_of(amount) != EDDY_JSON_NUMBER || !c.ptr ||
        eddy_json_kind_of(c) != EDDY_JSON_STRING || !eddy_json_number(amount, &d))
        return 0;
    x = round(d * 100);
    if (!(fabs(x) <= MAX_CENTS)) return 0;
    if (c.len > country_cap) {
        free(country);
        country_cap = 0;
        if (!(country = malloc(c.len))) {
            eddy_fail("card-stats: out of memory");
            return -1;
        }
        country_cap = c.len;
    }
    *country_len = eddy_json_unquote(c, country);
    if (*country_len > MAX_COUNTRY_LEN) return 0;
    *cents = (int64_t)x;
    return 1;
}

/* A decoded accumulator; list aliases the bytes it was decoded from. */
typedef struct acc {
    uint64_t n;
    int64_t sum, max;
    uint32_t countries;
    const uint8_t *list;
    uint32_t list_len;
} acc;

/* Reads a minimal unsigned varint at b[*at] (encoding/binary's rules, and
 * refusing longer encodings than necessary). Returns 0 when there is none. */
static int uvarint(const uint8_t *b, uint32_t len, uint32_t *at, uint64_t *out) {
    uint64_t x = 0;
    uint32_t i;
    for (i = 0; *at + i < len && i < MAX_VARINT_LEN; i++) {
        uint8_t c = b[*at + i];
        if (c < 0x80) {
            if ((i == MAX_VARINT_LEN - 1 && c > 1) || (i > 0 && c == 0)) return 0;
            *out = x | (uint64_t)c << (7 * i);
            *at += i + 1;
            return 1;
        }
        x |= (uint64_t)(c & 0x7f) << (7 * i);
    }
    return 0;
}

static int64_t unzigzag(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static int malformed(uint32_t len, const char *why) {
    eddy_fail("card-stats: malformed accumulator (%u bytes): %s", len, why);
    return 0;
}

static int compare(const uint8_t *a, uint32_t an, const uint8_t *b, uint32_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c != 0) return c < 0 ? -1 : 1;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

/* Decodes and checks an accumulator. Returns 1, or 0 after eddy_fail. */
static int decode(const uint8_t *b, uint32_t len, acc *a) {
    uint32_t at = 1, i;
    uint64_t fields[3];
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    if (len == 0) return malformed(len, "empty");
    if (b[0] != FORMAT) {
        eddy_fail("card-stats: malformed accumulator (%u bytes): format %u, want 1", len, b[0]);
        return 0;
    }
    for (i = 0; i < 3; i++)
        if (!uvarint(b, len, &at, &fields[i])) return malformed(len, "bad varint");
    a->n = fields[0];
    a->sum = unzigzag(fields[1]);
    a->max = unzigzag(fields[2]);
    a->list = b + at;
    a->list_len = len - at;
    a->countries = 0;
    for (i = 0; i < a->list_len;) {
        uint32_t end = i + 1 + a->list[i];
        if (end > a->list_len) return malformed(len, "truncated country");
        if (a->countries > 0 && compare(prev, prev_len, a->list + i + 1, end - i - 1) >= 0)
            return malformed(len, "countries out of order");
        prev = a->list + i + 1;
        prev_len = end - i - 1;
        i = end;
        a->countries++;
    }
    if ((a->n == 0 && (a->sum != 0 || a->max != 0 || a->countries != 0)) ||
        (a->n != 0 && (a->countries == 0 || a->countries > a->n)))
        return malformed(len, "inconsistent counts");
    return 1;
}

static int put_uvarint(eddy_buf *dst, uint64_t x) {
    uint8_t *p = eddy_buf_reserve(dst, MAX_VARINT_LEN);
    uint32_t n = 0;
    if (!p) return 1;
    while (x >= 0x80) {
        p[n++] = (uint8_t)x | 0x80;
        x >>= 7;
    }
    p[n++] = (uint8_t)x;
    dst->len += n;
    return 0;
}

static int put_header(eddy_buf *dst, uint64_t n, int64_t sum, int64_t max) {
    return eddy_buf_byte(dst, FORMAT) || put_uvarint(dst, n) || put_uvarint(dst, zigzag(sum)) ||
           put_uvarint(dst, zigzag(max));
}

int eddy_op_agg_create(eddy_buf *dst) { return put_header(dst, 0, 0, 0); }

/* Sums wrap around, as in Go: in uint64, where C defines it. */
static int64_t wrapping_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

int eddy_op_agg_add(eddy_buf *dst, const uint8_t *acc_bytes, uint32_t acc_len, const eddy_record *r) {
    acc a;
    int64_t cents = 0, top;
    uint32_t clen = 0, pos = 0;
    int counts = parse_txn(r->value, r->value_len, &cents, &clen);
    if (counts < 0) return 1;
    if (!decode(acc_bytes, acc_len, &a)) return 1;
    if (!counts) return eddy_buf_append(dst, acc_bytes, acc_len);
    top = a.n > 0 && a.max > cents ? a.max : cents;
    if (put_header(dst, a.n + 1, wrapping_add(a.sum, cents), top)) return 1;
    while (pos < a.list_len) {
        uint32_t end = pos + 1 + a.list[pos];
        int c = compare(a.list + pos + 1, end - pos - 1, country, clen);
        if (c == 0) return eddy_buf_append(dst, a.list, a.list_len);
        if (c > 0) break;
        pos = end;
    }
    return eddy_buf_append(dst, a.list, pos) || eddy_buf_byte(dst, (uint8_t)clen) || eddy_buf_append(dst, country, clen) ||
           eddy_buf_append(dst, a.list + pos, a.list_len - pos);
}

int eddy_op_agg_merge(eddy_buf *dst, const uint8_t *xa, uint32_t xn, const uint8_t *ya, uint32_t yn) {
    acc x, y;
    int64_t top;
    uint32_t i = 0, j = 0;
    if (!decode(xa, xn, &x) || !decode(ya, yn, &y)) return 1;
    top = x.n == 0 || (y.n > 0 && y.max > x.max) ? y.max : x.max;
    if (put_header(dst, x.n + y.n, wrapping_add(x.sum, y.sum), top)) return 1;
    while (i < x.list_len && j < y.list_len) {
        uint32_t ie = i + 1 + x.list[i], je = j + 1 + y.list[j];
        int c = compare(x.list + i + 1, ie - i - 1, y.list + j + 1, je - j - 1);
        if (c < 0) {
            if (eddy_buf_append(dst, x.list + i, ie - i)) return 1;
            i = ie;
        } else if (c > 0) {
            if (eddy_buf_append(dst, y.list + j, je - j)) return 1;
            j = je;
        } else {
            if (eddy_buf_append(dst, x.list + i, ie - i)) return 1;
            i = ie;
            j = je;
        }
    }
    return eddy_buf_append(dst, x.list + i, x.list_len - i) || eddy_buf_append(dst, y.list + j, y.list_len - j);
}

/* Formats c/100 with exactly two decimals. */
static int put_cents(char *out, size_t size, int64_t c) {
    uint64_t u = (uint64_t)c;
    const char *sign = "";
    if (c < 0) {
        sign = "-";
        u = -u;
    }
    return snprintf(out, size, "%s%llu.%02llu", sign, (unsigned long long)(u / 100), (unsigned long long)(u % 100));
}

int eddy_op_agg_result(eddy_buf *dst, const uint8_t *acc_bytes, uint32_t acc_len) {
    acc a;
    char total[32], max[32], out[160];
    int n;
    if (!decode(acc_bytes, acc_len, &a)) return 1;
    put_cents(total, sizeof total, a.sum);
    if (a.n == 0) {
        n = snprintf(out, sizeof out, "{\"n\":0,\"total\":\"%s\",\"max\":null,\"countries\":%u}", total, a.countries);
    } else {
        put_cents(max, sizeof max, a.max);
        n = snprintf(out, sizeof out, "{\"n\":%llu,\"total\":\"%s\",\"max\":\"%s\",\"countries\":%u}",
                     (unsigned long long)a.n, total, max, a.countries);
    }
    return eddy_buf_append(dst, out, (uint32_t)n);
}
