/*
 * Declarations shared by the test operator modules: the Eddy ABI version 1
 * imports (see abi/ABI.md) and small helpers so that each hostile module only
 * spells out the part it is testing. Written by hand on purpose: these
 * fixtures test the host, so they must not depend on an SDK.
 */
#ifndef EDDY_TEST_H
#define EDDY_TEST_H

#include <stdint.h>

#define EXPORT(name) __attribute__((export_name(name)))
#define IMPORT(name) __attribute__((import_module("eddy"), import_name(name)))

IMPORT("emit") void eddy_emit(const void *ptr, uint32_t len);
IMPORT("log") void eddy_log(int32_t level, const void *ptr, uint32_t len);
IMPORT("fail") void eddy_fail(const void *ptr, uint32_t len);

/* One static input buffer is enough for the small batches the tests send. */
#define EDDY_STATIC_ALLOC(cap)                                               \
	static uint8_t eddy_static_buf[cap];                                     \
	EXPORT("eddy_alloc") uint8_t *eddy_alloc(uint32_t size) {                \
		return size <= sizeof eddy_static_buf ? eddy_static_buf : 0;         \
	}

#define EDDY_VERSION(v)                                                      \
	EXPORT("eddy_abi_version") int32_t eddy_abi_version(void) { return v; }

#define EDDY_OPEN_OK                                                         \
	EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) { \
		(void)cfg;                                                           \
		(void)len;                                                           \
		return 0;                                                            \
	}

#define EDDY_CLOSE_OK                                                        \
	EXPORT("eddy_close") int32_t eddy_close(void) { return 0; }

#endif
