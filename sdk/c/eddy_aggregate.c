/*
 * eddy_aggregate.c - aggregate modules in C (ABI version 3); see
 * eddy_aggregate.h and abi/ABI.md, "Aggregate modules". Mirrors
 * sdk/go/aggregate.
 */
#include "eddy_aggregate.h"

#include <string.h>

#include "eddy_internal.h"

#define EXPORT(name) __attribute__((export_name(name)))

#define GROUP_HEADER_KEY_LEN 4u

/* Linking this file makes the module declare version 3 (see eddy.c). */
const int32_t eddy__abi_version = EDDY_AGGREGATE_ABI_VERSION;
const int32_t eddy__stateful_or_aggregate = EDDY_AGGREGATE_ABI_VERSION; /* see eddy_internal.h */

/* An accumulator being folded lives in one of folds while the next one is
 * written into the other; result holds a result. They keep their memory
 * from call to call. */
static eddy_buf folds[2], result;

/* The fold of the batch being handled: its export's name, its record
 * count, the index of the next record, how many members of the current
 * group are still to come, and the accumulator folded so far (the
 * header's value, or one of folds). */
static const char *what;
static const uint8_t *batch_of_fold;
static uint32_t count, at, left;
static const uint8_t *acc;
static uint32_t acc_len;
static int w;

static int emit_value(const uint8_t *v, uint32_t n) { return eddy_emit_kv(NULL, 0, v, n, EDDY_NO_TIMESTAMP); }

/* The aggregate's own nonzero return is passed on, so that one without
 * eddy_fail is reported with its number. */
static int create(void) {
    int rc;
    folds[0].len = 0;
    if ((rc = eddy_op_agg_create(&folds[0]))) return rc;
    return emit_value(folds[0].data, folds[0].len);
}

EXPORT("eddy_agg_create") int32_t eddy_export_agg_create(void) { return eddy__run_call(create); }

/* Begins a group at its header (ABI.md, "Aggregate modules"): the key
 * counts the members that follow, the value is the accumulator to start
 * from. A group without members is answered at once. */
static int header(const eddy_record *r) {
    uint32_t n;
    if (r->key_len != GROUP_HEADER_KEY_LEN) {
        eddy_fail("aggregate: %s: record %u should be a group header, with a %u-byte key, but its key has %u bytes", what,
                  at, GROUP_HEADER_KEY_LEN, r->key_len);
        return 1;
    }
    memcpy(&n, r->key, 4);
    if (n > count - at - 1) {
        eddy_fail("aggregate: %s: the group header at record %u announces %u records, but only %u follow", what, at, n,
                  count - at - 1);
        return 1;
    }
    acc = r->value;
    acc_len = r->value_len;
    left = n;
    w = 0;
    return left == 0 ? emit_value(acc, acc_len) : 0;
}

/* Folds one member into the group's accumulator, with eddy_op_agg_merge
 * or eddy_op_agg_add, answering the group after its last member. */
static int member(const eddy_record *r, int merging) {
    eddy_buf *dst = &folds[w];
    int rc;
    dst->len = 0;
    rc = merging ? eddy_op_agg_merge(dst, acc, acc_len, r->value, r->value_len) : eddy_op_agg_add(dst, acc, acc_len, r);
    if (rc) return rc;
    acc = dst->data;
    acc_len = dst->len;
    w ^= 1;
    return --left == 0 ? emit_value(acc, acc_len) : 0;
}

static int each(const eddy_record *r, int merging) {
    int rc;
    /* eddy__run_batch has checked the whole batch before the first record. */
    if (at == 0) count = eddy__batch_count(batch_of_fold);
    rc = left > 0 ? member(r, merging) : header(r);
    at++;
    return rc;
}

static int each_add(const eddy_record *r) { return each(r, 0); }
static int each_merge(const eddy_record *r) { return each(r, 1); }

/* Every group is complete at the end of the batch: each header's count
 * was checked against the records that follow it. */
static int32_t fold(const char *name, const char *range, const uint8_t *batch, uint32_t len,
                    int (*step)(const eddy_record *r)) {
    what = name;
    batch_of_fold = batch;
    at = 0;
    left = 0;
    return eddy__run_batch(range, range, batch, len, step);
}

EXPORT("eddy_agg_add") int32_t eddy_export_agg_add(const uint8_t *batch, uint32_t len) {
    return fold("eddy_agg_add", "eddy_agg_add batch", batch, len, each_add);
}

EXPORT("eddy_agg_merge") int32_t eddy_export_agg_merge(const uint8_t *batch, uint32_t len) {
    return fold("eddy_agg_merge", "eddy_agg_merge batch", batch, len, each_merge);
}

static int each_result(const eddy_record *r) {
    int rc;
    result.len = 0;
    if ((rc = eddy_op_agg_result(&result, r->value, r->value_len))) return rc;
    return emit_value(result.data, result.len);
}

EXPORT("eddy_agg_result") int32_t eddy_export_agg_result(const uint8_t *batch, uint32_t len) {
    return eddy__run_batch("eddy_agg_result batch", "eddy_agg_result batch", batch, len, each_result);
}

/* Replaces eddy.c's weak eddy_process: an aggregate module is not an
 * operator, and says so for every batch, an empty one too. */
EXPORT("eddy_process") int32_t eddy_export_process(const uint8_t *batch, uint32_t len) {
    (void)batch;
    (void)len;
    eddy_fail("aggregate: this module is an aggregate module (it links eddy_aggregate.c), not an operator: "
              "use it as a window node's aggregate, which calls eddy_agg_add, not eddy_process");
    return 1;
}

/* eddy.c's eddy_process, replaced above, refers to this. */
int eddy_op_process(const eddy_record *r) {
    (void)r;
    eddy_fail("aggregate: eddy_op_process called in an aggregate module");
    return 1;
}
