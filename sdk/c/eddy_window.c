/*
 * eddy_window.c - window functions in C; see eddy_window.h and abi/ABI.md,
 * "Window functions". Mirrors sdk/go/window.
 */
#include "eddy_window.h"

#include <stdlib.h>
#include <string.h>

#include "eddy_internal.h"

#define EXPORT(name) __attribute__((export_name(name)))

/* The window's elements, collected as eddy__run_batch hands them over;
 * the array grows to the largest window and is reused. */
static eddy_record *elems;
static uint32_t elems_cap;

static const uint8_t *batch_of_window;
static uint32_t count, at;
static eddy_window window;

static int descriptor(const eddy_record *r) {
    if (r->value_len != EDDY_WINDOW_DESCRIPTOR_LEN) {
        eddy_fail("window: record 0 is not a window descriptor: its value has %u bytes, want %u; is the module used as a window node's apply?",
                  r->value_len, EDDY_WINDOW_DESCRIPTOR_LEN);
        return 1;
    }
    window.key = r->key;
    window.key_len = r->key_len;
    memcpy(&window.start, r->value, 8);
    memcpy(&window.end, r->value + 8, 8);
    if (count - 1 > elems_cap) {
        /* At least double, so that windows growing one element at a time
         * do not reallocate every time. */
        uint64_t cap = 2 * (uint64_t)elems_cap;
        if (cap < count - 1) cap = count - 1;
        free(elems);
        elems_cap = 0;
        if (!(elems = malloc((size_t)cap * sizeof *elems))) {
            eddy_fail("window: out of memory for a window of %u elements", count - 1);
            return 1;
        }
        elems_cap = (uint32_t)cap;
    }
    return 0;
}

/* Collects the elements and calls eddy_op_window at the last record of the
 * batch: eddy__run_batch has checked the whole batch before the first, so
 * its count is known then. */
static int each(const eddy_record *r) {
    int rc = 0;
    if (at == 0) {
        count = eddy__batch_count(batch_of_window);
        rc = descriptor(r);
    } else {
        elems[at - 1] = *r;
    }
    if (rc == 0 && ++at == count) rc = eddy_op_window(&window, elems, count - 1);
    return rc;
}

/* Replaces eddy.c's weak eddy_process: each batch is one window, whole. */
EXPORT("eddy_process") int32_t eddy_export_process(const uint8_t *batch, uint32_t len) {
    int32_t st;
    batch_of_window = batch;
    count = 0;
    at = 0;
    st = eddy__run_input_batch(batch, len, each);
    if (st == 0 && at == 0) {
        eddy_fail("window: an empty batch: a window function's batch starts with the window's descriptor; is the module used as a window node's apply?");
        return 1;
    }
    return st;
}

/* eddy.c's eddy_process, replaced above, refers to this. A window function
 * defines eddy_op_window instead. */
int eddy_op_process(const eddy_record *r) {
    (void)r;
    eddy_fail("window: eddy_op_process called in a window function module");
    return 1;
}
