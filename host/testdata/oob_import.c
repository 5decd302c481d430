/*
 * oob_import: passes the log or fail import a range outside its memory,
 * chosen by the configuration: "log" or "fail" (oob_emit covers emit).
 */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_CLOSE_OK

static char which;

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	which = len ? cfg[0] : 0;
	return 0;
}

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	if (which == 'l')
		eddy_log(1, (const void *)0xfffffff0, 32);
	else
		eddy_fail((const void *)0x10, 0xffffff00);
	return 1;
}
