/* abi_v8: declares an ABI version this host does not support. */
#include "eddy.h"

EDDY_VERSION(8)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	return 0;
}
