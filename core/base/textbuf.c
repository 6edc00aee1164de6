// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "textbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ktel_textbuf_reserve(struct ktel_textbuf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->fail || b->len + more + 1 <= b->cap)
		return;
	if (b->fixed) {
		b->fail = true;
		return;
	}
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->fail = true;
		return;
	}
	b->p = p;
	b->cap = cap;
}

/* "00" .. "99": two digits per division. */
static const char digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static unsigned decimal_digits(uint64_t v)
{
	static const uint64_t pow10[20] = {
		1ULL,
		10ULL,
		100ULL,
		1000ULL,
		10000ULL,
		100000ULL,
		1000000ULL,
		10000000ULL,
		100000000ULL,
		1000000000ULL,
		10000000000ULL,
		100000000000ULL,
		1000000000000ULL,
		10000000000000ULL,
		100000000000000ULL,
		1000000000000000ULL,
		10000000000000000ULL,
		100000000000000000ULL,
		1000000000000000000ULL,
		10000000000000000000ULL,
	};
	/* log10 from log2: bits * 1233 / 4096, then one correction. */
	unsigned t = (unsigned)(64 - __builtin_clzll(v | 1)) * 1233 >> 12;

	if (!v)
		return 1;
	return t + (v >= pow10[t]);
}

/* n digits of v ending at end, written backwards: four digits per 64-bit
 * division (the dependent chain of divisions is the cost), then 32-bit. */
static void put_digits(char *end, uint64_t v, unsigned n)
{
	char *p = end;
	uint32_t w;

	while (v >= 10000) {
		uint32_t r = (uint32_t)(v % 10000);

		v /= 10000;
		p -= 4;
		memcpy(p, digits2 + 2 * (r / 100), 2);
		memcpy(p + 2, digits2 + 2 * (r % 100), 2);
	}
	w = (uint32_t)v;
	if (w >= 100) {
		p -= 2;
		memcpy(p, digits2 + 2 * (w % 100), 2);
		w /= 100;
	}
	if (w >= 10) {
		p -= 2;
		memcpy(p, digits2 + 2 * w, 2);
	} else {
		*--p = (char)('0' + w);
	}
	while (p > end - n)
		*--p = '0';
}

char *ktel_fmt_u64_width(char *p, uint64_t v, unsigned width)
{
	unsigned n = decimal_digits(v);

	if (width > 20)
		width = 20;
	if (n < width)
		n = width;
	put_digits(p + n, v, n);
	return p + n;
}

char *ktel_fmt_u64(char *p, uint64_t v)
{
	return ktel_fmt_u64_width(p, v, 0);
}

char *ktel_fmt_i64(char *p, int64_t v)
{
	if (v >= 0)
		return ktel_fmt_u64(p, (uint64_t)v);
	*p++ = '-';
	/* -(INT64_MIN) does not fit an int64_t; its magnitude fits a uint64_t. */
	return ktel_fmt_u64(p, (uint64_t)0 - (uint64_t)v);
}

void ktel_textbuf_put_u64_width(struct ktel_textbuf *b, uint64_t v, unsigned width)
{
	char *p = ktel_textbuf_room(b, 20);

	if (p)
		ktel_textbuf_commit(b, ktel_fmt_u64_width(p, v, width));
}

void ktel_textbuf_put_u64(struct ktel_textbuf *b, uint64_t v)
{
	char *p = ktel_textbuf_room(b, 20);

	if (p)
		ktel_textbuf_commit(b, ktel_fmt_u64(p, v));
}

void ktel_textbuf_put_i64(struct ktel_textbuf *b, int64_t v)
{
	char *p = ktel_textbuf_room(b, 21);

	if (p)
		ktel_textbuf_commit(b, ktel_fmt_i64(p, v));
}

void ktel_textbuf_printf(struct ktel_textbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->fail = true;
		return;
	}
	ktel_textbuf_put(b, tmp, (size_t)n);
}
