/*
 * emit_flood: emits the same batch of one record with a 1 MiB value in an
 * endless loop, so that only the host's bound on what one call may emit
 * (Config.MaxEmitBytes) stops it before the deadline.
 */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

#define VALUE_SIZE (1 << 20)

static uint8_t batch[8 + 32 + VALUE_SIZE];

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	uint32_t *w = (uint32_t *)batch;
	w[0] = 0x31424445; /* magic */
	w[1] = 1;          /* count */
	/* entry: timestamp 0, empty key, the value after the entry, no headers */
	w[4] = 40;
	w[6] = 40;
	w[7] = VALUE_SIZE;
	for (;;) {
		eddy_emit(batch, sizeof batch);
	}
}
