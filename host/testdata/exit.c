/* exit: calls WASI proc_exit(3) from eddy_process. */
#include <wasi/api.h>

#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	__wasi_proc_exit(3);
}
