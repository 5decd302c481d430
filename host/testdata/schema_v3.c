/* schema_v3: declares ABI version 3 but imports eddy.state_get2, which only
 * version 4 provides: refused when it is compiled. */
#include "eddy.h"

__attribute__((import_module("eddy"), import_name("state_get2"))) int32_t state_get2(int32_t id, const void *k,
                                                                                    uint32_t kl, void *dst,
                                                                                    uint32_t cap, uint32_t *schema);

EDDY_VERSION(3)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	uint32_t schema;
	return state_get2(0, in, len, 0, 0, &schema) < 0;
}
