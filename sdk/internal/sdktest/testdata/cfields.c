/*
 * cfields.c - the C SDK's fields (eddy_fields.h, ABI versions 6, 7) in the
 * real host: cfields_test.go. The configuration is {"mode": M}:
 *
 *   ok       declares a, b.c and b; each record becomes the row as text:
 *            the validity digit, then "|" and each field's bytes, or "|-"
 *   outside  declares a, then calls eddy_field during eddy_op_process
 *   toomany  declares 65 fields
 *   deep     declares a path of 9 keys
 *   twice    declares a twice (the host refuses the list)
 *   none     declares nothing: eddy_record_valid is 0, fields absent
 *   numbers  declares a, then number fields a and b.c; the row as text
 *            with each number as %.17g, or "-"
 *   parts    as ok, but emits the text with eddy_emit_parts: the spans
 *            and static "|", "-", "0", "1", gathered by the host
 *
 * Built with -DCO (and eddy_keyed.c, eddy_keyed_co.c) as a two-input
 * operator, whose records of both inputs go the same way.
 */
#include <stdio.h>
#include <string.h>

#include "eddy.h"
#include "eddy_fields.h"
#include "eddy_json.h"
#ifdef CO
#include "eddy_keyed.h"
#endif

static char mode[16];
static int n;
static eddy_buf out;

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_span v;
    static const char *deep[9] = {"1", "2", "3", "4", "5", "6", "7", "8", "9"};
    static const char *bc[2] = {"b", "c"};
    if (eddy_json_lookup(config, len, (const uint8_t *)"mode", 4, &v) != EDDY_JSON_FIELD || v.len < 2 || v.len - 2 >= sizeof mode) {
        eddy_fail("cfields: config needs a mode");
        return 1;
    }
    memcpy(mode, v.ptr + 1, v.len - 2);
    if (strcmp(mode, "ok") == 0 || strcmp(mode, "outside") == 0) {
        n = 1;
        if (eddy_field1("a") != 0) return 1;
        if (strcmp(mode, "ok") == 0) {
            n = 3;
            if (eddy_field(2, bc) != 1 || eddy_field1("b") != 2) return 1;
        }
    } else if (strcmp(mode, "toomany") == 0) {
        for (int i = 0; i < 65; i++) {
            char name[8];
            snprintf(name, sizeof name, "f%d", i);
            if (eddy_field1(name) < 0) return 1;
        }
    } else if (strcmp(mode, "deep") == 0) {
        if (eddy_field(9, deep) < 0) return 1;
    } else if (strcmp(mode, "twice") == 0) {
        if (eddy_field1("a") < 0 || eddy_field1("a") < 0) return 1;
    } else if (strcmp(mode, "none") == 0) {
        n = 1;
    } else if (strcmp(mode, "numbers") == 0) {
        n = 3;
        if (eddy_field1("a") != 0 || eddy_number_field1("a") != 1 || eddy_number_field(2, bc) != 2) return 1;
    } else if (strcmp(mode, "parts") == 0) {
        n = 3;
        if (eddy_field1("a") != 0 || eddy_field(2, bc) != 1 || eddy_field1("b") != 2) return 1;
    }
    return 0;
}

static const uint8_t digits[] = "01", bar[] = "|", dash[] = "-";

static int each_parts(const eddy_record *r) {
    eddy_json_span parts[1 + 2 * 3];
    uint32_t k = 0;
    parts[k++] = (eddy_json_span){digits + (eddy_record_valid(r) ? 1 : 0), 1};
    for (int j = 0; j < n; j++) {
        eddy_json_span s = eddy_record_field(r, j);
        parts[k++] = (eddy_json_span){bar, 1};
        parts[k++] = s.ptr == NULL ? (eddy_json_span){dash, 1} : s;
    }
    eddy_record o = *r;
    o.value = NULL;
    o.value_len = 0;
    return eddy_emit_parts(&o, parts, k);
}

static int each_numbers(const eddy_record *r) {
    char text[64];
    double x;
    eddy_json_span s = eddy_record_field(r, 0);
    out.len = 0;
    if (eddy_buf_byte(&out, eddy_record_valid(r) ? '1' : '0') || eddy_buf_byte(&out, '|')) return 1;
    if (s.ptr == NULL ? eddy_buf_byte(&out, '-') : eddy_buf_append(&out, s.ptr, s.len)) return 1;
    for (int j = 1; j < n; j++) {
        int len = eddy_record_number(r, j, &x) ? snprintf(text, sizeof text, "|%.17g", x) : snprintf(text, sizeof text, "|-");
        if (eddy_buf_append(&out, text, (uint32_t)len)) return 1;
    }
    return eddy_emit_kv(r->key, r->key_len, out.data, out.len, r->timestamp);
}

static int each(const eddy_record *r) {
    if (strcmp(mode, "parts") == 0) return each_parts(r);
    if (strcmp(mode, "numbers") == 0) return each_numbers(r);
    if (strcmp(mode, "outside") == 0 && eddy_field1("late") < 0) return 1;
    out.len = 0;
    if (eddy_buf_byte(&out, eddy_record_valid(r) ? '1' : '0')) return 1;
    for (int j = 0; j < n; j++) {
        eddy_json_span s = eddy_record_field(r, j);
        if (eddy_buf_byte(&out, '|')) return 1;
        if (s.ptr == NULL ? eddy_buf_byte(&out, '-') : eddy_buf_append(&out, s.ptr, s.len)) return 1;
    }
    return eddy_emit_kv(r->key, r->key_len, out.data, out.len, r->timestamp);
}

#ifdef CO
int eddy_op_process_left(const eddy_record *r) { return each(r); }
int eddy_op_process_right(const eddy_record *r) { return each(r); }
#else
int eddy_op_process(const eddy_record *r) { return each(r); }
#endif
