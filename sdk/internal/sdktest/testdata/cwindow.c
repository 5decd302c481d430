/* cwindow.c - a test window function for package sdktest, the same as
 * windowguest/: per window one record with the window's bounds, size and
 * elements. An element "error" fails the window. */
#include <stdio.h>
#include <string.h>

#include "eddy.h"
#include "eddy_window.h"

static eddy_buf out;

static int append_text(const char *s) { return eddy_buf_append(&out, s, (uint32_t)strlen(s)); }

int eddy_op_window(const eddy_window *w, const eddy_record *elems, uint32_t n) {
    char num[64];
    uint32_t i;
    out.len = 0;
    snprintf(num, sizeof num, "[%lld,%lld) %u:", (long long)w->start, (long long)w->end, n);
    if (append_text(num)) return 1;
    for (i = 0; i < n; i++) {
        if (elems[i].value_len == 5 && memcmp(elems[i].value, "error", 5) == 0) {
            eddy_fail("bad element");
            return 1;
        }
        snprintf(num, sizeof num, "@%lld", (long long)elems[i].timestamp);
        if (eddy_buf_byte(&out, ' ') || eddy_buf_append(&out, elems[i].value, elems[i].value_len) || append_text(num)) return 1;
    }
    return eddy_emit_kv(w->key, w->key_len, out.data, out.len, w->end - 1);
}
