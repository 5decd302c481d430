/*
 * emit_tiny_flood: emits a batch of one empty record in an endless loop:
 * a flood of records that each cost the host an abi.Record whatever their
 * size, which only Config.MaxEmitRecords stops before the deadline.
 */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

static uint32_t batch[2 + 8] = {0x31424445, 1};

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	for (;;) {
		eddy_emit(batch, sizeof batch);
	}
}
