/*
 * chatty: writes 1000 lines to stdout and 10 to stderr per batch, to test
 * that the host rate-limits guest output instead of flooding the task log.
 */
#include <stdio.h>

#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	for (int i = 0; i < 1000; i++)
		printf("chatty line %d\n", i);
	fflush(stdout);
	for (int i = 0; i < 10; i++)
		fprintf(stderr, "chatty error %d\n", i);
	return 0;
}
