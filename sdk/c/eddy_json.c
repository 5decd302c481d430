/*
 * eddy_json.c - see eddy_json.h. Mirrors abi/jsonscan/jsonscan.go
 * function by function; positions are int64_t like Go's int so that the
 * two read the same, and -1 means "not valid" in both.
 */
#include "eddy_json.h"

#include <stdlib.h>
#include <string.h>

#ifdef __wasm_simd128__
#include <wasm_simd128.h>
#endif

static int is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static int hex_val(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The four hex digits at b[i..], or -1. */
static int32_t hex4(const uint8_t *b, int64_t n, int64_t i) {
    int32_t r = 0;
    if (i + 4 > n) return -1;
    for (int64_t k = i; k < i + 4; k++) {
        int h = hex_val(b[k]);
        if (h < 0) return -1;
        r = r << 4 | h;
    }
    return r;
}

static int64_t skip_space(const uint8_t *b, int64_t n, int64_t i) {
    while (i < n && is_space(b[i])) i++;
    return i;
}

#ifdef __wasm_simd128__
/* Bit k set: byte k of the 16 at p is '"', '\\' or below 0x20. Exact, so
 * the caller jumps straight to the first such byte. */
static uint32_t special16(const uint8_t *p) {
    v128_t x = wasm_v128_load(p);
    v128_t m = wasm_v128_or(wasm_v128_or(wasm_i8x16_eq(x, wasm_i8x16_splat('"')), wasm_i8x16_eq(x, wasm_i8x16_splat('\\'))),
                            wasm_u8x16_lt(x, wasm_i8x16_splat(0x20)));
    return (uint32_t)wasm_i8x16_bitmask(m);
}
#else
/* Nonzero if one of the 8 bytes of x may be '"', '\\' or below 0x20
 * (SWAR: (v - 0x01..) & ~v & 0x80.. flags a zero byte of v, and
 * (x - 0x20..) & ~x & 0x80.. a byte of x below 0x20; neither misses one,
 * and a false alarm sends the caller byte by byte, which decides). */
static uint64_t special8(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), bs = x ^ (ones * '\\');
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs;
}
#endif

/* Index after the string whose opening quote is at b[i], or -1.
 *
 * With SIMD, each step finds the next '"', '\\' or control byte among the
 * next 16 and jumps to it; when fewer than 16 are left before n, the last
 * 16 bytes of b[0..n) are read with the bits before i shifted out, so no
 * load reaches past n. Without SIMD,
 * plain bytes go 8 at a time (SWAR) while 8 are left, then one by one. */
static int64_t string_end(const uint8_t *b, int64_t n, int64_t i) {
    i++;
    while (i < n) {
        uint8_t c;
#ifdef __wasm_simd128__
        uint32_t m;
        if (i + 16 <= n) {
            m = special16(b + i);
            if (!m) {
                i += 16;
                continue;
            }
            i += __builtin_ctz(m);
        } else if (n >= 16) {
            m = special16(b + n - 16) >> (i - (n - 16));
            if (!m) return -1; /* no closing quote before n */
            i += __builtin_ctz(m);
        }
#else
        if (i + 8 <= n) {
            uint64_t x;
            memcpy(&x, b + i, 8);
            if (!special8(x)) {
                i += 8;
                continue;
            }
        }
#endif
        c = b[i];
        if (c == '"') return i + 1;
        if (c == '\\') {
            if (i + 1 >= n) return -1;
            switch (b[i + 1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                i += 2;
                break;
            case 'u':
                if (hex4(b, n, i + 2) < 0) return -1;
                i += 6;
                break;
            default:
                return -1;
            }
        } else if (c < 0x20) {
            return -1;
        } else {
            i++;
        }
    }
    return -1;
}

/* Index after the digits from b[i] on (i itself if there are none). With
 * SIMD, 16 bytes at a time, reading as string_end does. */
static int64_t digits_end(const uint8_t *b, int64_t n, int64_t i) {
#ifdef __wasm_simd128__
    while (i < n && n >= 16) {
        const uint8_t *p = i + 16 <= n ? b + i : b + n - 16;
        v128_t x = wasm_v128_load(p);
        uint32_t other = ~(uint32_t)wasm_i8x16_bitmask(wasm_u8x16_lt(wasm_i8x16_sub(x, wasm_i8x16_splat('0')), wasm_i8x16_splat(10)));
        if (i + 16 > n) return i + __builtin_ctz((other & 0xffff) >> (i - (n - 16)) | 1u << (n - i));
        if (other & 0xffff) return i + __builtin_ctz(other);
        i += 16;
    }
#endif
    while (i < n && is_digit(b[i])) i++;
    return i;
}

/* Index after the number starting at b[i], or -1. */
static int64_t number_end(const uint8_t *b, int64_t n, int64_t i) {
    int64_t start;
    if (i < n && b[i] == '-') i++;
    if (i >= n) return -1;
    if (b[i] == '0') {
        i++;
    } else if (is_digit(b[i])) {
        i = digits_end(b, n, i + 1);
    } else {
        return -1;
    }
    if (i < n && b[i] == '.') {
        i++;
        start = i;
        i = digits_end(b, n, i);
        if (i == start) return -1;
    }
    if (i < n && (b[i] == 'e' || b[i] == 'E')) {
        i++;
        if (i < n && (b[i] == '+' || b[i] == '-')) i++;
        start = i;
        i = digits_end(b, n, i);
        if (i == start) return -1;
    }
    return i;
}

static int64_t literal_end(const uint8_t *b, int64_t n, int64_t i, const char *lit, int64_t lit_len) {
    if (n - i < lit_len || memcmp(b + i, lit, (size_t)lit_len) != 0) return -1;
    return i + lit_len;
}

/* Parses `"name" :` at b[i]; returns the index of the member's value, or -1. */
static int64_t member_value(const uint8_t *b, int64_t n, int64_t i) {
    if (i >= n || b[i] != '"') return -1;
    i = string_end(b, n, i);
    if (i < 0) return -1;
    i = skip_space(b, n, i);
    if (i >= n || b[i] != ':') return -1;
    return skip_space(b, n, i + 1);
}

static int64_t value_end(const uint8_t *b, int64_t n, int64_t i) {
    uint8_t objects[EDDY_JSON_MAX_DEPTH / 8]; /* bit d set: level d is an object */
    int depth = 0;
    for (;;) {
        uint8_t c;
        /* A value starts at b[i]. */
        if (i < 0 || i >= n) return -1;
        c = b[i];
        if (c == '{' || c == '[') {
            if (depth == EDDY_JSON_MAX_DEPTH) return -1;
            if (c == '{')
                objects[depth / 8] |= (uint8_t)(1u << (depth % 8));
            else
                objects[depth / 8] &= (uint8_t)~(1u << (depth % 8));
            depth++;
            i = skip_space(b, n, i + 1);
            if (i < n && ((b[i] == '}' && c == '{') || (b[i] == ']' && c == '['))) {
                depth--;
                i++;
                /* an empty container is a complete value */
            } else {
                if (c == '{') i = member_value(b, n, i);
                continue;
            }
        } else if (c == '"') {
            i = string_end(b, n, i);
        } else if (c == '-' || is_digit(c)) {
            i = number_end(b, n, i);
        } else if (c == 't') {
            i = literal_end(b, n, i, "true", 4);
        } else if (c == 'f') {
            i = literal_end(b, n, i, "false", 5);
        } else if (c == 'n') {
            i = literal_end(b, n, i, "null", 4);
        } else {
            return -1;
        }
        if (i < 0) return -1;
        /* A value ended at b[i]: close containers until one continues. */
        for (;;) {
            int object;
            if (depth == 0) return i;
            i = skip_space(b, n, i);
            if (i >= n) return -1;
            object = (objects[(depth - 1) / 8] & (1u << ((depth - 1) % 8))) != 0;
            if (b[i] == ',') {
                i = skip_space(b, n, i + 1);
                if (object) i = member_value(b, n, i);
                break;
            }
            if ((object && b[i] == '}') || (!object && b[i] == ']')) {
                depth--;
                i++;
                continue;
            }
            return -1;
        }
    }
}

int64_t eddy_json_value_end(const uint8_t *b, uint32_t len, uint32_t i) {
    return value_end(b, len, i);
}

int eddy_json_valid(const uint8_t *b, uint32_t len) {
    int64_t i = skip_space(b, len, 0);
    int64_t end = value_end(b, len, i);
    return end >= 0 && skip_space(b, len, end) == (int64_t)len;
}

eddy_json_kind eddy_json_kind_of(eddy_json_span v) {
    uint8_t c;
    if (v.len == 0) return EDDY_JSON_INVALID;
    c = v.ptr[0];
    if (c == '{') return EDDY_JSON_OBJECT;
    if (c == '[') return EDDY_JSON_ARRAY;
    if (c == '"') return EDDY_JSON_STRING;
    if (c == '-' || is_digit(c)) return EDDY_JSON_NUMBER;
    if (c == 't') return EDDY_JSON_TRUE;
    if (c == 'f') return EDDY_JSON_FALSE;
    if (c == 'n') return EDDY_JSON_NULL;
    return EDDY_JSON_INVALID;
}

/* ITER_VALUE: a key has been read and the iterator is at its value;
 * ITER_INNER: an inner iterator is on that value (eddy_json_enter). */
enum { ITER_FIRST, ITER_MORE, ITER_DONE, ITER_BAD, ITER_VALUE, ITER_INNER };

static int iter_begin(eddy_json_iter *it, const uint8_t *b, uint32_t len, uint8_t open, int object) {
    int64_t i = skip_space(b, len, 0);
    it->buf = b;
    it->len = len;
    it->object = object;
    it->nested = 0;
    if (i >= (int64_t)len || b[i] != open) {
        it->state = ITER_BAD;
        return 0;
    }
    it->pos = i + 1;
    it->state = ITER_FIRST;
    return 1;
}

int eddy_json_objects(eddy_json_iter *it, const uint8_t *b, uint32_t len) {
    return iter_begin(it, b, len, '{', 1);
}

int eddy_json_elements(eddy_json_iter *it, const uint8_t *b, uint32_t len) {
    return iter_begin(it, b, len, '[', 0);
}

static int iter_fail(eddy_json_iter *it) {
    it->state = ITER_BAD;
    return EDDY_JSON_MALFORMED;
}

int eddy_json_value(eddy_json_iter *it, eddy_json_span *value) {
    int64_t end;
    if (it->state != ITER_VALUE) return iter_fail(it);
    end = value_end(it->buf, it->len, it->pos);
    if (end < 0) return iter_fail(it);
    value->ptr = it->buf + it->pos;
    value->len = (uint32_t)(end - it->pos);
    it->pos = end;
    it->state = ITER_MORE;
    return EDDY_JSON_FIELD;
}

int eddy_json_next_key(eddy_json_iter *it, eddy_json_span *key) {
    const uint8_t *b = it->buf;
    int64_t n = it->len, i;
    uint8_t closer = it->object ? '}' : ']';
    if (it->state == ITER_VALUE) {
        eddy_json_span skipped;
        if (eddy_json_value(it, &skipped) != EDDY_JSON_FIELD) return EDDY_JSON_MALFORMED;
    }
    if (it->state == ITER_DONE) return EDDY_JSON_END;
    if (it->state == ITER_BAD || it->state == ITER_INNER) return iter_fail(it);
    i = skip_space(b, n, it->pos);
    if (i < n && b[i] == closer) {
        if (!it->nested && skip_space(b, n, i + 1) != n) return iter_fail(it);
        it->pos = i + 1;
        it->state = ITER_DONE;
        return EDDY_JSON_END;
    }
    if (it->state == ITER_MORE) {
        if (i >= n || b[i] != ',') return iter_fail(it);
        i = skip_space(b, n, i + 1);
    }
    if (key) {
        key->ptr = b + i;
        key->len = 0;
    }
    if (it->object) {
        int64_t key_end;
        if (i >= n || b[i] != '"') return iter_fail(it);
        key_end = string_end(b, n, i);
        if (key_end < 0) return iter_fail(it);
        if (key) key->len = (uint32_t)(key_end - i);
        i = skip_space(b, n, key_end);
        if (i >= n || b[i] != ':') return iter_fail(it);
        i = skip_space(b, n, i + 1);
    }
    it->pos = i;
    it->state = ITER_VALUE;
    return EDDY_JSON_FIELD;
}

int eddy_json_next(eddy_json_iter *it, eddy_json_span *key, eddy_json_span *value) {
    int st = eddy_json_next_key(it, key);
    if (st != EDDY_JSON_FIELD) return st;
    return eddy_json_value(it, value);
}

int eddy_json_enter(eddy_json_iter *it, eddy_json_iter *inner) {
    uint8_t c;
    if (it->state != ITER_VALUE || it->pos >= it->len) return 0;
    c = it->buf[it->pos];
    if (c != '{' && c != '[') return 0;
    inner->buf = it->buf;
    inner->len = it->len;
    inner->pos = it->pos + 1;
    inner->object = c == '{';
    inner->state = ITER_FIRST;
    inner->nested = 1;
    it->state = ITER_INNER;
    return 1;
}

int eddy_json_leave(eddy_json_iter *it, eddy_json_iter *inner) {
    if (it->state != ITER_INNER || inner->buf != it->buf || !inner->nested) {
        iter_fail(it);
        return 0;
    }
    for (;;) {
        int st = eddy_json_next_key(inner, NULL);
        if (st == EDDY_JSON_END) break;
        if (st == EDDY_JSON_MALFORMED) {
            iter_fail(it);
            return 0;
        }
    }
    it->pos = inner->pos;
    it->state = ITER_MORE;
    return 1;
}

int eddy_json_lookup(const uint8_t *b, uint32_t len, const uint8_t *name, uint32_t name_len,
                     eddy_json_span *value) {
    eddy_json_iter it;
    eddy_json_span key, v;
    int found = 0;
    if (!eddy_json_objects(&it, b, len)) return EDDY_JSON_MALFORMED;
    for (;;) {
        int st = eddy_json_next(&it, &key, &v);
        if (st == EDDY_JSON_MALFORMED) return EDDY_JSON_MALFORMED;
        if (st == EDDY_JSON_END) return found ? EDDY_JSON_FIELD : EDDY_JSON_END;
        if (!found && eddy_json_equal(key, name, name_len)) {
            *value = v;
            found = 1;
        }
    }
}

/* The bytes between the quotes of a raw string span. */
static int content(eddy_json_span raw, const uint8_t **c, int64_t *n) {
    if (raw.len < 2 || raw.ptr[0] != '"' || raw.ptr[raw.len - 1] != '"') return 0;
    *c = raw.ptr + 1;
    *n = (int64_t)raw.len - 2;
    return 1;
}

static int encode_rune(uint8_t buf[4], int32_t r) {
    if (r < 0x80) {
        buf[0] = (uint8_t)r;
        return 1;
    }
    if (r < 0x800) {
        buf[0] = (uint8_t)(0xC0 | r >> 6);
        buf[1] = (uint8_t)(0x80 | (r & 0x3F));
        return 2;
    }
    if (r < 0x10000) {
        buf[0] = (uint8_t)(0xE0 | r >> 12);
        buf[1] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
        buf[2] = (uint8_t)(0x80 | (r & 0x3F));
        return 3;
    }
    buf[0] = (uint8_t)(0xF0 | r >> 18);
    buf[1] = (uint8_t)(0x80 | (r >> 12 & 0x3F));
    buf[2] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
    buf[3] = (uint8_t)(0x80 | (r & 0x3F));
    return 4;
}

/* Decodes the escape at c[i] (c[i] == '\\') into buf; returns the byte
 * count and stores the index after the sequence in *next. Lone surrogates
 * become U+FFFD; a sequence the scanner would reject is taken literally (one
 * backslash), so callers are total on any input. */
static int unescape(const uint8_t *c, int64_t n, int64_t i, uint8_t buf[4], int64_t *next) {
    int32_t r, lo;
    if (i + 1 >= n) {
        buf[0] = '\\';
        *next = i + 1;
        return 1;
    }
    *next = i + 2;
    switch (c[i + 1]) {
    case '"': case '\\': case '/':
        buf[0] = c[i + 1];
        return 1;
    case 'b': buf[0] = '\b'; return 1;
    case 'f': buf[0] = '\f'; return 1;
    case 'n': buf[0] = '\n'; return 1;
    case 'r': buf[0] = '\r'; return 1;
    case 't': buf[0] = '\t'; return 1;
    case 'u':
        r = hex4(c, n, i + 2);
        if (r < 0) {
            buf[0] = '\\';
            *next = i + 1;
            return 1;
        }
        *next = i + 6;
        if (r >= 0xD800 && r < 0xDC00) {
            if (*next + 1 < n && c[*next] == '\\' && c[*next + 1] == 'u' &&
                (lo = hex4(c, n, *next + 2)) >= 0xDC00 && lo < 0xE000) {
                r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
                *next += 6;
            } else {
                r = 0xFFFD;
            }
        } else if (r >= 0xDC00 && r < 0xE000) {
            r = 0xFFFD;
        }
        return encode_rune(buf, r);
    default:
        buf[0] = '\\';
        *next = i + 1;
        return 1;
    }
}

int eddy_json_equal(eddy_json_span raw, const uint8_t *s, uint32_t n) {
    const uint8_t *c;
    int64_t cn, i = 0, k = 0, next;
    uint8_t buf[4];
    if (!content(raw, &c, &cn) || (int64_t)n > cn) return 0; /* unescaping never lengthens */
    while (i < cn) {
        int m;
        if (c[i] != '\\') {
            if (k >= n || s[k] != c[i]) return 0;
            k++;
            i++;
            continue;
        }
        m = unescape(c, cn, i, buf, &next);
        if ((int64_t)n - k < m || memcmp(s + k, buf, (size_t)m) != 0) return 0;
        k += m;
        i = next;
    }
    return k == n;
}

uint32_t eddy_json_unquote(eddy_json_span raw, uint8_t *dst) {
    const uint8_t *c;
    int64_t cn, i = 0, next;
    uint32_t k = 0;
    uint8_t buf[4];
    if (!content(raw, &c, &cn)) return 0;
    while (i < cn) {
        int m;
        if (c[i] != '\\') {
            int64_t start = i;
            while (i < cn && c[i] != '\\') i++;
            memcpy(dst + k, c + start, (size_t)(i - start));
            k += (uint32_t)(i - start);
            continue;
        }
        m = unescape(c, cn, i, buf, &next);
        memcpy(dst + k, buf, (size_t)m);
        k += (uint32_t)m;
        i = next;
    }
    return k;
}

uint32_t eddy_json_quote(uint8_t *dst, const uint8_t *s, uint32_t n) {
    static const char hex[] = "0123456789abcdef";
    uint32_t k = 0;
    dst[k++] = '"';
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') {
            dst[k++] = '\\';
            dst[k++] = c;
        } else if (c == '\b') {
            dst[k++] = '\\';
            dst[k++] = 'b';
        } else if (c == '\f') {
            dst[k++] = '\\';
            dst[k++] = 'f';
        } else if (c == '\n') {
            dst[k++] = '\\';
            dst[k++] = 'n';
        } else if (c == '\r') {
            dst[k++] = '\\';
            dst[k++] = 'r';
        } else if (c == '\t') {
            dst[k++] = '\\';
            dst[k++] = 't';
        } else if (c < 0x20) {
            dst[k++] = '\\';
            dst[k++] = 'u';
            dst[k++] = '0';
            dst[k++] = '0';
            dst[k++] = (uint8_t)hex[c >> 4];
            dst[k++] = (uint8_t)hex[c & 0xF];
        } else {
            dst[k++] = c;
        }
    }
    dst[k++] = '"';
    return k;
}

/* Exact powers of ten: every one up to 1e22 is representable in a double. */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* fast_number converts the common case without strtod: at most 19
 * digits whose value fits in 53 bits, scaled by a power of ten up to 22.
 * Both operands are then exact doubles and IEEE division/multiplication
 * rounds once, so the result is the correctly rounded one (Clinger's fast
 * path, which Go's strconv.ParseFloat takes too). It matters on wasm32,
 * where musl's strtod works in software 128-bit long double and costs
 * microseconds per call. Returns 0 when the number is not such a case. */
static int fast_number(const uint8_t *b, uint32_t n, double *out) {
    uint32_t i = 0;
    int neg = 0, digits = 0, exp10 = 0;
    uint64_t mant = 0;
    if (i < n && b[i] == '-') {
        neg = 1;
        i++;
    }
    for (; i < n && is_digit(b[i]); i++) {
        if (++digits > 19) return 0;
        mant = mant * 10 + (uint64_t)(b[i] - '0');
    }
    if (i < n && b[i] == '.') {
        for (i++; i < n && is_digit(b[i]); i++) {
            if (++digits > 19) return 0;
            mant = mant * 10 + (uint64_t)(b[i] - '0');
            exp10--;
        }
    }
    if (i != n) return 0; /* an exponent part: leave it to strtod */
    if (mant > ((uint64_t)1 << 53) || exp10 < -22) return 0;
    double v = (double)mant;
    v = exp10 < 0 ? v / pow10_exact[-exp10] : v;
    *out = neg ? -v : v;
    return 1;
}

int eddy_json_number(eddy_json_span raw, double *out) {
    /* strtod needs a NUL-terminated copy: the byte after a span may be a
     * digit of something else. Numbers that do not fit the stack buffer
     * (hundreds of digits) take a heap copy. musl's strtod, like Go's
     * strconv.ParseFloat, rounds correctly, so both SDKs agree. */
    char small[128];
    char *s = small;
    if (raw.len == 0 || number_end(raw.ptr, raw.len, 0) != (int64_t)raw.len) return 0;
    if (fast_number(raw.ptr, raw.len, out)) return 1;
    if (raw.len >= sizeof small) {
        s = malloc((size_t)raw.len + 1);
        if (!s) return 0;
    }
    memcpy(s, raw.ptr, raw.len);
    s[raw.len] = 0;
    *out = strtod(s, NULL);
    if (s != small) free(s);
    return 1;
}
