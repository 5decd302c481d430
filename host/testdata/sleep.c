/*
 * sleep: eddy_process sleeps for a minute through WASI (poll_oneoff). The
 * host must still end the call at its deadline, although the guest is
 * blocked in a host function rather than running code.
 */
#include <unistd.h>

#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	sleep(60);
	return 0;
}
