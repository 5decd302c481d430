/* bad_import_sig: imports eddy.emit with one parameter instead of two. */
#include <stdint.h>

#define EXPORT(name) __attribute__((export_name(name)))

__attribute__((import_module("eddy"), import_name("emit"))) void bad_emit(uint32_t ptr);

static uint8_t buf[1 << 16];

EXPORT("eddy_abi_version") int32_t eddy_abi_version(void) { return 1; }
EXPORT("eddy_alloc") uint8_t *eddy_alloc(uint32_t size) { return size <= sizeof buf ? buf : 0; }
EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	(void)cfg;
	(void)len;
	return 0;
}
EXPORT("eddy_close") int32_t eddy_close(void) { return 0; }
EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)len;
	bad_emit((uint32_t)(uintptr_t)in);
	return 0;
}
