/*
 * eddy_keyed_co.c - linking this file besides eddy_keyed.c makes the
 * module a two-input operator: it declares ABI version 5 and exports
 * eddy_process2, which hands each record to eddy_op_process_left or
 * eddy_op_process_right (see eddy_keyed.h and abi/ABI.md, "Version 5").
 */
#include "eddy_internal.h"
#include "eddy_keyed.h"

#define EXPORT(name) __attribute__((export_name(name)))

/* Replaces eddy_keyed.c's weak version 2. */
const int32_t eddy__abi_version = EDDY_CO_ABI_VERSION;

/* Version 5 includes the schema functions of version 4: see
 * eddy_keyed_schema.c, which defines the same two symbols. */
const int32_t eddy__schema_linked = EDDY_SCHEMA_ABI_VERSION;

static int bad_input(const eddy_record *r) {
    (void)r;
    eddy_fail("eddy: eddy_process2 called for an input other than 0 and 1");
    return 1;
}

EXPORT("eddy_process2") int32_t eddy_export_process2(uint32_t input, const uint8_t *batch, uint32_t len) {
    switch (input) {
    case EDDY_LEFT:
        return eddy__run_input_batch(batch, len, eddy_op_process_left);
    case EDDY_RIGHT:
        return eddy__run_input_batch(batch, len, eddy_op_process_right);
    }
    return eddy__run_batch("batch", "input batch", batch, len, bad_input);
}

/* eddy.c's eddy_process calls this: the host never calls eddy_process on
 * a module that exports eddy_process2, so a call means a host that does
 * not know two-input operators. */
int eddy_op_process(const eddy_record *r) {
    (void)r;
    eddy_fail("eddy: this module is a two-input operator (it links eddy_keyed_co.c): "
              "it takes records through eddy_process2, not eddy_process");
    return 1;
}
