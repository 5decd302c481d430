/*
 * split.c - the "split" example operator in C: one record per word of a
 * text. It mirrors udfs/split/splitter/splitter.go, which documents the
 * configuration and the exact rules; change both together.
 *
 * clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c \
 *     -o split-c.wasm udfs/split/c/split.c sdk/c/eddy.c sdk/c/eddy_json.c
 */
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "eddy_json.h"

/* The configuration, and scratch space reused across records. */
static struct {
    int has_field;    /* 0: the whole value is the text */
    uint8_t *field;   /* unescaped member name */
    uint32_t field_len;
    int lowercase;

    uint8_t *text;    /* scratch: the unescaped member */
    uint8_t *word;    /* scratch: the lowered word */
    uint8_t *value;   /* scratch: the output value */
    uint32_t cap;     /* capacity of each scratch buffer */
} s;

static int lit_equal(eddy_json_span raw, const char *lit) {
    return eddy_json_equal(raw, (const uint8_t *)lit, (uint32_t)strlen(lit));
}

int eddy_op_open(const uint8_t *config, uint32_t len) {
    eddy_json_iter it;
    eddy_json_span key, value;
    int seen_field = 0, seen_lower = 0;
    if (!eddy_json_objects(&it, config, len)) {
        eddy_fail("split: config is not a JSON object");
        return 1;
    }
    for (;;) {
        int st = eddy_json_next(&it, &key, &value);
        if (st == EDDY_JSON_MALFORMED) {
            eddy_fail("split: config is not valid JSON");
            return 1;
        }
        if (st == EDDY_JSON_END) return 0;
        if (lit_equal(key, "field") && !seen_field) {
            seen_field = 1;
            if (eddy_json_kind_of(value) != EDDY_JSON_STRING) {
                eddy_fail("split: config: field must be a string");
                return 1;
            }
            s.field = malloc(value.len);
            if (!s.field) {
                eddy_fail("split: out of memory");
                return 1;
            }
            s.field_len = eddy_json_unquote(value, s.field);
            s.has_field = 1;
        } else if (lit_equal(key, "lowercase") && !seen_lower) {
            seen_lower = 1;
            switch (eddy_json_kind_of(value)) {
            case EDDY_JSON_TRUE: s.lowercase = 1; break;
            case EDDY_JSON_FALSE: s.lowercase = 0; break;
            default:
                eddy_fail("split: config: lowercase must be true or false");
                return 1;
            }
        } else {
            eddy_fail("split: config: unknown or repeated key %.*s", (int)key.len, key.ptr);
            return 1;
        }
    }
}

static int is_word_byte(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Makes every scratch buffer hold n bytes plus the value's decoration. */
static int reserve(uint32_t n) {
    uint64_t need = (uint64_t)n + sizeof "{\"word\":\"\"}";
    if (need <= s.cap) return 1;
    free(s.text);
    free(s.word);
    free(s.value);
    s.text = malloc((size_t)need);
    s.word = malloc((size_t)need);
    s.value = malloc((size_t)need);
    s.cap = s.text && s.word && s.value ? (uint32_t)need : 0;
    return s.cap != 0;
}

int eddy_op_process(const eddy_record *r) {
    static const char open[] = "{\"word\":\"";
    const uint8_t *text = r->value;
    uint32_t len = r->value_len, i = 0;
    if (!reserve(r->value_len)) {
        eddy_fail("split: out of memory");
        return 1;
    }
    if (s.has_field) {
        eddy_json_span v;
        if (eddy_json_lookup(r->value, r->value_len, s.field, s.field_len, &v) != EDDY_JSON_FIELD ||
            eddy_json_kind_of(v) != EDDY_JSON_STRING)
            return 0;
        len = eddy_json_unquote(v, s.text);
        text = s.text;
    }
    for (;;) {
        const uint8_t *word;
        uint32_t start, n, k;
        while (i < len && !is_word_byte(text[i])) i++;
        start = i;
        while (i < len && is_word_byte(text[i])) i++;
        if (i == start) return 0;
        word = text + start;
        n = i - start;
        if (s.lowercase) {
            for (k = 0; k < n; k++) {
                uint8_t c = word[k];
                if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
                s.word[k] = c;
            }
            word = s.word;
        }
        memcpy(s.value, open, sizeof open - 1);
        memcpy(s.value + sizeof open - 1, word, n);
        memcpy(s.value + sizeof open - 1 + n, "\"}", 2);
        if (eddy_emit_kv(word, n, s.value, (uint32_t)(sizeof open - 1 + n + 2), r->timestamp)) return 1;
    }
}
