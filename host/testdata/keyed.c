/*
 * keyed: an ABI version 2 module that drives every keyed-state, timer and
 * time import by hand, one command per input record (the value's first
 * byte; the rest is the argument), always with the record's key:
 *
 *   g / p ARG          value "v": get (emits the value, or "absent") / put
 *   T / t ARG          value "ttl" (declared with a 1000 ms TTL): get / put
 *   a ARG / l          list "l": append / get (emits the encoded list)
 *   P UK=VAL / G UK / D UK / e
 *                      map "m": put / get / delete / entries (encoded)
 *   c v|l|m            clear that state
 *   r e|p TS / d e|p TS
 *                      register / delete an event (e) or processing (p) timer
 *   w / n              emit current_watermark / processing_time in decimal
 *
 * Reads start with a 4-byte buffer and retry with the length the host
 * returned, so the "full length, copy up to cap" protocol is exercised.
 *
 * Hostile commands, each of which the host must trap:
 *   X  state_get with dst outside memory     K  state_get with key outside memory
 *   Y  state_declare during eddy_process     I  state_get of an undeclared id
 *   W  state_list on the value state         O ARG  state_put with key ARG
 *   Z  timer_register of kind 5
 *
 * eddy_on_timer emits "fired K TS" per timer (K = e or p) with the timer's
 * key; if the key's value "v" is a number N > 0 it first stores N-1 and
 * registers an event-time timer at TS+1, so a chain of timers fires while
 * the watermark stays put.
 *
 * Configuration (raw, not JSON): "badkind" declares kind 7, "rekind"
 * declares "v" again as a list; both must trap in eddy_open.
 */
#include <string.h>

#include "eddy.h"

#define IMP(name) __attribute__((import_module("eddy"), import_name(name)))

IMP("state_declare") int32_t state_declare(int32_t kind, const void *name, uint32_t len, int64_t ttl);
IMP("state_get") int32_t state_get(int32_t id, const void *k, uint32_t kl, void *dst, uint32_t cap);
IMP("state_put") void state_put(int32_t id, const void *k, uint32_t kl, const void *v, uint32_t vl);
IMP("state_clear") void state_clear(int32_t id, const void *k, uint32_t kl);
IMP("state_append") void state_append(int32_t id, const void *k, uint32_t kl, const void *v, uint32_t vl);
IMP("state_list") int32_t state_list(int32_t id, const void *k, uint32_t kl, void *dst, uint32_t cap);
IMP("state_map_get")
int32_t state_map_get(int32_t id, const void *k, uint32_t kl, const void *uk, uint32_t ukl, void *dst, uint32_t cap);
IMP("state_map_put")
void state_map_put(int32_t id, const void *k, uint32_t kl, const void *uk, uint32_t ukl, const void *v, uint32_t vl);
IMP("state_map_delete") void state_map_delete(int32_t id, const void *k, uint32_t kl, const void *uk, uint32_t ukl);
IMP("state_map_entries") int32_t state_map_entries(int32_t id, const void *k, uint32_t kl, void *dst, uint32_t cap);
IMP("timer_register") void timer_register(int32_t kind, const void *k, uint32_t kl, int64_t ts);
IMP("timer_delete") void timer_delete(int32_t kind, const void *k, uint32_t kl, int64_t ts);
IMP("current_watermark") int64_t current_watermark(void);
IMP("processing_time") int64_t processing_time(void);

EDDY_VERSION(2)
EDDY_STATIC_ALLOC(1 << 16)
EDDY_CLOSE_OK

static int32_t id_v, id_ttl, id_l, id_m;

static uint32_t rd32(const uint8_t *p) {
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static int64_t rd64(const uint8_t *p) {
	int64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static int fail(const char *msg) {
	eddy_fail(msg, strlen(msg));
	return 1;
}

EXPORT("eddy_open") int32_t eddy_open(const uint8_t *cfg, uint32_t len) {
	if (len == 7 && memcmp(cfg, "badkind", 7) == 0)
		state_declare(7, "bad", 3, 0);
	id_v = state_declare(0, "v", 1, 0);
	id_ttl = state_declare(0, "ttl", 3, 1000);
	id_l = state_declare(1, "l", 1, 0);
	id_m = state_declare(2, "m", 1, 0);
	if (state_declare(0, "v", 1, 0) != id_v)
		return fail("keyed: declaring v again gave another id");
	if (len == 6 && memcmp(cfg, "rekind", 6) == 0)
		state_declare(1, "v", 1, 0);
	return 0;
}

/* One output record: the key and value given. */
static uint8_t out[8 + 32 + (1 << 16)];

static void emit1(const uint8_t *key, uint32_t klen, const uint8_t *val, uint32_t vlen, int64_t ts) {
	if (klen + vlen > sizeof out - 40)
		vlen = sizeof out - 40 - klen;
	wr32(out, 0x31424445);
	wr32(out + 4, 1);
	memcpy(out + 8, &ts, 8);
	wr32(out + 16, 40);
	wr32(out + 20, klen);
	wr32(out + 24, 40 + klen);
	wr32(out + 28, vlen);
	wr32(out + 32, 0);
	wr32(out + 36, 0);
	memcpy(out + 40, key, klen);
	memcpy(out + 40 + klen, val, vlen);
	eddy_emit(out, 40 + klen + vlen);
}

static uint8_t rbuf[1 << 16];

typedef int32_t (*reader)(int32_t id, const uint8_t *k, uint32_t kl, const uint8_t *uk, uint32_t ukl,
                          uint8_t *dst, uint32_t cap);

static int32_t rd_get(int32_t id, const uint8_t *k, uint32_t kl, const uint8_t *uk, uint32_t ukl, uint8_t *dst,
                      uint32_t cap) {
	(void)uk;
	(void)ukl;
	return state_get(id, k, kl, dst, cap);
}

static int32_t rd_list(int32_t id, const uint8_t *k, uint32_t kl, const uint8_t *uk, uint32_t ukl, uint8_t *dst,
                       uint32_t cap) {
	(void)uk;
	(void)ukl;
	return state_list(id, k, kl, dst, cap);
}

static int32_t rd_map_get(int32_t id, const uint8_t *k, uint32_t kl, const uint8_t *uk, uint32_t ukl, uint8_t *dst,
                          uint32_t cap) {
	return state_map_get(id, k, kl, uk, ukl, dst, cap);
}

static int32_t rd_entries(int32_t id, const uint8_t *k, uint32_t kl, const uint8_t *uk, uint32_t ukl, uint8_t *dst,
                          uint32_t cap) {
	(void)uk;
	(void)ukl;
	return state_map_entries(id, k, kl, dst, cap);
}

/* read calls r with a 4-byte buffer, then again with the full length if
 * that was too small, and emits the result (or "absent"). */
static int read_state(reader r, int32_t id, const uint8_t *k, uint32_t kl, const uint8_t *uk, uint32_t ukl, int64_t ts) {
	int32_t n = r(id, k, kl, uk, ukl, rbuf, 4);
	if (n > 4) {
		if ((uint32_t)n > sizeof rbuf)
			return fail("keyed: value too large");
		int32_t again = r(id, k, kl, uk, ukl, rbuf, n);
		if (again != n)
			return fail("keyed: second read returned another length");
	}
	if (n < 0)
		emit1(k, kl, (const uint8_t *)"absent", 6, ts);
	else
		emit1(k, kl, rbuf, n, ts);
	return 0;
}

static int64_t parse_i64(const uint8_t *p, uint32_t n) {
	int64_t v = 0;
	int neg = n > 0 && p[0] == '-';
	for (uint32_t i = neg; i < n; i++)
		v = v * 10 + (p[i] - '0');
	return neg ? -v : v;
}

static uint32_t fmt_i64(uint8_t *dst, int64_t v) {
	char tmp[24];
	int n = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do {
		tmp[n++] = '0' + u % 10;
		u /= 10;
	} while (u);
	uint32_t len = 0;
	if (v < 0)
		dst[len++] = '-';
	while (n > 0)
		dst[len++] = tmp[--n];
	return len;
}

static int32_t state_for(uint8_t c) { return c == 'l' ? id_l : c == 'm' ? id_m : id_v; }

static int command(const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl, int64_t ts) {
	if (vl == 0)
		return fail("keyed: empty command");
	const uint8_t *arg = v + 1;
	uint32_t al = vl - 1;
	if (al > 0 && arg[0] == ' ') {
		arg++;
		al--;
	}
	uint8_t num[24];
	switch (v[0]) {
	case 'g':
		return read_state(rd_get, id_v, k, kl, 0, 0, ts);
	case 'p':
		state_put(id_v, k, kl, arg, al);
		return 0;
	case 'T':
		return read_state(rd_get, id_ttl, k, kl, 0, 0, ts);
	case 't':
		state_put(id_ttl, k, kl, arg, al);
		return 0;
	case 'a':
		state_append(id_l, k, kl, arg, al);
		return 0;
	case 'l':
		return read_state(rd_list, id_l, k, kl, 0, 0, ts);
	case 'P': {
		const uint8_t *eq = memchr(arg, '=', al);
		if (!eq)
			return fail("keyed: P needs UK=VAL");
		state_map_put(id_m, k, kl, arg, eq - arg, eq + 1, al - (eq + 1 - arg));
		return 0;
	}
	case 'G':
		return read_state(rd_map_get, id_m, k, kl, arg, al, ts);
	case 'D':
		state_map_delete(id_m, k, kl, arg, al);
		return 0;
	case 'e':
		return read_state(rd_entries, id_m, k, kl, 0, 0, ts);
	case 'c':
		state_clear(state_for(al ? arg[0] : 'v'), k, kl);
		return 0;
	case 'r':
	case 'd':
		if (al < 3)
			return fail("keyed: r and d need e|p TS");
		if (v[0] == 'r')
			timer_register(arg[0] == 'p', k, kl, parse_i64(arg + 2, al - 2));
		else
			timer_delete(arg[0] == 'p', k, kl, parse_i64(arg + 2, al - 2));
		return 0;
	case 'w':
		emit1(k, kl, num, fmt_i64(num, current_watermark()), ts);
		return 0;
	case 'n':
		emit1(k, kl, num, fmt_i64(num, processing_time()), ts);
		return 0;
	case 'X':
		state_get(id_v, k, kl, (void *)0xffffff00, 0x1000);
		return 0;
	case 'K':
		state_get(id_v, (const void *)0xfffffff0, 0x100, rbuf, sizeof rbuf);
		return 0;
	case 'Y':
		state_declare(0, "late", 4, 0);
		return 0;
	case 'I':
		state_get(99, k, kl, rbuf, sizeof rbuf);
		return 0;
	case 'W':
		state_list(id_v, k, kl, rbuf, sizeof rbuf);
		return 0;
	case 'O':
		state_put(id_v, arg, al, (const uint8_t *)"x", 1);
		return 0;
	case 'Z':
		timer_register(5, k, kl, 0);
		return 0;
	}
	return fail("keyed: unknown command");
}

EXPORT("eddy_process") int32_t eddy_process(const uint8_t *in, uint32_t len) {
	(void)len;
	uint32_t count = rd32(in + 4);
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = in + 8 + 32 * i;
		if (command(in + rd32(e + 8), rd32(e + 12), in + rd32(e + 16), rd32(e + 20), rd64(e)))
			return 1;
	}
	return 0;
}

EXPORT("eddy_on_timer") int32_t eddy_on_timer(const uint8_t *in, uint32_t len) {
	(void)len;
	uint32_t count = rd32(in + 4);
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = in + 8 + 32 * i;
		const uint8_t *k = in + rd32(e + 8);
		uint32_t kl = rd32(e + 12);
		int64_t ts = rd64(e);
		if (rd32(e + 20) != 1)
			return fail("keyed: a timer's value is not one byte");
		uint8_t kind = in[rd32(e + 16)];
		int32_t n = state_get(id_v, k, kl, rbuf, sizeof rbuf);
		if (n > 0 && rbuf[0] >= '0' && rbuf[0] <= '9') {
			int64_t left = parse_i64(rbuf, n);
			if (left > 0) {
				uint8_t next[24];
				state_put(id_v, k, kl, next, fmt_i64(next, left - 1));
				timer_register(0, k, kl, ts + 1);
			}
		}
		uint8_t msg[40] = "fired ";
		msg[6] = kind == 0 ? 'e' : kind == 1 ? 'p' : '?';
		msg[7] = ' ';
		emit1(k, kl, msg, 8 + fmt_i64(msg + 8, ts), ts);
	}
	return 0;
}
