/*
 * agg: an aggregate module (ABI version 3) written against the raw ABI.
 * The accumulator is 16 bytes: u64 count, i64 sum of the values read as
 * decimal integers. The result is {"n":count,"sum":sum}. The configuration
 * picks a misbehaviour for the host's tests: "short" emits no accumulator
 * from eddy_agg_add, "badjson" returns a result that is not JSON, "badacc"
 * fails on an accumulator that is not 16 bytes (it always checks).
 * agg_v2.c and agg_state.c include this file to build modules the host
 * must refuse.
 */
#include <stdio.h>
#include <string.h>

#include "eddy.h"

#ifndef AGG_VERSION
#define AGG_VERSION 3
#endif

EDDY_STATIC_ALLOC(1 << 16)
EDDY_VERSION(AGG_VERSION)
EDDY_CLOSE_OK

static int mode; /* 0 ok, 1 short, 2 badjson */
static uint8_t out[1 << 12];

#ifdef AGG_STATE
IMPORT("state_get") int32_t eddy_state_get(int32_t, const void *, uint32_t, void *, uint32_t);
EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)in;
	(void)len;
	return eddy_state_get(0, 0, 0, 0, 0);
}
#endif

static uint32_t rd32(const uint8_t *p) {
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	static const char *modes[] = {"\"short\"", "\"badjson\""};
	for (int m = 0; m < 2; m++) {
		size_t n = strlen(modes[m]);
		for (uint32_t i = 0; i + n <= len; i++)
			if (memcmp(cfg + i, modes[m], n) == 0)
				mode = m + 1;
	}
	return 0;
}

/* emit_one emits a batch of one record whose value is v[0:n]. */
static void emit_one(const void *v, uint32_t n) {
	wr32(out, 0x31424445);
	wr32(out + 4, 1);
	memset(out + 8, 0, 32);
	wr32(out + 24, 40);
	wr32(out + 28, n);
	memcpy(out + 40, v, n);
	eddy_emit(out, 40 + n);
}

static int32_t failf(const char *msg) {
	eddy_fail(msg, strlen(msg));
	return 1;
}

static int64_t parse(const uint8_t *p, uint32_t n) {
	int64_t v = 0, sign = 1;
	uint32_t i = 0;
	if (n > 0 && p[0] == '-')
		sign = -1, i = 1;
	for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
		v = v * 10 + (p[i] - '0');
	return sign * v;
}

/* fold handles the groups of an add (values are numbers) or a merge
 * (values are accumulators). */
static int32_t fold(const uint8_t *in, int merge) {
	uint32_t count = rd32(in + 4);
	const uint8_t *e = in + 8;
	for (uint32_t r = 0; r < count;) {
		if (rd32(e + 12) != 4)
			return failf("agg: group header key is not 4 bytes");
		uint32_t n = rd32(in + rd32(e + 8));
		if (rd32(e + 20) != 16)
			return failf("agg: accumulator is not 16 bytes");
		uint64_t acc[2];
		memcpy(acc, in + rd32(e + 16), 16);
		e += 32, r++;
		for (uint32_t k = 0; k < n; k++, e += 32, r++) {
			const uint8_t *v = in + rd32(e + 16);
			uint32_t vn = rd32(e + 20);
			if (merge) {
				uint64_t o[2];
				if (vn != 16)
					return failf("agg: accumulator is not 16 bytes");
				memcpy(o, v, 16);
				acc[0] += o[0], acc[1] += o[1];
			} else {
				acc[0]++, acc[1] += (uint64_t)parse(v, vn);
			}
		}
		if (!(mode == 1 && !merge))
			emit_one(acc, 16);
	}
	return 0;
}

EXPORT("eddy_agg_create") int32_t eddy_agg_create(void) {
	uint64_t acc[2] = {0, 0};
	emit_one(acc, 16);
	return 0;
}

EXPORT("eddy_agg_add") int32_t eddy_agg_add(const uint8_t *in, uint32_t len) {
	(void)len;
	return fold(in, 0);
}

EXPORT("eddy_agg_merge") int32_t eddy_agg_merge(const uint8_t *in, uint32_t len) {
	(void)len;
	return fold(in, 1);
}

EXPORT("eddy_agg_result") int32_t eddy_agg_result(const uint8_t *in, uint32_t len) {
	(void)len;
	uint32_t count = rd32(in + 4);
	const uint8_t *e = in + 8;
	for (uint32_t r = 0; r < count; r++, e += 32) {
		if (rd32(e + 20) != 16)
			return failf("agg: accumulator is not 16 bytes");
		uint64_t acc[2];
		memcpy(acc, in + rd32(e + 16), 16);
		char buf[64];
		int n;
		if (mode == 2)
			n = snprintf(buf, sizeof buf, "{\"n\":%llu,", (unsigned long long)acc[0]);
		else
			n = snprintf(buf, sizeof buf, "{\"n\":%llu,\"sum\":%lld}", (unsigned long long)acc[0], (long long)acc[1]);
		emit_one(buf, (uint32_t)n);
	}
	return 0;
}
