/*
 * parts: a version 7 module (abi/ABI.md, "Version 7") for the host's
 * tests of values in parts and number paths. Its configuration is a mode
 * byte, then for 'F' a field list:
 *
 *   'F' list   declare list in eddy_open; for each input record emit one
 *              whose value is the record's row of the field table, raw
 *   'P'        for each input record emit one, same key and timestamp,
 *              whose value is a part list: the second half of the value,
 *              a "," from static data, an empty part, the first half
 *   'O'        emit one record with a part that ends past the memory
 *   'B'        emit one record whose 1,000 parts are each the whole memory
 *
 * Built with -DVERSION=6 as parts_v6.wasm, which does the same but
 * declares version 6.
 */
#include <string.h>

#include "eddy.h"

#ifndef VERSION
#define VERSION 7
#endif

IMPORT("fields") void eddy_fields(const void *ptr, uint32_t len);

EDDY_VERSION(VERSION)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_CLOSE_OK

#define PARTS 0x80000000u

static uint8_t mode;
static uint8_t list[1024];
static uint32_t npaths;
static uint8_t out[1 << 16];
static const char comma[] = ",";

static uint32_t rd32(const uint8_t *p) {
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	if (len < 1 || len - 1 > sizeof list) return 1;
	mode = cfg[0];
	memcpy(list, cfg + 1, len - 1);
	npaths = len >= 5 ? rd32(list) : 0;
	if (mode == 'F') eddy_fields(list, len - 1);
	return 0;
}

/* entry writes entry i of out: timestamp and key of e, value (off, len). */
static void entry(uint32_t i, const uint8_t *in, const uint8_t *e, uint32_t *at, uint32_t voff, uint32_t vlen) {
	uint8_t *o = out + 8 + 32 * i;
	uint32_t klen = rd32(e + 12);
	*at -= klen;
	memcpy(out + *at, in + rd32(e + 8), klen);
	memcpy(o, e, 8);
	wr32(o + 8, *at);
	wr32(o + 12, klen);
	wr32(o + 16, voff);
	wr32(o + 20, vlen);
	wr32(o + 24, 0);
	wr32(o + 28, 0);
}

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)len;
	uint32_t count = rd32(in + 4), at = sizeof out;
	uint32_t memsize = (uint32_t)__builtin_wasm_memory_size(0) * 65536;
	if (mode == 'O' || mode == 'B') {
		uint32_t n = mode == 'O' ? 1 : 1000;
		at -= 8 * n;
		for (uint32_t p = 0; p < n; p++) {
			wr32(out + at + 8 * p, mode == 'O' ? memsize - 4 : 0);
			wr32(out + at + 8 * p + 4, mode == 'O' ? 8 : memsize);
		}
		count = 1;
		entry(0, in, in + 8, &at, at, PARTS | n);
	} else {
		uint32_t table = 8 + 32 * count, row = 4 + 8 * npaths;
		for (uint32_t i = 0; i < count; i++) {
			const uint8_t *e = in + 8 + 32 * i;
			uint32_t voff = rd32(e + 16), vlen = rd32(e + 20);
			if (mode == 'F') {
				at -= row;
				memcpy(out + at, in + table + row * i, row);
				entry(i, in, e, &at, at, row);
				continue;
			}
			uint32_t h = vlen / 2;
			uint32_t parts[8] = {
				(uint32_t)(uintptr_t)(in + voff + h), vlen - h,
				(uint32_t)(uintptr_t)comma, 1,
				0, 0,
				(uint32_t)(uintptr_t)(in + voff), h,
			};
			at -= sizeof parts;
			memcpy(out + at, parts, sizeof parts);
			entry(i, in, e, &at, at, PARTS | 4);
		}
	}
	wr32(out, 0x31424445);
	wr32(out + 4, count);
	eddy_emit(out, sizeof out);
	return 0;
}
