/*
 * eddy_keyed_schema.c - linking this file besides eddy_keyed.c makes the
 * module declare ABI version 4, which eddy_value_state2 and
 * eddy_value_get2 need (see eddy_keyed.h and abi/ABI.md, "Version 4").
 * The functions themselves live in eddy_keyed.c, next to the state they
 * share; this file only sets the version, because nothing in a module can
 * tell at run time which functions were linked, and the host reads the
 * version before eddy_open.
 */
#include "eddy_internal.h"
#include "eddy_keyed.h"

/* Replaces eddy_keyed.c's weak version 2. */
const int32_t eddy__abi_version = EDDY_SCHEMA_ABI_VERSION;

/* Referred to by the schema functions: see eddy_keyed.c. */
const int32_t eddy__schema_linked = EDDY_SCHEMA_ABI_VERSION;
