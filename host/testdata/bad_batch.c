/* bad_batch: emits bytes that are in bounds but are not a batch. */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	static const char junk[] = "this is not an eddy batch";
	eddy_emit(junk, sizeof junk - 1);
	return 0;
}
