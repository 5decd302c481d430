/*
 * grow_bomb: grows its memory one page at a time until memory.grow fails
 * (returns -1 at the host's limit), then traps as an allocator would.
 */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_OPEN_OK
EDDY_CLOSE_OK

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	while (__builtin_wasm_memory_grow(0, 1) != (__SIZE_TYPE__)-1) {
	}
	__builtin_trap();
}
