/* schema_hostile: misuses the version 4 imports, one way per config (the
 * config's first byte): 'l' declares a list state with a schema version,
 * 't' declares "count" twice with different versions; otherwise "count" is
 * declared with schema 1 and eddy_process reads it with a schema_ptr
 * outside the memory. Each is a trap of the task. */
#include "eddy.h"

IMPORT("state_declare2") int32_t state_declare2(int32_t kind, const char *name, uint32_t len, int64_t ttl,
                                                uint32_t schema);
IMPORT("state_get2") int32_t state_get2(int32_t id, const void *k, uint32_t kl, void *dst, uint32_t cap,
                                        uint32_t *schema);

EDDY_VERSION(4)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_CLOSE_OK

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	if (len > 0 && cfg[0] == 'l') return state_declare2(1, "events", 6, 0, 1) < 0;
	if (len > 0 && cfg[0] == 't') state_declare2(0, "count", 5, 0, 1);
	return state_declare2(0, "count", 5, 0, len > 0 && cfg[0] == 't' ? 2 : 1) < 0;
}

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)len;
	/* The key of the batch's first record: its offset and length. */
	const uint8_t *key = in + *(const uint32_t *)(in + 16);
	uint32_t key_len = *(const uint32_t *)(in + 20);
	return state_get2(0, key, key_len, 0, 0, (uint32_t *)0xfffffff0u) < 0;
}
