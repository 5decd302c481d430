/* ckeyed.c - a test operator for package sdktest that uses keyed state and
 * timers (ABI version 2): the same commands and output as
 * ../keyedguest/main.go, which lists them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_keyed.h"

static eddy_state v, l, m, early;

int eddy_op_open(const uint8_t *config, uint32_t len) {
    (void)config;
    (void)len;
    early = eddy_value_state("early", 0);
    v = eddy_value_state("v", 0);
    l = eddy_list_state("l", 0);
    m = eddy_map_state("m", 0);
    return early && v && l && m ? 0 : 1;
}

/* The output of one command, built in out. */
static char out[4096];
static uint32_t out_len;

static void put(const void *p, uint32_t n) {
    if (n > sizeof out - out_len) n = (uint32_t)(sizeof out - out_len);
    memcpy(out + out_len, p, n);
    out_len += n;
}

static void puts_(const char *s) { put(s, (uint32_t)strlen(s)); }

static void show(int32_t n, const uint8_t *p) {
    if (n == EDDY_ABSENT)
        puts_("-");
    else
        put(p, (uint32_t)n);
}

static int flush(const eddy_record *r) { return eddy_emit_kv(r->key, r->key_len, (const uint8_t *)out, out_len, 0); }

static int is(const char *cmd, uint32_t n, const char *s) { return n == strlen(s) && memcmp(cmd, s, n) == 0; }

static int kind_of(const char *arg, uint32_t n, int *kind) {
    if (n >= 1 && arg[0] == 'e') *kind = EDDY_EVENT_TIME;
    else if (n >= 1 && arg[0] == 'p') *kind = EDDY_PROCESSING_TIME;
    else {
        eddy_fail("bad timer kind %.*s", (int)n, arg);
        return 0;
    }
    return 1;
}

int eddy_op_process(const eddy_record *r) {
    const char *cmd = (const char *)r->value, *sp = memchr(cmd, ' ', r->value_len);
    uint32_t cn = sp ? (uint32_t)(sp - cmd) : r->value_len;
    const char *arg = sp ? sp + 1 : cmd + cn;
    uint32_t an = sp ? r->value_len - cn - 1 : 0;
    uint8_t *got;
    int32_t n;
    eddy_iter it;
    out_len = 0;
    if (is(cmd, cn, "vput")) return eddy_value_put(v, (const uint8_t *)arg, an);
    if (is(cmd, cn, "vget")) {
        if ((n = eddy_value_get(v, &got)) == EDDY_ERROR) return 1;
        show(n, got);
        return flush(r);
    }
    if (is(cmd, cn, "vclear")) return eddy_state_clear(v);
    if (is(cmd, cn, "ladd")) return eddy_list_add(l, (const uint8_t *)arg, an);
    if (is(cmd, cn, "lget")) {
        const uint8_t *e;
        uint32_t en, i = 0;
        if (eddy_list_get(l, &it) == EDDY_ERROR) return 1;
        puts_("[");
        while (eddy_list_next(&it, &e, &en)) {
            if (i++) puts_(",");
            put(e, en);
        }
        puts_("]");
        return flush(r);
    }
    if (is(cmd, cn, "lclear")) return eddy_state_clear(l);
    if (is(cmd, cn, "mput")) {
        const char *eq = memchr(arg, '=', an);
        uint32_t kn = eq ? (uint32_t)(eq - arg) : an;
        return eddy_map_put(m, (const uint8_t *)arg, kn, (const uint8_t *)(eq ? eq + 1 : arg + an), eq ? an - kn - 1 : 0);
    }
    if (is(cmd, cn, "mget")) {
        if ((n = eddy_map_get(m, (const uint8_t *)arg, an, &got)) == EDDY_ERROR) return 1;
        show(n, got);
        return flush(r);
    }
    if (is(cmd, cn, "mdel")) return eddy_map_delete(m, (const uint8_t *)arg, an);
    if (is(cmd, cn, "mentries")) {
        const uint8_t *uk, *val;
        uint32_t ukn, vn, i = 0;
        if (eddy_map_entries(m, &it) == EDDY_ERROR) return 1;
        puts_("{");
        while (eddy_map_next(&it, &uk, &ukn, &val, &vn)) {
            if (i++) puts_(",");
            put(uk, ukn);
            puts_("=");
            put(val, vn);
        }
        puts_("}");
        return flush(r);
    }
    if (is(cmd, cn, "timer") || is(cmd, cn, "untimer")) {
        char digits[32];
        int kind;
        uint32_t dn = an > 2 ? an - 2 : 0;
        if (!kind_of(arg, an, &kind)) return 1;
        if (dn > sizeof digits - 1) dn = sizeof digits - 1;
        memcpy(digits, arg + 2, dn);
        digits[dn] = 0;
        if (is(cmd, cn, "timer")) return eddy_timer_register(kind, strtoll(digits, NULL, 10));
        return eddy_timer_delete(kind, strtoll(digits, NULL, 10));
    }
    if (is(cmd, cn, "time")) {
        char s[64];
        snprintf(s, sizeof s, "%lld %lld", (long long)eddy_current_watermark(), (long long)eddy_processing_time());
        puts_(s);
        return flush(r);
    }
    if (is(cmd, cn, "key")) {
        uint32_t kn;
        const uint8_t *k = eddy_current_key(&kn);
        if (eddy_value_put(early, r->key, r->key_len)) return 1;
        if ((n = eddy_value_get(early, &got)) == EDDY_ERROR) return 1;
        puts_("key ");
        put(k, kn);
        puts_(" early ");
        show(n, got);
        return flush(r);
    }
    if (is(cmd, cn, "declare")) return eddy_value_state("late", 0) ? 0 : 1;
    eddy_fail("unknown command %.*s", (int)cn, cmd);
    return 1;
}

int eddy_op_timer(const eddy_timer *t) {
    char s[64];
    uint8_t *got;
    int32_t n = eddy_value_get(v, &got);
    if (n == EDDY_ERROR) return 1;
    out_len = 0;
    snprintf(s, sizeof s, "fired %c ", t->kind == EDDY_PROCESSING_TIME ? 'p' : 'e');
    puts_(s);
    put(t->key, t->key_len);
    snprintf(s, sizeof s, " %lld ", (long long)t->timestamp);
    puts_(s);
    show(n, got);
    return eddy_emit_kv(t->key, t->key_len, (const uint8_t *)out, out_len, 0);
}
