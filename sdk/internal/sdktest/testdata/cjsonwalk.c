/*
 * cjsonwalk.c - a probe of the C SDK's JSON reader (sdk/c/eddy_json.c): each
 * record's value is walked and re-emitted compact, built only from the
 * spans the reader returns. The record's key picks the walk:
 *   "enter"  containers are iterated in place (eddy_json_next_key,
 *            eddy_json_enter, eddy_json_leave), scalars taken with
 *            eddy_json_value;
 *   "next"   every member through eddy_json_next, containers walked again
 *            from their span (the two-pass way);
 *   "skip"   eddy_json_enter on the top-level container, then
 *            eddy_json_leave at once: emits "{}" or "[]" when the rest
 *            checks out.
 * A malformed value emits the value "malformed". The test compares the
 * output with encoding/json's Compact of the input.
 */
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"

static eddy_buf out;

static int put(const void *p, uint32_t n) { return eddy_buf_append(&out, p, n); }

static int walk_enter(eddy_json_iter *it);

/* The members of the container in is on, up to its end. */
static int walk_members(eddy_json_iter *in) {
    eddy_json_span key;
    int first = 1, st;
    if (put(in->object ? "{" : "[", 1)) return -1;
    while ((st = eddy_json_next_key(in, &key)) == EDDY_JSON_FIELD) {
        if (!first && put(",", 1)) return -1;
        first = 0;
        if (in->object && (put(key.ptr, key.len) || put(":", 1))) return -1;
        if (walk_enter(in)) return -1;
    }
    if (st != EDDY_JSON_END) return -1;
    return put(in->object ? "}" : "]", 1) ? -1 : 0;
}

/* it is on a pending value (after eddy_json_next_key). */
static int walk_enter(eddy_json_iter *it) {
    eddy_json_iter in;
    eddy_json_span v;
    if (!eddy_json_enter(it, &in)) {
        if (eddy_json_value(it, &v) != EDDY_JSON_FIELD) return -1;
        return put(v.ptr, v.len) ? -1 : 0;
    }
    if (walk_members(&in)) return -1;
    return eddy_json_leave(it, &in) ? 0 : -1;
}

static int walk_next(eddy_json_span v) {
    eddy_json_iter it;
    eddy_json_span key, m;
    int first = 1, st, object = eddy_json_kind_of(v) == EDDY_JSON_OBJECT;
    if (!object && eddy_json_kind_of(v) != EDDY_JSON_ARRAY) return put(v.ptr, v.len) ? -1 : 0;
    if (!(object ? eddy_json_objects(&it, v.ptr, v.len) : eddy_json_elements(&it, v.ptr, v.len))) return -1;
    if (put(object ? "{" : "[", 1)) return -1;
    while ((st = eddy_json_next(&it, &key, &m)) == EDDY_JSON_FIELD) {
        if (!first && put(",", 1)) return -1;
        first = 0;
        if (object && (put(key.ptr, key.len) || put(":", 1))) return -1;
        if (walk_next(m)) return -1;
    }
    if (st != EDDY_JSON_END) return -1;
    return put(object ? "}" : "]", 1) ? -1 : 0;
}

/* The top-level container through eddy_json_next_key; its members with
 * walk_enter. skip: only check it, entering and leaving each member that
 * is a container without reading it. */
static int walk_top_enter(const uint8_t *b, uint32_t n, int skip) {
    eddy_json_iter top, in;
    eddy_json_span key;
    int st;
    /* A scalar at the top has no container to enter. */
    if (!eddy_json_objects(&top, b, n) && !eddy_json_elements(&top, b, n))
        return eddy_json_valid(b, n) ? -2 : -1;
    if (skip) {
        if (put(top.object ? "{}" : "[]", 2)) return -1;
        while ((st = eddy_json_next_key(&top, &key)) == EDDY_JSON_FIELD) {
            if (eddy_json_enter(&top, &in) && !eddy_json_leave(&top, &in)) return -1;
        }
        return st == EDDY_JSON_END ? 0 : -1;
    }
    return walk_members(&top);
}

int eddy_op_process(const eddy_record *r) {
    int res;
    eddy_json_span whole = {r->value, r->value_len};
    out.len = 0;
    if (r->key_len == 4 && memcmp(r->key, "next", 4) == 0) {
        /* eddy_json_next needs the value without surrounding space. */
        uint32_t s = 0, e = r->value_len;
        while (s < e && (r->value[s] == ' ' || r->value[s] == '\t' || r->value[s] == '\n' || r->value[s] == '\r')) s++;
        while (e > s && (r->value[e - 1] == ' ' || r->value[e - 1] == '\t' || r->value[e - 1] == '\n' || r->value[e - 1] == '\r')) e--;
        whole.ptr = r->value + s;
        whole.len = e - s;
        if (eddy_json_kind_of(whole) == EDDY_JSON_OBJECT || eddy_json_kind_of(whole) == EDDY_JSON_ARRAY)
            res = walk_next(whole);
        else
            res = eddy_json_valid(r->value, r->value_len) ? -2 : -1;
    } else {
        res = walk_top_enter(r->value, r->value_len, r->key_len == 4 && memcmp(r->key, "skip", 4) == 0);
    }
    if (res == -2) return eddy_emit_kv(r->key, r->key_len, (const uint8_t *)"scalar", 6, r->timestamp);
    if (res) return eddy_emit_kv(r->key, r->key_len, (const uint8_t *)"malformed", 9, r->timestamp);
    return eddy_emit_kv(r->key, r->key_len, out.data, out.len, r->timestamp);
}
