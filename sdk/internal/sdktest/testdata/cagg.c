/* cagg.c - a test aggregate for package sdktest, the same as aggguest/:
 * "" is empty, add appends "+" and the record's value, merge makes
 * "(a|b)", the result is the accumulator as a JSON string. A record
 * "error" fails add, "silent" fails it without a message; an accumulator
 * "error" fails merge and result. */
#include <string.h>

#include "eddy.h"
#include "eddy_aggregate.h"
#include "eddy_json.h"

static int is(const uint8_t *p, uint32_t n, const char *s) { return n == strlen(s) && memcmp(p, s, n) == 0; }

int eddy_op_open(const uint8_t *config, uint32_t len) {
    if (is(config, len, "\"error\"")) {
        eddy_fail("open refused");
        return 1;
    }
    return 0;
}

int eddy_op_agg_create(eddy_buf *dst) {
    (void)dst;
    return 0;
}

int eddy_op_agg_add(eddy_buf *dst, const uint8_t *acc, uint32_t acc_len, const eddy_record *r) {
    if (is(r->value, r->value_len, "silent")) return 7;
    if (is(r->value, r->value_len, "error")) {
        eddy_fail("bad record");
        return 1;
    }
    return eddy_buf_append(dst, acc, acc_len) || eddy_buf_byte(dst, '+') || eddy_buf_append(dst, r->value, r->value_len);
}

int eddy_op_agg_merge(eddy_buf *dst, const uint8_t *a, uint32_t a_len, const uint8_t *b, uint32_t b_len) {
    if (is(a, a_len, "error") || is(b, b_len, "error")) {
        eddy_fail("bad accumulator");
        return 1;
    }
    return eddy_buf_byte(dst, '(') || eddy_buf_append(dst, a, a_len) || eddy_buf_byte(dst, '|') ||
           eddy_buf_append(dst, b, b_len) || eddy_buf_byte(dst, ')');
}

int eddy_op_agg_result(eddy_buf *dst, const uint8_t *acc, uint32_t acc_len) {
    uint8_t *q;
    if (is(acc, acc_len, "error")) {
        eddy_fail("bad accumulator");
        return 1;
    }
    if (!(q = eddy_buf_reserve(dst, 6 * acc_len + 2))) return 1;
    dst->len += eddy_json_quote(q, acc, acc_len);
    return 0;
}
