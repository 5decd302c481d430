/* fail: reports an operator error through the fail import and status 1. */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	static const char msg[] = "bad record";
	eddy_fail(msg, sizeof msg - 1);
	return 1;
}
