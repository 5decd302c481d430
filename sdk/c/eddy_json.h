/*
 * eddy_json.h - a small, allocation-free JSON scanner for Eddy operators.
 *
 * It is for operators that look at a few fields of each record: iterate the
 * members of an object or the elements of an array, find a member by name,
 * compare or unquote a string, read a number. Values come back as raw spans
 * of the input, so a projection can copy them without decoding and
 * re-encoding. It does not build trees.
 *
 * What it scans is validated (strings, numbers, literals and nesting follow
 * RFC 8259, except that bytes are not checked for valid UTF-8), and no input
 * makes it read out of bounds. Nesting deeper than EDDY_JSON_MAX_DEPTH is
 * malformed, which keeps the scanner iterative with a fixed 64-byte stack.
 *
 * The Go package github.com/eddy-stream/eddy/abi/jsonscan implements the
 * same rules with the same structure, so an operator written in both
 * languages keeps and drops exactly the same records; change both together.
 *
 * It depends only on <stdint.h> and, for eddy_json_number, strtod.
 */
#ifndef EDDY_JSON_H
#define EDDY_JSON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EDDY_JSON_MAX_DEPTH 512

/* A span of the input: for values, exactly the value's bytes (no
 * surrounding whitespace); for member names, the string with its quotes. */
typedef struct eddy_json_span {
    const uint8_t *ptr;
    uint32_t len;
} eddy_json_span;

typedef enum eddy_json_kind {
    EDDY_JSON_INVALID = 0,
    EDDY_JSON_OBJECT,
    EDDY_JSON_ARRAY,
    EDDY_JSON_STRING,
    EDDY_JSON_NUMBER,
    EDDY_JSON_TRUE,
    EDDY_JSON_FALSE,
    EDDY_JSON_NULL
} eddy_json_kind;

/* Results of eddy_json_next and eddy_json_lookup. */
#define EDDY_JSON_MALFORMED (-1) /* not valid JSON, or not the expected kind */
#define EDDY_JSON_END 0          /* no more members / no such member */
#define EDDY_JSON_FIELD 1        /* a member was returned / found */

/* Iterator over an object's members or an array's elements. The container
 * must be the whole input, optionally surrounded by whitespace (or, for an
 * iterator made by eddy_json_enter, a value inside another). Treat the
 * fields as private. */
typedef struct eddy_json_iter {
    const uint8_t *buf;
    int64_t len;
    int64_t pos;
    int object;
    int state;
    int nested;
} eddy_json_iter;

/* Returns the index just after the JSON value starting at b[i] (no leading
 * whitespace), or -1 if there is no valid value there. */
int64_t eddy_json_value_end(const uint8_t *b, uint32_t len, uint32_t i);

/* 1 if b is exactly one JSON value, optionally surrounded by whitespace. */
int eddy_json_valid(const uint8_t *b, uint32_t len);

/* The kind of a value span, judged by its first byte. */
eddy_json_kind eddy_json_kind_of(eddy_json_span v);

/* Start iterating the object (or array) in b. Returns 1 if b starts, after
 * whitespace, with '{' (or '['), 0 otherwise. */
int eddy_json_objects(eddy_json_iter *it, const uint8_t *b, uint32_t len);
int eddy_json_elements(eddy_json_iter *it, const uint8_t *b, uint32_t len);

/* Next member: key gets the raw name (with quotes; empty for arrays, and key
 * may be NULL then), value the raw value. Returns EDDY_JSON_FIELD,
 * EDDY_JSON_END after the last member once the whole input has been checked,
 * or EDDY_JSON_MALFORMED (then forever). */
int eddy_json_next(eddy_json_iter *it, eddy_json_span *key, eddy_json_span *value);

/* One pass over nested values, without scanning a container twice:
 * eddy_json_next_key returns the next member's raw key (empty for an
 * array) like eddy_json_next, and leaves the iterator at its value. The
 * caller then takes the value with eddy_json_value (scanned to its end, as
 * eddy_json_next does), or, when it is an object or an array, iterates it in
 * place with eddy_json_enter; or calls eddy_json_next_key or eddy_json_next
 * again, which skip it. */
int eddy_json_next_key(eddy_json_iter *it, eddy_json_span *key);
int eddy_json_value(eddy_json_iter *it, eddy_json_span *value);

/* eddy_json_enter starts inner on the pending value when it is an object
 * (or an array) and returns 1; else 0, and it is unchanged. it can go on
 * only after eddy_json_leave(it, inner), which continues after the value
 * (finishing inner first if it has not ended) and returns 0 if the value
 * was malformed. A caller that has what it needs may stop at any point
 * instead: what it has not read is then not checked. */
int eddy_json_enter(eddy_json_iter *it, eddy_json_iter *inner);
int eddy_json_leave(eddy_json_iter *it, eddy_json_iter *inner);

/* The value of the first member called name (compared after unescaping) of
 * the object in b, checking the whole object: EDDY_JSON_FIELD when found,
 * EDDY_JSON_END when absent, EDDY_JSON_MALFORMED when b is not a valid
 * object. */
int eddy_json_lookup(const uint8_t *b, uint32_t len, const uint8_t *name, uint32_t name_len,
                     eddy_json_span *value);

/* 1 if the raw string span, once unescaped, equals s[0..n). */
int eddy_json_equal(eddy_json_span raw, const uint8_t *s, uint32_t n);

/* Writes the unescaped content of the raw string span to dst, which must
 * hold raw.len bytes (the result is never longer than raw.len - 2), and
 * returns its length. Lone surrogates become U+FFFD. */
uint32_t eddy_json_unquote(eddy_json_span raw, uint8_t *dst);

/* Writes s[0..n) as a JSON string to dst, which must hold 6 * n + 2 bytes,
 * and returns its length: '"' and '\\' are escaped, control characters use
 * their short escape or \u00XX, every other byte is copied. */
uint32_t eddy_json_quote(uint8_t *dst, const uint8_t *s, uint32_t n);

/* If raw is exactly one JSON number, stores its nearest double (+-Inf beyond
 * the double range) in *out and returns 1; returns 0 otherwise. */
int eddy_json_number(eddy_json_span raw, double *out);

#ifdef __cplusplus
}
#endif

#endif /* EDDY_JSON_H */
