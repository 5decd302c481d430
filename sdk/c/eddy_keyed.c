/*
 * eddy_keyed.c - keyed state, timers and event time for C operators (ABI
 * version 2); see eddy_keyed.h and abi/ABI.md. Mirrors sdk/go/keyed.
 */
#include "eddy_keyed.h"

#include <stdlib.h>
#include <string.h>

#include "eddy_internal.h"

#define IMPORT(name) __attribute__((import_module("eddy"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

/* Linking this file makes the module declare version 2 (see eddy.c), or
 * version 4 with eddy_keyed_schema.c, whose strong definition replaces this
 * weak one. */
__attribute__((weak)) const int32_t eddy__abi_version = EDDY_KEYED_ABI_VERSION;
const int32_t eddy__stateful_or_aggregate = EDDY_KEYED_ABI_VERSION;

/* Defined by eddy_keyed_schema.c only: the schema functions refer to it, so
 * a module that calls them without linking that file (and would declare
 * version 2 while importing version 4 functions) fails to link. */
extern const int32_t eddy__schema_linked;

IMPORT("state_declare") int32_t eddy_host_state_declare(int32_t kind, const char *name, uint32_t name_len, int64_t ttl_ms);
IMPORT("state_get") int32_t eddy_host_state_get(int32_t id, const uint8_t *key, uint32_t key_len, uint8_t *dst, uint32_t cap);
IMPORT("state_put") void eddy_host_state_put(int32_t id, const uint8_t *key, uint32_t key_len, const uint8_t *v, uint32_t n);
IMPORT("state_clear") void eddy_host_state_clear(int32_t id, const uint8_t *key, uint32_t key_len);
IMPORT("state_append") void eddy_host_state_append(int32_t id, const uint8_t *key, uint32_t key_len, const uint8_t *v, uint32_t n);
IMPORT("state_list") int32_t eddy_host_state_list(int32_t id, const uint8_t *key, uint32_t key_len, uint8_t *dst, uint32_t cap);
IMPORT("state_map_get") int32_t eddy_host_state_map_get(int32_t id, const uint8_t *key, uint32_t key_len, const uint8_t *uk,
                                                         uint32_t uk_len, uint8_t *dst, uint32_t cap);
IMPORT("state_map_put") void eddy_host_state_map_put(int32_t id, const uint8_t *key, uint32_t key_len, const uint8_t *uk,
                                                      uint32_t uk_len, const uint8_t *v, uint32_t n);
IMPORT("state_map_delete") void eddy_host_state_map_delete(int32_t id, const uint8_t *key, uint32_t key_len, const uint8_t *uk,
                                                            uint32_t uk_len);
IMPORT("state_map_entries") int32_t eddy_host_state_map_entries(int32_t id, const uint8_t *key, uint32_t key_len, uint8_t *dst,
                                                                 uint32_t cap);
IMPORT("timer_register") void eddy_host_timer_register(int32_t kind, const uint8_t *key, uint32_t key_len, int64_t ts);
IMPORT("timer_delete") void eddy_host_timer_delete(int32_t kind, const uint8_t *key, uint32_t key_len, int64_t ts);
IMPORT("current_watermark") int64_t eddy_host_current_watermark(void);
IMPORT("processing_time") int64_t eddy_host_processing_time(void);
IMPORT("state_declare2") int32_t eddy_host_state_declare2(int32_t kind, const char *name, uint32_t name_len, int64_t ttl_ms,
                                                           uint32_t schema);
IMPORT("state_get2") int32_t eddy_host_state_get2(int32_t id, const uint8_t *key, uint32_t key_len, uint8_t *dst, uint32_t cap,
                                                   uint32_t *schema);

enum { KIND_VALUE = 0, KIND_LIST = 1, KIND_MAP = 2 };

/* A buffer the host copies state into; it grows and is never shrunk. */
typedef struct buffer {
    uint8_t *p;
    uint32_t cap;
} buffer;

struct eddy_state_s {
    int32_t id;
    int32_t kind;
    buffer get;  /* value and map gets */
    buffer scan; /* lists and map entries */
    char name[48]; /* for messages, maybe truncated */
};

/* Most values fit, so most reads take one host call. */
#define INITIAL_BUFFER 256u

static const char *kind_name(int32_t kind) { return kind == KIND_VALUE ? "value" : kind == KIND_LIST ? "list" : "map"; }

static int declarable(int32_t kind, const char *name) {
    if (!eddy__opening) {
        eddy_fail("eddy: %s state %s declared outside eddy_op_open", kind_name(kind), name);
        return 0;
    }
    return 1;
}

/* Wraps the id the host returned in a handle. state_declare and
 * state_declare2 are called by functions of their own, so that wasm-ld
 * links (and the module imports) only the one a module uses. */
static eddy_state handle(int32_t kind, const char *name, int32_t id, const char *import) {
    eddy_state s;
    if (id < 0) {
        eddy_fail("eddy: %s(%s) returned %d", import, name, id);
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (!s) {
        eddy_fail("eddy: out of memory declaring state %s", name);
        return NULL;
    }
    s->id = id;
    s->kind = kind;
    strncpy(s->name, name, sizeof s->name - 1);
    return s;
}

static eddy_state declare(int32_t kind, const char *name, int64_t ttl_ms) {
    if (!declarable(kind, name)) return NULL;
    return handle(kind, name, eddy_host_state_declare(kind, name, (uint32_t)strlen(name), ttl_ms), "state_declare");
}

eddy_state eddy_value_state2(const char *name, int64_t ttl_ms, uint32_t schema) {
    if (eddy__schema_linked != EDDY_SCHEMA_ABI_VERSION || !declarable(KIND_VALUE, name)) return NULL;
    return handle(KIND_VALUE, name, eddy_host_state_declare2(KIND_VALUE, name, (uint32_t)strlen(name), ttl_ms, schema),
                  "state_declare2");
}

eddy_state eddy_value_state(const char *name, int64_t ttl_ms) { return declare(KIND_VALUE, name, ttl_ms); }
eddy_state eddy_list_state(const char *name, int64_t ttl_ms) { return declare(KIND_LIST, name, ttl_ms); }
eddy_state eddy_map_state(const char *name, int64_t ttl_ms) { return declare(KIND_MAP, name, ttl_ms); }

/* Checks that s can be used now, with the current key. */
static int usable(eddy_state s, int32_t kind, const char *what) {
    if (!s) {
        eddy_fail("eddy: %s on a NULL state (its declaration failed)", what);
        return 0;
    }
    if (kind >= 0 && s->kind != kind) {
        eddy_fail("eddy: %s on %s, a %s state", what, s->name, kind_name(s->kind));
        return 0;
    }
    if (!eddy__has_key) {
        eddy_fail("eddy: %s on %s outside eddy_op_process and eddy_op_timer, where there is no current key", what, s->name);
        return 0;
    }
    return 1;
}

/* One of the imports that copy state into a buffer. Each has a function of
 * its own, passed by address, rather than one function switching on an
 * operation, so that wasm-ld links (and the module imports) only the ones
 * a module calls. */
typedef int32_t (*reader)(eddy_state s, const uint8_t *uk, uint32_t uk_len, buffer *b);

static int32_t read_value(eddy_state s, const uint8_t *uk, uint32_t uk_len, buffer *b) {
    (void)uk;
    (void)uk_len;
    return eddy_host_state_get(s->id, eddy__key, eddy__key_len, b->p, b->cap);
}

/* What state_get2 reported for the last read_value2. */
static uint32_t read_schema;

static int32_t read_value2(eddy_state s, const uint8_t *uk, uint32_t uk_len, buffer *b) {
    (void)uk;
    (void)uk_len;
    return eddy_host_state_get2(s->id, eddy__key, eddy__key_len, b->p, b->cap, &read_schema);
}

static int32_t read_list(eddy_state s, const uint8_t *uk, uint32_t uk_len, buffer *b) {
    (void)uk;
    (void)uk_len;
    return eddy_host_state_list(s->id, eddy__key, eddy__key_len, b->p, b->cap);
}

static int32_t read_map(eddy_state s, const uint8_t *uk, uint32_t uk_len, buffer *b) {
    return eddy_host_state_map_get(s->id, eddy__key, eddy__key_len, uk, uk_len, b->p, b->cap);
}

static int32_t read_entries(eddy_state s, const uint8_t *uk, uint32_t uk_len, buffer *b) {
    (void)uk;
    (void)uk_len;
    return eddy_host_state_map_entries(s->id, eddy__key, eddy__key_len, b->p, b->cap);
}

static int grow(buffer *b, uint32_t need, const eddy_state s) {
    uint64_t cap = (uint64_t)b->cap * 2;
    if (cap < need) cap = need;
    if (cap > UINT32_MAX) cap = need;
    free(b->p);
    b->p = malloc((size_t)cap);
    b->cap = b->p ? (uint32_t)cap : 0;
    if (!b->p) {
        eddy_fail("eddy: out of memory reading %u bytes of state %s", need, s->name);
        return 0;
    }
    return 1;
}

/* Reads into b, growing it as the host asks ("a result larger than dst_cap
 * means call again with a buffer that large"); returns the length,
 * EDDY_ABSENT or EDDY_ERROR. */
static int32_t fetch(reader op, eddy_state s, const uint8_t *uk, uint32_t uk_len, buffer *b) {
    if (!b->p && !grow(b, INITIAL_BUFFER, s)) return EDDY_ERROR;
    for (;;) {
        int32_t n = op(s, uk, uk_len, b);
        if (n == -1) return EDDY_ABSENT;
        if (n < -1) {
            eddy_fail("eddy: the host returned %d reading state %s", n, s->name);
            return EDDY_ERROR;
        }
        if ((uint32_t)n <= b->cap) return n;
        if (!grow(b, (uint32_t)n, s)) return EDDY_ERROR;
    }
}

int eddy_state_clear(eddy_state s) {
    if (!usable(s, -1, "eddy_state_clear")) return 1;
    eddy_host_state_clear(s->id, eddy__key, eddy__key_len);
    return 0;
}

int32_t eddy_value_get(eddy_state s, uint8_t **out) {
    int32_t n;
    *out = NULL;
    if (!usable(s, KIND_VALUE, "eddy_value_get")) return EDDY_ERROR;
    n = fetch(read_value, s, NULL, 0, &s->get);
    *out = n >= 0 ? s->get.p : NULL;
    return n;
}

int32_t eddy_value_get2(eddy_state s, uint8_t **out, uint32_t *schema) {
    int32_t n;
    *out = NULL;
    *schema = 0;
    if (!usable(s, KIND_VALUE, "eddy_value_get2")) return EDDY_ERROR;
    n = fetch(read_value2, s, NULL, 0, &s->get);
    if (n >= 0) {
        *out = s->get.p;
        *schema = read_schema;
    }
    return n;
}

int eddy_value_put(eddy_state s, const uint8_t *value, uint32_t len) {
    if (!usable(s, KIND_VALUE, "eddy_value_put")) return 1;
    eddy_host_state_put(s->id, eddy__key, eddy__key_len, value, len);
    return 0;
}

static uint32_t get32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Counts the "u32 len, bytes" frames of [p, p+n), or returns -1 if they do
 * not tile it exactly. */
static int64_t count_frames(const uint8_t *p, uint32_t n) {
    uint64_t at = 0;
    int64_t frames = 0;
    while (at < n) {
        uint32_t len;
        if (n - at < 4) return -1;
        len = get32(p + at);
        at += 4;
        if (len > n - at) return -1;
        at += len;
        frames++;
    }
    return frames;
}

/* Reads a list or map encoding into s->scan and points it at it; returns
 * the number of frames, or EDDY_ERROR. */
static int32_t scan(reader op, eddy_state s, eddy_iter *it, uint32_t frames_per_item, const char *what) {
    int64_t frames;
    int32_t n = fetch(op, s, NULL, 0, &s->scan);
    it->next = s->scan.p; /* after fetch, which may move the buffer */
    it->left = 0;
    if (n == EDDY_ERROR) return EDDY_ERROR;
    if (n == EDDY_ABSENT) return 0;
    frames = count_frames(s->scan.p, (uint32_t)n);
    if (frames < 0 || frames % frames_per_item != 0) {
        eddy_fail("eddy: the host returned a malformed %s for state %s", what, s->name);
        return EDDY_ERROR;
    }
    it->left = (uint32_t)(frames / frames_per_item);
    return (int32_t)it->left;
}

static void next_frame(eddy_iter *it, const uint8_t **p, uint32_t *len) {
    *len = get32(it->next);
    *p = it->next + 4;
    it->next += 4 + *len;
}

int eddy_list_add(eddy_state s, const uint8_t *value, uint32_t len) {
    if (!usable(s, KIND_LIST, "eddy_list_add")) return 1;
    eddy_host_state_append(s->id, eddy__key, eddy__key_len, value, len);
    return 0;
}

int32_t eddy_list_get(eddy_state s, eddy_iter *it) {
    it->next = NULL;
    it->left = 0;
    if (!usable(s, KIND_LIST, "eddy_list_get")) return EDDY_ERROR;
    return scan(read_list, s, it, 1, "list");
}

int eddy_list_next(eddy_iter *it, const uint8_t **value, uint32_t *len) {
    if (it->left == 0) return 0;
    next_frame(it, value, len);
    it->left--;
    return 1;
}

int32_t eddy_map_get(eddy_state s, const uint8_t *user_key, uint32_t user_key_len, uint8_t **out) {
    int32_t n;
    *out = NULL;
    if (!usable(s, KIND_MAP, "eddy_map_get")) return EDDY_ERROR;
    n = fetch(read_map, s, user_key, user_key_len, &s->get);
    *out = n >= 0 ? s->get.p : NULL;
    return n;
}

int eddy_map_put(eddy_state s, const uint8_t *user_key, uint32_t user_key_len, const uint8_t *value,
                 uint32_t len) {
    if (!usable(s, KIND_MAP, "eddy_map_put")) return 1;
    eddy_host_state_map_put(s->id, eddy__key, eddy__key_len, user_key, user_key_len, value, len);
    return 0;
}

int eddy_map_delete(eddy_state s, const uint8_t *user_key, uint32_t user_key_len) {
    if (!usable(s, KIND_MAP, "eddy_map_delete")) return 1;
    eddy_host_state_map_delete(s->id, eddy__key, eddy__key_len, user_key, user_key_len);
    return 0;
}

int32_t eddy_map_entries(eddy_state s, eddy_iter *it) {
    it->next = NULL;
    it->left = 0;
    if (!usable(s, KIND_MAP, "eddy_map_entries")) return EDDY_ERROR;
    return scan(read_entries, s, it, 2, "map");
}

int eddy_map_next(eddy_iter *it, const uint8_t **user_key, uint32_t *user_key_len, const uint8_t **value,
                  uint32_t *len) {
    if (it->left == 0) return 0;
    next_frame(it, user_key, user_key_len);
    next_frame(it, value, len);
    it->left--;
    return 1;
}

/* Checks a timer call; the caller then calls its import directly, so that
 * a module imports only timer_register or timer_delete if it calls only
 * one. */
static int timer_ok(const char *what, int kind) {
    if (kind != EDDY_EVENT_TIME && kind != EDDY_PROCESSING_TIME) {
        eddy_fail("eddy: %s: unknown timer kind %d", what, kind);
        return 0;
    }
    if (!eddy__has_key) {
        eddy_fail("eddy: %s outside eddy_op_process and eddy_op_timer, where there is no current key", what);
        return 0;
    }
    return 1;
}

int eddy_timer_register(int kind, int64_t ts) {
    if (!timer_ok("eddy_timer_register", kind)) return 1;
    eddy_host_timer_register(kind, eddy__key, eddy__key_len, ts);
    return 0;
}

int eddy_timer_delete(int kind, int64_t ts) {
    if (!timer_ok("eddy_timer_delete", kind)) return 1;
    eddy_host_timer_delete(kind, eddy__key, eddy__key_len, ts);
    return 0;
}

int64_t eddy_current_watermark(void) { return eddy_host_current_watermark(); }
int64_t eddy_processing_time(void) { return eddy_host_processing_time(); }

const uint8_t *eddy_current_key(uint32_t *len) {
    *len = eddy__has_key ? eddy__key_len : 0;
    return eddy__has_key ? eddy__key : NULL;
}

/* One fired timer: the batch loop has set the current key to its key. */
static int fire(const eddy_record *r) {
    eddy_timer t;
    if (r->value_len != 1 || r->value[0] > EDDY_PROCESSING_TIME) {
        eddy_fail("eddy: timer batch: a timer's value has %u bytes (first %d), want one byte: 0 (event time) or 1 (processing time)",
                  r->value_len, r->value_len ? r->value[0] : -1);
        return 1;
    }
    t.kind = r->value[0];
    t.timestamp = r->timestamp;
    t.key = r->key;
    t.key_len = r->key_len;
    return eddy_op_timer(&t);
}

/* The host writes the batch of fired timers where it writes input batches:
 * into the buffer eddy_alloc returned. */
EXPORT("eddy_on_timer") int32_t eddy_export_on_timer(const uint8_t *batch, uint32_t len) {
    return eddy__run_batch("timer batch", "timer batch", batch, len, fire);
}

__attribute__((weak)) int eddy_op_timer(const eddy_timer *t) {
    (void)t;
    eddy_fail("eddy: a timer fired, but the operator does not define eddy_op_timer");
    return 1;
}
