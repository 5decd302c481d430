/* env_import: imports a function from a module that is neither eddy nor WASI. */
#include "eddy.h"

__attribute__((import_module("env"), import_name("host_thing"))) void host_thing(void);

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	host_thing();
	return 0;
}
