/* keyed_v1: declares ABI version 1 but imports eddy.state_get, which only
 * version 2 provides: refused when it is compiled. */
#include "eddy.h"

__attribute__((import_module("eddy"), import_name("state_get"))) int32_t state_get(int32_t id, const void *k,
                                                                                  uint32_t kl, void *dst,
                                                                                  uint32_t cap);

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	return state_get(0, in, len, 0, 0) < 0;
}
