/* wrong_sig: eddy_process takes one parameter instead of (ptr, len). */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in) {
	(void)in;
	return 0;
}
