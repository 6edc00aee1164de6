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

void ktel_textbuf_put(struct ktel_textbuf *b, const char *s, size_t len)
{
	ktel_textbuf_reserve(b, len);
	if (b->fail)
		return;
	memcpy(b->p + b->len, s, len);
	b->len += len;
	b->p[b->len] = '\0';
}

void ktel_textbuf_puts(struct ktel_textbuf *b, const char *s)
{
	ktel_textbuf_put(b, s, strlen(s));
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
