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

void ktel_textbuf_put_u64_width(struct ktel_textbuf *b, uint64_t v, unsigned width)
{
	char tmp[20], *p = tmp + sizeof(tmp);

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (width > sizeof(tmp))
		width = sizeof(tmp);
	while ((unsigned)(tmp + sizeof(tmp) - p) < width)
		*--p = '0';
	ktel_textbuf_put(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

void ktel_textbuf_put_u64(struct ktel_textbuf *b, uint64_t v)
{
	ktel_textbuf_put_u64_width(b, v, 0);
}

void ktel_textbuf_put_i64(struct ktel_textbuf *b, int64_t v)
{
	if (v < 0) {
		ktel_textbuf_put(b, "-", 1);
		/* -(INT64_MIN) does not fit an int64_t; its magnitude fits a uint64_t. */
		ktel_textbuf_put_u64(b, (uint64_t)0 - (uint64_t)v);
		return;
	}
	ktel_textbuf_put_u64(b, (uint64_t)v);
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
