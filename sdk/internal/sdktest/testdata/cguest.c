/* cguest.c - a test operator for package sdktest: what it does with a
 * record depends on the record's value, so that one module can exercise
 * every path of the C SDK. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"

static int is(const eddy_record *r, const char *s) {
    return r->value_len == strlen(s) && memcmp(r->value, s, r->value_len) == 0;
}

int eddy_op_open(const uint8_t *config, uint32_t len) {
    if (len == 6 && memcmp(config, "\"emit\"", 6) == 0) return eddy_emit_kv(NULL, 0, (const uint8_t *)"from open", 9, 0);
    if (len == 7 && memcmp(config, "\"error\"", 7) == 0) {
        eddy_fail("open refused");
        return 1;
    }
    eddy_log(EDDY_LOG_INFO, "opened with %.*s", (int)len, (const char *)config);
    return 0;
}

int eddy_op_process(const eddy_record *r) {
    if (is(r, "silent")) return 7; /* fails without a message */
    if (is(r, "error")) {
        eddy_fail("bad record");
        return 1;
    }
    if (r->value_len > 5 && memcmp(r->value, "emit ", 5) == 0) {
        char digits[16];
        uint32_t dn = r->value_len - 5 < 15 ? r->value_len - 5 : 15;
        int n, i;
        memcpy(digits, r->value + 5, dn);
        digits[dn] = 0;
        n = atoi(digits);
        for (i = 0; i < n; i++) {
            char v[16];
            int vn = snprintf(v, sizeof v, "%d", i);
            if (eddy_emit_kv(r->key, r->key_len, (const uint8_t *)v, (uint32_t)vn, r->timestamp)) return 1;
        }
        return 0;
    }
    {
        /* Headers are readable with the iterator and pass through. */
        eddy_header_iter it;
        eddy_header h;
        eddy_headers_begin(&it, r);
        while (eddy_headers_next(&it, &h))
            if (h.key_len == 0) {
                eddy_fail("empty header key");
                return 1;
            }
    }
    return eddy_emit(r);
}

int eddy_op_close(void) {
    return eddy_emit_kv((const uint8_t *)"close", 5, (const uint8_t *)"closed", 6, EDDY_NO_TIMESTAMP);
}
