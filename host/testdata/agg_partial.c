/* agg_partial: exports eddy_agg_add alone, and no eddy_process (refused). */
#include "eddy.h"

EDDY_STATIC_ALLOC(64)
EDDY_VERSION(3)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_agg_add") int32_t eddy_agg_add(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	return 0;
}
