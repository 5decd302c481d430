/*
 * eddy.c - the guest side of the Eddy ABI for C operators; see eddy.h and
 * abi/ABI.md. Mirrors sdk/go (internal/guest) and abi/codec.go. Keyed state
 * and timers (ABI version 2) are in eddy_keyed.c, which shares the batch
 * loop and the current key through eddy_internal.h.
 */
#include "eddy.h"
#include "eddy_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "eddy.c reads the little-endian batch encoding with native loads"
#endif

#define BATCH_MAGIC 0x31424445u /* "EDB1" */
#define HEADER_SIZE 8u
#define ENTRY_SIZE 32u
#define MAX_RECORDS (1u << 24)
#define MAX_HEADERS (1u << 16)
#define MESSAGE_SIZE 1024

#define IMPORT(name) __attribute__((import_module("eddy"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("emit") void eddy_host_emit(const uint8_t *batch, uint32_t len);
IMPORT("log") void eddy_host_log(int32_t level, const char *msg, uint32_t len);
IMPORT("fail") void eddy_host_fail(const char *msg, uint32_t len);

/* The one growing buffer of eddy_alloc: the host writes the configuration
 * and then every batch into it. */
static uint8_t *input;
static uint32_t input_cap;

/* The output batch: entries from the front, data from the back, so nothing
 * moves when it is handed over. */
static uint8_t output[EDDY_OUTPUT_BUFFER_SIZE] __attribute__((aligned(8)));
static uint32_t out_count;
static uint32_t out_data = EDDY_OUTPUT_BUFFER_SIZE; /* start of the data, growing down */

/* emit is valid only during eddy_process, eddy_on_timer and eddy_close. */
static int emitting;
/* Whether eddy_fail was called during the current call. */
static int failed;

static char message[MESSAGE_SIZE];

const uint8_t *eddy__key;
uint32_t eddy__key_len;
int eddy__has_key;
int eddy__opening;

/* Wasm allows unaligned loads and stores; memcpy compiles to one of them. */
static uint32_t get32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void vformat(const char *fmt, va_list ap) { vsnprintf(message, sizeof message, fmt, ap); }

void eddy_log(int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vformat(fmt, ap);
    va_end(ap);
    eddy_host_log(level, message, (uint32_t)strlen(message));
}

void eddy_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vformat(fmt, ap);
    va_end(ap);
    failed = 1;
    eddy_host_fail(message, (uint32_t)strlen(message));
}

/* Output not yet handed over is dropped when a call fails: the task is
 * failing, and it must not leak into a later call. */
static int32_t call_failed(int rc) {
    out_count = 0;
    out_data = EDDY_OUTPUT_BUFFER_SIZE;
    if (!failed) eddy_fail("operator returned %d without calling eddy_fail", rc);
    return 1;
}

/* Size a record adds to a batch: its entry and its data. */
static uint64_t record_size(const eddy_record *r) {
    return (uint64_t)ENTRY_SIZE + r->key_len + r->value_len + r->headers_len;
}

/* Writes r's entry at entry index *count and its data below *data, in the
 * same layout as abi.Writer. The caller has checked that it fits. */
static void put_record(uint8_t *buf, uint32_t *count, uint32_t *data, const eddy_record *r) {
    uint8_t *e = buf + HEADER_SIZE + ENTRY_SIZE * *count;
    put64(e, (uint64_t)r->timestamp);
    if (r->headers_len > 0) {
        *data -= r->headers_len;
        memcpy(buf + *data, r->headers, r->headers_len);
        put32(e + 24, *data);
        put32(e + 28, r->headers_len);
    } else {
        put64(e + 24, 0);
    }
    *data -= r->value_len;
    if (r->value_len) memcpy(buf + *data, r->value, r->value_len);
    put32(e + 16, *data);
    put32(e + 20, r->value_len);
    *data -= r->key_len;
    if (r->key_len) memcpy(buf + *data, r->key, r->key_len);
    put32(e + 8, *data);
    put32(e + 12, r->key_len);
    (*count)++;
}

static void finish(uint8_t *buf, uint32_t count) {
    put32(buf, BATCH_MAGIC);
    put32(buf + 4, count);
}

static void flush(void) {
    if (out_count == 0) return;
    finish(output, out_count);
    eddy_host_emit(output, EDDY_OUTPUT_BUFFER_SIZE);
    out_count = 0;
    out_data = EDDY_OUTPUT_BUFFER_SIZE;
}

static int fits(uint64_t size) {
    return (uint64_t)HEADER_SIZE + (uint64_t)ENTRY_SIZE * out_count + size <= out_data;
}

int eddy_emit(const eddy_record *r) {
    uint64_t size = record_size(r);
    uint8_t *spill;
    uint32_t count = 0, data;
    if (!emitting) {
        eddy_fail("eddy: eddy_emit called outside eddy_op_process and eddy_op_close");
        return -1;
    }
    if (!fits(size)) flush();
    if (fits(size)) {
        put_record(output, &out_count, &out_data, r);
        return 0;
    }
    /* Larger than the whole output buffer: hand it over alone, after the
     * records before it so that order is kept. */
    if (HEADER_SIZE + size > UINT32_MAX || !(spill = malloc((size_t)(HEADER_SIZE + size)))) {
        eddy_fail("eddy: out of memory for a record of %llu bytes", (unsigned long long)size);
        return -1;
    }
    data = (uint32_t)(HEADER_SIZE + size);
    put_record(spill, &count, &data, r);
    finish(spill, 1);
    eddy_host_emit(spill, (uint32_t)(HEADER_SIZE + size));
    free(spill);
    return 0;
}

/* Version 7's values in parts (eddy_fields.h's eddy_emit_parts): r's value
 * is the list of n parts at parts, 8 bytes each (address and length, as
 * an eddy_json_span is laid out in wasm32), written into the entry's data
 * in place of the value, with the part-list bit in value_len. */
int eddy__emit_parts(const eddy_record *r, const void *parts, uint32_t n) {
    eddy_record list = *r;
    uint8_t *e;
    if (!emitting) {
        eddy_fail("eddy: eddy_emit_parts called outside eddy_op_process and eddy_op_close");
        return -1;
    }
    if (n > (UINT32_MAX - ENTRY_SIZE - r->key_len - r->headers_len) / 8) {
        eddy_fail("eddy: eddy_emit_parts of %u parts", n);
        return -1;
    }
    list.value = parts;
    list.value_len = 8 * n;
    if (!fits(record_size(&list))) flush();
    if (!fits(record_size(&list))) {
        eddy_fail("eddy: eddy_emit_parts: a list of %u parts does not fit in the %u-byte output buffer", n, EDDY_OUTPUT_BUFFER_SIZE);
        return -1;
    }
    e = output + HEADER_SIZE + ENTRY_SIZE * out_count;
    put_record(output, &out_count, &out_data, &list);
    put32(e + 20, 0x80000000u | n);
    return 0;
}

int eddy_emit_kv(const uint8_t *key, uint32_t key_len, const uint8_t *value, uint32_t value_len,
                 int64_t timestamp) {
    eddy_record r = {key, key_len, value, value_len, timestamp, NULL, 0, NULL};
    return eddy_emit(&r);
}

uint8_t *eddy_buf_reserve(eddy_buf *b, uint32_t n) {
    uint64_t need = (uint64_t)b->len + n, cap;
    uint8_t *p;
    /* Never NULL on success, even for n = 0 on an empty buffer. */
    if (need <= b->cap && b->data) return b->data + b->len;
    cap = 2 * (uint64_t)b->cap;
    if (cap < need) cap = need;
    if (cap < 64) cap = 64;
    if (cap > UINT32_MAX) cap = need;
    if (need > UINT32_MAX || !(p = realloc(b->data, (size_t)cap))) {
        eddy_fail("eddy: out of memory for a buffer of %llu bytes", (unsigned long long)need);
        return NULL;
    }
    b->data = p;
    b->cap = (uint32_t)cap;
    return b->data + b->len;
}

int eddy_buf_append(eddy_buf *b, const void *p, uint32_t n) {
    uint8_t *at;
    if (n == 0) return 0;
    if (!(at = eddy_buf_reserve(b, n))) return -1;
    memcpy(at, p, n);
    b->len += n;
    return 0;
}

int eddy_buf_byte(eddy_buf *b, uint8_t c) {
    uint8_t *at = eddy_buf_reserve(b, 1);
    if (!at) return -1;
    *at = c;
    b->len++;
    return 0;
}

void eddy_headers_begin(eddy_header_iter *it, const eddy_record *r) {
    it->left = r->headers_len >= 4 ? get32(r->headers) : 0;
    it->next = it->left ? r->headers + 4 : NULL;
}

int eddy_headers_next(eddy_header_iter *it, eddy_header *h) {
    if (it->left == 0) return 0;
    h->key_len = get32(it->next);
    h->value_len = get32(it->next + 4);
    h->key = it->next + 8;
    h->value = h->key + h->key_len;
    it->next = h->value + h->value_len;
    it->left--;
    return 1;
}

/* Checks a headers block as abi.DecodeBatch does, so that the iterator can
 * trust it. */
static int headers_ok(const uint8_t *b, uint32_t len) {
    uint32_t n, j;
    uint64_t at = 4;
    if (len < 4) return 0;
    n = get32(b);
    if (n > MAX_HEADERS || (uint64_t)n * 8 > len - 4) return 0;
    for (j = 0; j < n; j++) {
        uint64_t kl, vl;
        if (at + 8 > len) return 0;
        kl = get32(b + at);
        vl = get32(b + at + 4);
        at += 8;
        if (at + kl + vl > len) return 0;
        at += kl + vl;
    }
    return 1;
}

/* Whether [p, p+len) lies in the eddy_alloc buffer: the host must pass a
 * range of it, and checking means the guest never reads memory it does not
 * own. */
static int in_input(const uint8_t *p, uint32_t len) {
    uintptr_t base = (uintptr_t)input, at = (uintptr_t)p;
    return input != NULL && at >= base && (uint64_t)(at - base) + len <= input_cap;
}

static void end_batch(void) {
    emitting = 0;
    eddy__has_key = 0;
    eddy__key = NULL;
    eddy__key_len = 0;
}

static int32_t outside_input(const char *what, const uint8_t *p, uint32_t len) {
    eddy_fail("eddy: %s [%lu, %llu) is not inside the buffer returned by eddy_alloc", what,
              (unsigned long)(uintptr_t)p, (unsigned long long)(uintptr_t)p + len);
    return 1;
}

/* Version 1 unless eddy_keyed.c or eddy_aggregate.c is linked in: the
 * reference is weak, so without them the symbol's address is null. A
 * module that uses keyed state must link eddy_keyed.c (its functions are
 * there), so it declares version 2 exactly when it can import the version
 * 2 functions; a module links eddy_aggregate.c exactly when it exports
 * the aggregate functions of version 3. */
extern const int32_t eddy__abi_version __attribute__((weak));
/* 7 when eddy_fields.c is linked (version 7 includes every addition before
 * it, so it wins over the others). */
extern const int32_t eddy__fields_version __attribute__((weak));
/* eddy_fields.c's: hands the fields eddy_op_open declared to the host. */
extern int eddy__fields_commit(void) __attribute__((weak));

EXPORT("eddy_abi_version") int32_t eddy_export_abi_version(void) {
    if (&eddy__fields_version != NULL) return eddy__fields_version;
    return &eddy__abi_version != NULL ? eddy__abi_version : EDDY_ABI_VERSION;
}

/* Saves the reallocations a tiny configuration buffer followed by the first
 * batch would otherwise cause. */
#define MIN_INPUT (64u * 1024u)

EXPORT("eddy_alloc") uint8_t *eddy_export_alloc(uint32_t size) {
    uint64_t cap;
    if (input != NULL && size <= input_cap) return input;
    /* Grow geometrically, as the Go SDK does, so a slowly growing batch
     * size does not reallocate on every batch. */
    cap = size < MIN_INPUT ? MIN_INPUT : size;
    if (cap < 2 * (uint64_t)input_cap) cap = 2 * (uint64_t)input_cap;
    if (cap > UINT32_MAX / 2 + 1) cap = size;
    /* The ABI lets each call invalidate the previous buffer: free rather
     * than realloc, which would copy contents nobody needs. */
    free(input);
    input = malloc((size_t)cap);
    input_cap = input ? (uint32_t)cap : 0;
    return input; /* NULL is the ABI's 0: "cannot" */
}

EXPORT("eddy_open") int32_t eddy_export_open(const uint8_t *config, uint32_t len) {
    int rc;
    failed = 0;
    if (!in_input(config, len)) return outside_input("config", config, len);
    eddy__opening = 1;
    rc = eddy_op_open(config, len);
    if (rc == 0 && eddy__fields_commit != NULL) rc = eddy__fields_commit();
    eddy__opening = 0;
    return rc == 0 ? 0 : call_failed(rc);
}

uint32_t eddy__fields_row;
const uint8_t *eddy__batch;
uint32_t eddy__batch_len;

/* The row size of the current batch's field table, 0 for a batch without
 * one: eddy__run_input_batch sets it around its eddy__run_batch. */
static uint32_t batch_row;

int32_t eddy__run_input_batch(const uint8_t *batch, uint32_t len, int (*each)(const eddy_record *r)) {
    int32_t rc;
    batch_row = eddy__fields_row;
    rc = eddy__run_batch("batch", "input batch", batch, len, each);
    batch_row = 0;
    return rc;
}

int32_t eddy__run_batch(const char *range, const char *what, const uint8_t *batch, uint32_t len,
                        int (*each)(const eddy_record *r)) {
    uint32_t count, i;
    const uint8_t *table;
    failed = 0;
    if (!in_input(batch, len)) return outside_input(range, batch, len);
    if (len < HEADER_SIZE) {
        eddy_fail("eddy: %s: malformed: %u bytes is shorter than the header", what, len);
        return 1;
    }
    if (get32(batch) != BATCH_MAGIC) {
        eddy_fail("eddy: %s: malformed: bad magic %#08x", what, get32(batch));
        return 1;
    }
    count = get32(batch + 4);
    if (count > MAX_RECORDS || HEADER_SIZE + (uint64_t)count * ENTRY_SIZE > len) {
        eddy_fail("eddy: %s: malformed: %u records do not fit in %u bytes", what, count, len);
        return 1;
    }
    if (batch_row && HEADER_SIZE + (uint64_t)count * (ENTRY_SIZE + batch_row) > len) {
        eddy_fail("eddy: %s: malformed: the field table of %u records does not fit in %u bytes", what, count, len);
        return 1;
    }
    table = batch_row ? batch + HEADER_SIZE + ENTRY_SIZE * count : NULL;
    /* Every record is checked before the first is processed, as
     * abi.DecodeBatch does, so a bad batch fails without partial output. */
    for (i = 0; i < count; i++) {
        const uint8_t *e = batch + HEADER_SIZE + ENTRY_SIZE * i;
        uint64_t ko = get32(e + 8), kl = get32(e + 12), vo = get32(e + 16), vl = get32(e + 20);
        uint64_t ho = get32(e + 24), hl = get32(e + 28);
        if (ko + kl > len || vo + vl > len || (hl != 0 && (ho + hl > len || !headers_ok(batch + ho, (uint32_t)hl)))) {
            eddy_fail("eddy: %s: malformed: record %u has a range outside the %u-byte batch or bad headers", what, i, len);
            return 1;
        }
    }
    emitting = 1;
    eddy__has_key = 1;
    eddy__batch = batch;
    eddy__batch_len = len;
    for (i = 0; i < count; i++) {
        const uint8_t *e = batch + HEADER_SIZE + ENTRY_SIZE * i;
        eddy_record r;
        int rc;
        memcpy(&r.timestamp, e, 8);
        r.key = batch + get32(e + 8);
        r.key_len = get32(e + 12);
        r.value = batch + get32(e + 16);
        r.value_len = get32(e + 20);
        r.headers_len = get32(e + 28);
        r.headers = r.headers_len ? batch + get32(e + 24) : NULL;
        r.fields_row = table ? table + batch_row * i : NULL;
        eddy__key = r.key;
        eddy__key_len = r.key_len;
        rc = each(&r);
        if (rc != 0) {
            end_batch();
            return call_failed(rc);
        }
    }
    flush();
    end_batch();
    return 0;
}

uint32_t eddy__batch_count(const uint8_t *batch) { return get32(batch + 4); }

/* Weak: eddy_window.c replaces it with one that hands eddy_op_window the
 * whole batch, and eddy_aggregate.c with one that refuses every batch. */
__attribute__((weak)) EXPORT("eddy_process") int32_t eddy_export_process(const uint8_t *batch, uint32_t len) {
    return eddy__run_input_batch(batch, len, eddy_op_process);
}

int32_t eddy__run_call(int (*body)(void)) {
    int rc;
    failed = 0;
    emitting = 1;
    rc = body();
    emitting = 0;
    if (rc != 0) return call_failed(rc);
    flush();
    return 0;
}

EXPORT("eddy_close") int32_t eddy_export_close(void) {
    int rc;
    failed = 0;
    emitting = 1;
    rc = eddy_op_close();
    emitting = 0;
    if (rc != 0) return call_failed(rc);
    /* flush is valid here: the ABI allows emit until eddy_close returns. */
    flush();
    return 0;
}

/* Defaults for operators that need no configuration or final flush. */
__attribute__((weak)) int eddy_op_open(const uint8_t *config, uint32_t len) {
    (void)config;
    (void)len;
    return 0;
}

__attribute__((weak)) int eddy_op_close(void) { return 0; }
