/* bad_import: imports eddy.nope, which no host version provides. */
#include "eddy.h"

IMPORT("nope") void eddy_nope(void);

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	eddy_nope();
	return 0;
}
