/*
 * eddy_fields.h - fields the host extracts (ABI versions 6 and 7;
 * abi/ABI.md, "Version 6" and "Version 7"). An operator that reads a few
 * members of JSON values declares them in eddy_op_open; the host then
 * checks each record's value and finds those members natively while it
 * writes the batch, so the operator does not scan the JSON itself. A
 * number field's value comes parsed (eddy_record_number), and an output
 * value can be handed over as parts the host gathers (eddy_emit_parts).
 * Linking eddy_fields.c makes the module declare version 7.
 *
 *     static int price, extra;
 *     int eddy_op_open(const uint8_t *config, uint32_t len) {
 *         price = eddy_field(2, (const char *[]){"bid", "price"});
 *         extra = eddy_field1("extra");
 *         return price < 0 || extra < 0;
 *     }
 *     int eddy_op_process(const eddy_record *r) {
 *         eddy_json_span p;
 *         if (!eddy_record_valid(r)) return 0;        (not a JSON object)
 *         p = eddy_record_field(r, price);            (p.ptr NULL: absent)
 *         ...
 *     }
 *
 * A span is the member's raw value (a string with its quotes and escapes,
 * an object or array whole): the eddy_json_* functions read it. At each
 * level the first member of the name counts; keys compare after
 * unescaping.
 */
#ifndef EDDY_FIELDS_H
#define EDDY_FIELDS_H

#include <stdint.h>

#include "eddy.h"
#include "eddy_json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of the ABI: paths per module, keys per path. */
#define EDDY_MAX_FIELDS 64
#define EDDY_MAX_FIELD_KEYS 8

/* Declares the path keys[0].keys[1]...keys[nkeys-1] (NUL-terminated
 * UTF-8 member names) and returns its index for eddy_record_field, or -1
 * after eddy_fail (outside eddy_op_open, too many paths or keys, out of
 * memory). The host checks the whole list when eddy_op_open returns; a
 * path declared twice then fails the open. */
int eddy_field(uint32_t nkeys, const char *const *keys);

/* eddy_field for a top-level member. */
int eddy_field1(const char *key);

/* 1 when r's value is one valid JSON object, 0 otherwise (then every field
 * is absent), also 0 for a record of a batch without a field table. */
int eddy_record_valid(const eddy_record *r);

/* The raw value of path index in r's value; ptr NULL when absent (and for
 * a number field). */
eddy_json_span eddy_record_field(const eddy_record *r, int index);

/* Declares a number field (version 7): the host parses the path's value
 * when it is a JSON number, as the nearest double (+-inf beyond range).
 * Same arguments and result as eddy_field; a path may be declared once as
 * a field and once as a number field. */
int eddy_number_field(uint32_t nkeys, const char *const *keys);

/* eddy_number_field for a top-level member. */
int eddy_number_field1(const char *key);

/* 1 and *out the number when number field index of r's value is present
 * and a JSON number; 0 otherwise (absent, another type, an invalid value,
 * not a number field). */
int eddy_record_number(const eddy_record *r, int index, double *out);

/* Emits a record like r (its value is not used) whose value is the
 * concatenation of the n parts, without copying them: the host gathers
 * them when it takes the output (version 7). Each part must stay
 * unchanged until eddy_op_process (or eddy_op_close) returns: spans of
 * the record's value and the operator's static or kept data do. Returns
 * 0, or -1 after eddy_fail. */
int eddy_emit_parts(const eddy_record *r, const eddy_json_span *parts, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif /* EDDY_FIELDS_H */
