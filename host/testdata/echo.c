/*
 * echo: the well-behaved operator. It decodes every input batch and encodes
 * the same records into its own output buffer the way the SDKs do (entries
 * from the front, data from the back), emits it in one call, and on close
 * emits one trailer record "eddy.echo.count" = number of records seen.
 * It logs its configuration on open so tests see the log import work.
 */
#include <stdlib.h>
#include <string.h>

#include "eddy.h"

static uint8_t *in_buf;
static uint32_t in_cap;
static uint8_t *out_buf;
static uint32_t out_cap;
static uint64_t seen;

static uint32_t rd32(const uint8_t *p) {
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

EDDY_VERSION(1)

EXPORT("eddy_alloc") uint8_t *eddy_alloc(uint32_t size) {
	if (size <= in_cap && in_buf)
		return in_buf;
	free(in_buf);
	in_buf = malloc(size ? size : 1);
	in_cap = in_buf ? size : 0;
	return in_buf;
}

static int reserve_out(uint32_t n) {
	if (n <= out_cap)
		return 1;
	free(out_buf);
	out_buf = malloc(n);
	out_cap = out_buf ? n : 0;
	return out_buf != 0;
}

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	static const char prefix[] = "echo opened with config ";
	char msg[256];
	uint32_t n = sizeof prefix - 1;
	memcpy(msg, prefix, n);
	if (len > sizeof msg - n)
		len = sizeof msg - n;
	memcpy(msg + n, cfg, len);
	eddy_log(1, msg, n + len);
	return 0;
}

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)len;
	uint32_t count = rd32(in + 4);
	uint32_t need = 8 + 32 * count;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = in + 8 + 32 * i;
		need += rd32(e + 12) + rd32(e + 20) + rd32(e + 28);
	}
	if (!reserve_out(need)) {
		static const char msg[] = "echo: out of memory";
		eddy_fail(msg, sizeof msg - 1);
		return 1;
	}
	uint32_t data = need;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = in + 8 + 32 * i;
		uint8_t *o = out_buf + 8 + 32 * i;
		memcpy(o, e, 8); /* timestamp */
		uint32_t hlen = rd32(e + 28), vlen = rd32(e + 20), klen = rd32(e + 12);
		data -= hlen;
		memcpy(out_buf + data, in + rd32(e + 24), hlen);
		wr32(o + 24, hlen ? data : 0);
		wr32(o + 28, hlen);
		data -= vlen;
		memcpy(out_buf + data, in + rd32(e + 16), vlen);
		wr32(o + 16, data);
		wr32(o + 20, vlen);
		data -= klen;
		memcpy(out_buf + data, in + rd32(e + 8), klen);
		wr32(o + 8, data);
		wr32(o + 12, klen);
	}
	wr32(out_buf, 0x31424445);
	wr32(out_buf + 4, count);
	eddy_emit(out_buf, need);
	seen += count;
	return 0;
}

EXPORT("eddy_close") int32_t eddy_close(void) {
	static const char key[] = "eddy.echo.count";
	char val[24];
	int n = 0;
	uint64_t v = seen;
	do {
		val[sizeof val - 1 - n++] = '0' + v % 10;
		v /= 10;
	} while (v);
	uint8_t out[8 + 32 + sizeof key - 1 + sizeof val];
	uint32_t klen = sizeof key - 1;
	uint32_t total = 8 + 32 + klen + n;
	memset(out, 0, 40);
	wr32(out, 0x31424445);
	wr32(out + 4, 1);
	memset(out + 8, 0, 4);
	wr32(out + 12, 0x80000000u); /* timestamp: none (-2^63) */
	wr32(out + 16, 40);
	wr32(out + 20, klen);
	wr32(out + 24, 40 + klen);
	wr32(out + 28, n);
	memcpy(out + 40, key, klen);
	memcpy(out + 40 + klen, val + sizeof val - n, n);
	eddy_emit(out, total);
	return 0;
}
