/*
 * burn: a CPU-bound operator, the noisy neighbour of the fair-sharing
 * tests and of `eddy-bench -only noisy`. For every record it spins a busy
 * loop (the first number in its configuration, e.g. {"spins": 20000};
 * default 20000 iterations) and emits nothing.
 */
#include "eddy.h"

EDDY_VERSION(1)
EDDY_STATIC_ALLOC(1 << 20)
EDDY_CLOSE_OK

static uint32_t spins_per_record = 20000;
static volatile uint32_t sink;

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	uint32_t n = 0, i = 0;
	while (i < len && (cfg[i] < '0' || cfg[i] > '9'))
		i++;
	if (i == len)
		return 0;
	for (; i < len && cfg[i] >= '0' && cfg[i] <= '9'; i++)
		n = n * 10 + (cfg[i] - '0');
	spins_per_record = n;
	return 0;
}

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)len;
	uint32_t count = (uint32_t)in[4] | (uint32_t)in[5] << 8 | (uint32_t)in[6] << 16 | (uint32_t)in[7] << 24;
	for (uint32_t r = 0; r < count; r++)
		for (uint32_t i = 0; i < spins_per_record; i++)
			sink += i;
	return 0;
}
