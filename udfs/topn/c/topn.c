/*
 * topn.c - the "top-n" example window function in C: when a window fires,
 * it emits the window's n elements with the largest value of a numeric
 * field, best first. It mirrors udfs/topn/ranking, which documents the
 * configuration and the output; change both together.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o top-n-c.wasm \
 *     udfs/topn/c/topn.c sdk/c/eddy.c sdk/c/eddy_window.c sdk/c/eddy_json.c
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"
#include "eddy_window.h"

#define DEFAULT_N 3
#define MAX_N 10000

static uint32_t top_n = DEFAULT_N;
static const uint8_t *field = (const uint8_t *)"amount";
static uint32_t field_len = 6;

static int lit_equal(eddy_json_span raw, const char *s) {
    return eddy_json_equal(raw, (const uint8_t *)s, (uint32_t)strlen(s));
}

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    int seen_n = 0, seen_field = 0;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("top-n: config is not a JSON object");
        return 1;
    }
    for (;;) {
        double d;
        uint8_t *unquoted;
        int st = eddy_json_next(&it, &key, &value);
        if (st == EDDY_JSON_MALFORMED) {
            eddy_fail("top-n: config is not valid JSON");
            return 1;
        }
        if (st == EDDY_JSON_END) return 0;
        if (lit_equal(key, "n") && !seen_n) {
            seen_n = 1;
            if (!eddy_json_number(value, &d) || d != trunc(d) || d < 1 || d > MAX_N) {
                eddy_fail("top-n: config: n must be a whole number from 1 to %d", MAX_N);
                return 1;
            }
            top_n = (uint32_t)d;
        } else if (lit_equal(key, "field") && !seen_field) {
            seen_field = 1;
            if (eddy_json_kind_of(value) != EDDY_JSON_STRING) {
                eddy_fail("top-n: config: field must be a string");
                return 1;
            }
            if (!(unquoted = malloc(value.len))) {
                eddy_fail("top-n: out of memory");
                return 1;
            }
            field_len = eddy_json_unquote(value, unquoted);
            field = unquoted;
        } else {
            eddy_fail("top-n: config: unknown or repeated key %.*s", (int)key.len, key.ptr);
            return 1;
        }
    }
}

/* An element that counts: its number and its index in the window. */
typedef struct candidate {
    double v;
    uint32_t i;
} candidate;

/* The ranking's order, reversed: a ranks below b. */
static int worse(candidate a, candidate b) { return a.v < b.v || (a.v == b.v && a.i > b.i); }

/* A min-heap by the ranking, the worst kept on top; it holds at most
 * top_n candidates and is allocated once. */
static candidate *heap;
static uint32_t heap_len;

static void swap(uint32_t a, uint32_t b) {
    candidate t = heap[a];
    heap[a] = heap[b];
    heap[b] = t;
}

static void up(uint32_t i) {
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!worse(heap[i], heap[p])) return;
        swap(i, p);
        i = p;
    }
}

static void down(uint32_t i) {
    for (;;) {
        uint32_t m = i, l = 2 * i + 1, r = 2 * i + 2;
        if (l < heap_len && worse(heap[l], heap[m])) m = l;
        if (r < heap_len && worse(heap[r], heap[m])) m = r;
        if (m == i) return;
        swap(i, m);
        i = m;
    }
}

/* Best first; never equal, since indices differ. */
static int better_first(const void *a, const void *b) {
    return worse(*(const candidate *)b, *(const candidate *)a) ? -1 : 1;
}

/* The output value, reused. */
static eddy_buf out;

static int is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int append_str(eddy_buf *b, const char *s) { return eddy_buf_append(b, s, (uint32_t)strlen(s)); }

static int append_int(eddy_buf *b, long long v) {
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%lld", v);
    return eddy_buf_append(b, digits, (uint32_t)n);
}

static int output(const eddy_window *w, uint32_t rank, const eddy_record *e) {
    const uint8_t *v = e->value;
    uint32_t n = e->value_len;
    uint8_t *q;
    while (n > 0 && is_space(v[0])) v++, n--;
    while (n > 0 && is_space(v[n - 1])) n--;
    out.len = 0;
    if (append_str(&out, "{\"key\":") || !(q = eddy_buf_reserve(&out, 6 * w->key_len + 2))) return 1;
    out.len += eddy_json_quote(q, w->key, w->key_len);
    if (append_str(&out, ",\"window_start\":") || append_int(&out, w->start) || append_str(&out, ",\"window_end\":") ||
        append_int(&out, w->end) || append_str(&out, ",\"rank\":") || append_int(&out, rank) ||
        append_str(&out, ",\"value\":") || eddy_buf_append(&out, v, n) || eddy_buf_byte(&out, '}'))
        return 1;
    return eddy_emit_kv(w->key, w->key_len, out.data, out.len, w->end - 1);
}

int eddy_op_window(const eddy_window *w, const eddy_record *elems, uint32_t n) {
    uint32_t i;
    if (!heap && !(heap = malloc(top_n * sizeof *heap))) {
        eddy_fail("top-n: out of memory");
        return 1;
    }
    heap_len = 0;
    for (i = 0; i < n; i++) {
        eddy_json_span f;
        candidate c;
        if (eddy_json_lookup(elems[i].value, elems[i].value_len, field, field_len, &f) != EDDY_JSON_FIELD ||
            eddy_json_kind_of(f) != EDDY_JSON_NUMBER || !eddy_json_number(f, &c.v))
            continue;
        c.i = i;
        if (heap_len < top_n) {
            heap[heap_len++] = c;
            up(heap_len - 1);
        } else if (worse(heap[0], c)) {
            heap[0] = c;
            down(0);
        }
    }
    qsort(heap, heap_len, sizeof *heap, better_first);
    for (i = 0; i < heap_len; i++)
        if (output(w, i + 1, &elems[heap[i].i])) return 1;
    return 0;
}
