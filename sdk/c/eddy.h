/*
 * eddy.h - the C SDK for Eddy operator modules.
 *
 * It implements the guest side of the Eddy ABI (abi/ABI.md, version 1): the
 * exports the host calls, batch decoding, and the output buffer. An operator
 * implements three functions and calls eddy_emit for its output:
 *
 *     int eddy_op_open(const uint8_t *config, uint32_t len);   (optional)
 *     int eddy_op_process(const eddy_record *r);
 *     int eddy_op_close(void);                                  (optional)
 *
 * Each returns 0 on success. To fail the task, call eddy_fail("...") and
 * return nonzero. eddy.c provides empty default eddy_op_open/eddy_op_close
 * (weak symbols) for operators that need neither.
 *
 * Build (wasi-libc reactor; C99; no other dependency):
 *
 *     clang --target=wasm32-wasi -mexec-model=reactor -O2 -flto -mbulk-memory -msimd128 -I sdk/c \
 *         -o op.wasm op.c sdk/c/eddy.c
 *
 * Keyed state, timers and event time (ABI version 2) are in eddy_keyed.h;
 * a module that uses them also compiles sdk/c/eddy_keyed.c, which is what
 * makes it declare version 2. For a window node, eddy_aggregate.h (an
 * aggregate module, version 3) and eddy_window.h (a window function) take
 * the place of eddy_op_process. eddy_fields.h (version 6) lets an operator
 * declare the JSON fields it reads, which the host then finds for it.
 *
 * The host drives one instance per task from one thread: nothing here is
 * reentrant or needs to be.
 */
#ifndef EDDY_H
#define EDDY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version a module declares without eddy_keyed.c. */
#define EDDY_ABI_VERSION 1

/* Timestamp of a record without event time. */
#define EDDY_NO_TIMESTAMP INT64_MIN

/* Size of the buffer eddy_emit collects records in. A record larger than
 * this is handed to the host alone, from a temporary heap buffer. */
#define EDDY_OUTPUT_BUFFER_SIZE (64u * 1024u)

/* Log levels. */
enum { EDDY_LOG_DEBUG = 0, EDDY_LOG_INFO = 1, EDDY_LOG_WARN = 2, EDDY_LOG_ERROR = 3 };

/*
 * A record. In eddy_op_process every pointer aliases the input batch: valid
 * only until eddy_op_process returns. eddy_emit copies what it is given.
 *
 * headers is the record's encoded headers block (see ABI.md "Batch
 * encoding"; headers_len 0 = none). Pass it through to keep a record's
 * headers; read it with eddy_headers_begin / eddy_headers_next.
 */
typedef struct eddy_record {
    const uint8_t *key; /* a zero-length key means "no key" */
    uint32_t key_len;
    const uint8_t *value;
    uint32_t value_len;
    int64_t timestamp; /* ms since the Unix epoch, or EDDY_NO_TIMESTAMP */
    const uint8_t *headers;
    uint32_t headers_len;
    /* Version 6 (eddy_fields.h): the record's row of the batch's field
     * table, NULL when the module declared no fields. Read it with
     * eddy_record_valid and eddy_record_field; eddy_emit ignores it. */
    const uint8_t *fields_row;
} eddy_record;

/* Implemented by the operator. config is the node's config from the job spec
 * as JSON ("{}" when absent); it is valid only during eddy_op_open: copy what
 * you keep. eddy_emit may not be called from eddy_op_open. */
int eddy_op_open(const uint8_t *config, uint32_t len);
int eddy_op_process(const eddy_record *r);
int eddy_op_close(void);

/* Sends r downstream, copying its key, value and headers. Call it only from
 * eddy_op_process, eddy_op_timer (eddy_keyed.h) and eddy_op_close. Returns 0, or nonzero after recording
 * the failure with eddy_fail (called elsewhere, or out of memory for a record
 * larger than the output buffer): then return nonzero yourself. */
int eddy_emit(const eddy_record *r);

/* eddy_emit for a record without headers. */
int eddy_emit_kv(const uint8_t *key, uint32_t key_len, const uint8_t *value, uint32_t value_len,
                 int64_t timestamp);

/* Writes a printf-formatted message (truncated to 1 KiB) to the task log.
 * The host rate-limits it: do not log per record except while debugging. */
void eddy_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets the error message of the current call (printf-formatted, truncated to
 * 1 KiB). Return nonzero from the eddy_op_ function afterwards. */
void eddy_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable byte buffer for building values without allocating per
 * record: appending to one that has room does not allocate. data comes
 * from malloc; a zeroed eddy_buf is empty. eddy_aggregate.h hands the
 * aggregate functions one to append to. */
typedef struct eddy_buf {
    uint8_t *data;
    uint32_t len;
    uint32_t cap;
} eddy_buf;

/* Makes room for n more bytes and returns b->data + b->len, where they go:
 * write them and add n to b->len. Grows the buffer geometrically. Returns
 * NULL after eddy_fail when memory runs out. */
uint8_t *eddy_buf_reserve(eddy_buf *b, uint32_t n);

/* Appends n bytes from p, which must not point into b. Returns 0, or
 * nonzero after eddy_fail. */
int eddy_buf_append(eddy_buf *b, const void *p, uint32_t n);

/* Appends one byte. Returns 0, or nonzero after eddy_fail. */
int eddy_buf_byte(eddy_buf *b, uint8_t c);

/* One header; the pointers alias the record's headers block. */
typedef struct eddy_header {
    const uint8_t *key; /* UTF-8 */
    uint32_t key_len;
    const uint8_t *value;
    uint32_t value_len;
} eddy_header;

typedef struct eddy_header_iter {
    const uint8_t *next;
    uint32_t left;
} eddy_header_iter;

/* Iterates r's headers; the SDK has checked the block when decoding. */
void eddy_headers_begin(eddy_header_iter *it, const eddy_record *r);
/* Returns 1 and fills h, or 0 after the last header. */
int eddy_headers_next(eddy_header_iter *it, eddy_header *h);

#ifdef __cplusplus
}
#endif

#endif /* EDDY_H */
