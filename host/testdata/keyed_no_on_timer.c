/* keyed_no_on_timer: imports eddy.timer_register but does not export
 * eddy_on_timer, so the timers it sets could never be handed to it:
 * refused when it is compiled. */
#include "eddy.h"

__attribute__((import_module("eddy"), import_name("timer_register"))) void timer_register(int32_t kind,
                                                                                         const void *k,
                                                                                         uint32_t kl, int64_t ts);

EDDY_VERSION(2)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	timer_register(0, in, len, 0);
	return 0;
}
