/*
 * project.c - the "project" example operator in C: a JSON field projector
 * and filter. It mirrors udfs/project/projection/projection.go, which
 * documents the configuration and the exact rules; change both together.
 *
 * With "fields" or "where" it declares them as fields the host extracts
 * (ABI version 6, eddy_fields.h): the host checks each value and finds the
 * members, and apply_fields only builds the output; the path order is the
 * fields in configuration order, then the where field if it is not one of
 * them (Projector.Paths). With neither (or "fields": [] and no where) it
 * scans values itself, since only their validity counts.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c -o project-c.wasm \
 *     udfs/project/c/project.c sdk/c/eddy.c sdk/c/eddy_json.c sdk/c/eddy_fields.c
 */
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_fields.h"
#include "eddy_json.h"

enum { OP_NONE, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_EXISTS };

typedef struct bytes {
    uint8_t *ptr;
    uint32_t len;
} bytes;

/* The configuration, and scratch space reused across records. */
static struct {
    int all;              /* no "fields": keep the whole value */
    uint32_t nfields;
    bytes *fields;        /* field names, unescaped */
    bytes *prefixes;      /* `"name":` for each field, as written to the output */
    eddy_json_span *spans; /* scratch: each field's value in the current record */

    int op;
    bytes where;          /* where field name, unescaped */
    int numeric;          /* compare as numbers (else as strings) */
    double number;
    bytes text;

    uint8_t *out;         /* scratch: the output value */
    uint32_t out_cap;

    int declared;         /* the fields and the where field are declared */
    int where_index;      /* the where field's path index */
} p;

static int oom(void) {
    eddy_fail("project: out of memory");
    return 1;
}

static int lit_equal(eddy_json_span raw, const char *s) {
    return eddy_json_equal(raw, (const uint8_t *)s, (uint32_t)strlen(s));
}

static int unquote(eddy_json_span raw, bytes *dst) {
    dst->ptr = malloc(raw.len ? raw.len : 1);
    if (!dst->ptr) return 0;
    dst->len = eddy_json_unquote(raw, dst->ptr);
    return 1;
}

static int parse_fields(eddy_json_span value) {
    eddy_json_iter it;
    eddy_json_span elem;
    if (!eddy_json_elements(&it, value.ptr, value.len)) {
        eddy_fail("project: config: fields must be an array of strings");
        return 1;
    }
    p.all = 0;
    for (;;) {
        int st = eddy_json_next(&it, NULL, &elem);
        bytes name, prefix;
        uint32_t i;
        if (st == EDDY_JSON_END) return 0;
        if (st == EDDY_JSON_MALFORMED || eddy_json_kind_of(elem) != EDDY_JSON_STRING) {
            eddy_fail("project: config: fields must be an array of strings");
            return 1;
        }
        if (!unquote(elem, &name)) return oom();
        for (i = 0; i < p.nfields; i++) {
            if (p.fields[i].len == name.len && memcmp(p.fields[i].ptr, name.ptr, name.len) == 0) {
                eddy_fail("project: config: field %.*s is listed twice", (int)elem.len, elem.ptr);
                return 1;
            }
        }
        prefix.ptr = malloc(6 * (size_t)name.len + 3);
        if (!prefix.ptr) return oom();
        prefix.len = eddy_json_quote(prefix.ptr, name.ptr, name.len);
        prefix.ptr[prefix.len++] = ':';
        p.fields = realloc(p.fields, (p.nfields + 1) * sizeof *p.fields);
        p.prefixes = realloc(p.prefixes, (p.nfields + 1) * sizeof *p.prefixes);
        p.spans = realloc(p.spans, (p.nfields + 1) * sizeof *p.spans);
        if (!p.fields || !p.prefixes || !p.spans) return oom();
        p.fields[p.nfields] = name;
        p.prefixes[p.nfields] = prefix;
        p.nfields++;
    }
}

static int parse_where(eddy_json_span value) {
    eddy_json_iter it;
    eddy_json_span key, v, field = {0, 0}, op = {0, 0}, operand = {0, 0};
    if (!eddy_json_objects(&it, value.ptr, value.len)) {
        eddy_fail("project: config: where must be an object");
        return 1;
    }
    for (;;) {
        int st = eddy_json_next(&it, &key, &v);
        if (st == EDDY_JSON_MALFORMED) {
            eddy_fail("project: config: where must be an object");
            return 1;
        }
        if (st == EDDY_JSON_END) break;
        if (lit_equal(key, "field") && field.ptr == NULL) {
            field = v;
        } else if (lit_equal(key, "op") && op.ptr == NULL) {
            op = v;
        } else if (lit_equal(key, "value") && operand.ptr == NULL) {
            operand = v;
        } else {
            eddy_fail("project: config: where: unknown or repeated key %.*s", (int)key.len, key.ptr);
            return 1;
        }
    }
    if (eddy_json_kind_of(field) != EDDY_JSON_STRING) {
        eddy_fail("project: config: where.field must be a string");
        return 1;
    }
    if (!unquote(field, &p.where)) return oom();
    if (eddy_json_kind_of(op) != EDDY_JSON_STRING) {
        eddy_fail("project: config: where.op must be a string");
        return 1;
    }
    if (lit_equal(op, "==")) p.op = OP_EQ;
    else if (lit_equal(op, "!=")) p.op = OP_NE;
    else if (lit_equal(op, "<")) p.op = OP_LT;
    else if (lit_equal(op, "<=")) p.op = OP_LE;
    else if (lit_equal(op, ">")) p.op = OP_GT;
    else if (lit_equal(op, ">=")) p.op = OP_GE;
    else if (lit_equal(op, "exists")) p.op = OP_EXISTS;
    else {
        eddy_fail("project: config: where.op %.*s is not one of ==, !=, <, <=, >, >=, exists", (int)op.len, op.ptr);
        return 1;
    }
    if (p.op == OP_EXISTS) {
        if (operand.ptr != NULL) {
            eddy_fail("project: config: where.value is not allowed with exists");
            return 1;
        }
        return 0;
    }
    switch (eddy_json_kind_of(operand)) {
    case EDDY_JSON_NUMBER:
        p.numeric = 1;
        eddy_json_number(operand, &p.number);
        return 0;
    case EDDY_JSON_STRING:
        if (p.op != OP_EQ && p.op != OP_NE) {
            eddy_fail("project: config: strings compare only with == and !=");
            return 1;
        }
        if (!unquote(operand, &p.text)) return oom();
        return 0;
    default:
        eddy_fail("project: config: where.value must be a number or a string");
        return 1;
    }
}

static int declare(void);

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    int seen_fields = 0, seen_where = 0;
    p.all = 1;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("project: config is not a JSON object");
        return 1;
    }
    for (;;) {
        int st = eddy_json_next(&it, &key, &value);
        if (st == EDDY_JSON_MALFORMED) {
            eddy_fail("project: config is not valid JSON");
            return 1;
        }
        if (st == EDDY_JSON_END) break;
        if (lit_equal(key, "fields") && !seen_fields) {
            seen_fields = 1;
            if (parse_fields(value)) return 1;
        } else if (lit_equal(key, "where") && !seen_where) {
            seen_where = 1;
            if (parse_where(value)) return 1;
        } else {
            eddy_fail("project: config: unknown or repeated key %.*s", (int)key.len, key.ptr);
            return 1;
        }
    }
    return declare();
}

/* Declares the one-key path name: 0 with its index in *index, 1 after
 * eddy_fail, -1 when the name has a NUL byte (no C string can hold it). */
static int declare_name(bytes name, int *index) {
    char *s;
    if (memchr(name.ptr, 0, name.len) != NULL) return -1;
    s = malloc(name.len + 1);
    if (!s) return oom();
    memcpy(s, name.ptr, name.len);
    s[name.len] = 0;
    *index = eddy_field1(s);
    free(s);
    return *index < 0;
}

/* Declares the fields, then the where field unless it is one of them. */
static int declare(void) {
    uint32_t i;
    int index, rc;
    /* With no field to read, validity is all that counts: scan. */
    if (p.nfields == 0 && p.op == OP_NONE) return 0;
    for (i = 0; i < p.nfields; i++) {
        /* A name with a NUL (-1): the module scans instead. */
        if ((rc = declare_name(p.fields[i], &index)) != 0) return rc > 0;
    }
    p.where_index = -1;
    if (p.op != OP_NONE) {
        for (i = 0; i < p.nfields; i++) {
            if (p.fields[i].len == p.where.len && memcmp(p.fields[i].ptr, p.where.ptr, p.where.len) == 0) p.where_index = (int)i;
        }
        if (p.where_index < 0 && (rc = declare_name(p.where, &p.where_index)) != 0) return rc > 0;
    }
    p.declared = 1;
    return 0;
}

/* Evaluates the where clause on the where field's raw value (ptr NULL when
 * the field is missing). */
static int match(eddy_json_span v) {
    double x;
    if (v.ptr == NULL) return 0;
    if (p.op == OP_EXISTS) return 1;
    if (!p.numeric) {
        if (eddy_json_kind_of(v) != EDDY_JSON_STRING) return 0;
        return eddy_json_equal(v, p.text.ptr, p.text.len) == (p.op == OP_EQ);
    }
    if (eddy_json_kind_of(v) != EDDY_JSON_NUMBER) return 0;
    if (!eddy_json_number(v, &x)) return 0;
    switch (p.op) {
    case OP_EQ: return x == p.number;
    case OP_NE: return x != p.number;
    case OP_LT: return x < p.number;
    case OP_LE: return x <= p.number;
    case OP_GT: return x > p.number;
    case OP_GE: return x >= p.number;
    }
    return 0;
}

/* What apply returns instead of a length. */
enum { DROP = -1, NO_MEMORY = -2, WHOLE = -3 };

static int64_t build(uint32_t len);

/* Writes the projection of value to p.out and returns its length; or DROP;
 * or WHOLE when the configuration keeps values whole (eddy_emit copies, so
 * the value itself is the output, as in Go). Mirrors Projector.Apply. */
static int64_t apply(const uint8_t *value, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, v, cond = {0, 0};
    uint32_t i;
    if (!eddy_json_objects(&it, value, len)) return DROP;
    for (i = 0; i < p.nfields; i++) p.spans[i].ptr = NULL;
    for (;;) {
        int st = eddy_json_next(&it, &key, &v);
        if (st == EDDY_JSON_MALFORMED) return DROP;
        if (st == EDDY_JSON_END) break;
        if (p.op != OP_NONE && cond.ptr == NULL && eddy_json_equal(key, p.where.ptr, p.where.len)) cond = v;
        for (i = 0; i < p.nfields; i++) {
            if (p.spans[i].ptr == NULL && eddy_json_equal(key, p.fields[i].ptr, p.fields[i].len)) {
                p.spans[i] = v;
                break; /* field names are distinct: no other can match */
            }
        }
    }
    if (p.op != OP_NONE && !match(cond)) return DROP;
    if (p.all) return WHOLE;
    return build(len);
}

/* apply with the spans the host found (p.declared). */
static int64_t apply_fields(const eddy_record *r) {
    uint32_t i;
    if (!eddy_record_valid(r)) return DROP;
    if (p.op != OP_NONE && !match(eddy_record_field(r, p.where_index))) return DROP;
    if (p.all) return WHOLE;
    for (i = 0; i < p.nfields; i++) p.spans[i] = eddy_record_field(r, (int)i);
    return build(r->value_len);
}

/* Writes the output value of p.spans to p.out and returns its length (len
 * is the input value's, which bounds the members). */
static int64_t build(uint32_t len) {
    uint64_t need;
    uint32_t i, k = 0, n = 0;
    /* The output is at most the value's members plus the prefixes. */
    need = 2 + (uint64_t)len;
    for (i = 0; i < p.nfields; i++) need += p.prefixes[i].len + 1;
    if (need > p.out_cap) {
        free(p.out);
        p.out = malloc((size_t)need);
        p.out_cap = p.out ? (uint32_t)need : 0;
        if (!p.out) return NO_MEMORY;
    }
    p.out[k++] = '{';
    for (i = 0; i < p.nfields; i++) {
        if (p.spans[i].ptr == NULL) continue;
        if (n > 0) p.out[k++] = ',';
        memcpy(p.out + k, p.prefixes[i].ptr, p.prefixes[i].len);
        k += p.prefixes[i].len;
        memcpy(p.out + k, p.spans[i].ptr, p.spans[i].len);
        k += p.spans[i].len;
        n++;
    }
    p.out[k++] = '}';
    return k;
}

int eddy_op_process(const eddy_record *r) {
    eddy_record o = *r;
    int64_t n = p.declared ? apply_fields(r) : apply(r->value, r->value_len);
    if (n == DROP) return 0;
    if (n == NO_MEMORY) return oom();
    if (n != WHOLE) {
        o.value = p.out;
        o.value_len = (uint32_t)n;
    }
    return eddy_emit(&o);
}
