/*
 * fields: a version 6 module that declares fields (abi/ABI.md, "Version
 * 6") and echoes what the host found. Its configuration is not JSON but a
 * mode byte and a field list, which the tests write:
 *
 *   'F' list   declare list in eddy_open
 *   '2' list   declare it twice in eddy_open (the second call traps)
 *   'P' list   declare it during the first eddy_process (traps)
 *   'N'        declare nothing
 *
 * For each input record it emits one record, same key and timestamp,
 * whose value is the row of the field table as text: the status digit,
 * then for each path "|" and the span's bytes, or "|-" when absent, or
 * "|!" when the span is not inside the record's value. With 'N' there is
 * no table: it emits the value unchanged.
 *
 * Built with -DTWO_INPUT as fields_co.wasm (exports eddy_process2 too) and
 * with -DVERSION=5 as fields_v5.wasm (imports fields but declares 5).
 */
#include <stdlib.h>
#include <string.h>

#include "eddy.h"

#ifndef VERSION
#define VERSION 6
#endif

IMPORT("fields") void eddy_fields(const void *ptr, uint32_t len);

EDDY_VERSION(VERSION)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_CLOSE_OK

static uint8_t mode;
static uint8_t list[1024];
static uint32_t list_len, npaths;
static uint8_t out[1 << 16];

static uint32_t rd32(const uint8_t *p) {
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	if (len < 1 || len - 1 > sizeof list) return 1;
	mode = cfg[0];
	list_len = len - 1;
	memcpy(list, cfg + 1, list_len);
	npaths = list_len >= 4 ? rd32(list) : 0;
	if (mode == 'F' || mode == '2') eddy_fields(list, list_len);
	if (mode == '2') eddy_fields(list, list_len);
	return 0;
}

static int32_t process(const uint8_t *in, uint32_t len) {
	(void)len;
	if (mode == 'P') eddy_fields(list, list_len);
	uint32_t count = rd32(in + 4);
	uint32_t table = 8 + 32 * count, row = 4 + 8 * npaths;
	uint32_t data = 8 + 32 * count, need = data;
	/* Values first, at the back of out; entries at the front. */
	uint32_t at = sizeof out;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = in + 8 + 32 * i;
		uint32_t voff = rd32(e + 16), vlen = rd32(e + 20);
		uint8_t text[4096];
		uint32_t n = 0;
		if (mode == 'N') {
			memcpy(text, in + voff, vlen);
			n = vlen;
		} else {
			const uint8_t *r = in + table + row * i;
			text[n++] = '0' + rd32(r);
			for (uint32_t j = 0; j < npaths; j++) {
				uint32_t off = rd32(r + 4 + 8 * j), l = rd32(r + 8 + 8 * j);
				text[n++] = '|';
				if (off == 0xFFFFFFFFu) {
					text[n++] = '-';
				} else if (off < voff || off + l > voff + vlen || l > sizeof text - n - 1) {
					text[n++] = '!';
				} else {
					memcpy(text + n, in + off, l);
					n += l;
				}
			}
		}
		uint32_t klen = rd32(e + 12);
		at -= n;
		memcpy(out + at, text, n);
		wr32(out + 8 + 32 * i + 16, at);
		wr32(out + 8 + 32 * i + 20, n);
		at -= klen;
		memcpy(out + at, in + rd32(e + 8), klen);
		wr32(out + 8 + 32 * i + 8, at);
		wr32(out + 8 + 32 * i + 12, klen);
		memcpy(out + 8 + 32 * i, e, 8);
		wr32(out + 8 + 32 * i + 24, 0);
		wr32(out + 8 + 32 * i + 28, 0);
	}
	(void)need;
	wr32(out, 0x31424445);
	wr32(out + 4, count);
	eddy_emit(out, sizeof out);
	return 0;
}

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) { return process(in, len); }

#ifdef TWO_INPUT
EXPORT("eddy_process2") int32_t eddy_process2(int32_t input, const uint8_t *in, uint32_t len) {
	(void)input;
	return process(in, len);
}
#endif
