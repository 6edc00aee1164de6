/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A growable text buffer for sinks that format records (JSON lines, the
 * Prometheus exposition). Appends never fail loudly: an allocation failure
 * or an over-long printf sets `fail`, later appends do nothing, and the
 * caller checks `fail` once when the text is complete. The text is always
 * NUL-terminated when not failed.
 */
#ifndef KTEL_TEXTBUF_H
#define KTEL_TEXTBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct ktel_textbuf {
	char *p;
	size_t len, cap;
	bool fail;
	/* p is not ours to grow (a window into a larger block): running out
	 * of room fails instead of reallocating. */
	bool fixed;
};

/* Make room for more bytes (plus the NUL). */
void ktel_textbuf_reserve(struct ktel_textbuf *b, size_t more);

/* Inline: a JSON line is dozens of short appends (the stream path's hot loop). */
static inline void ktel_textbuf_put(struct ktel_textbuf *b, const char *s, size_t len)
{
	if (b->fail)
		return;
	if (b->len + len + 1 > b->cap) {
		ktel_textbuf_reserve(b, len);
		if (b->fail)
			return;
	}
	memcpy(b->p + b->len, s, len);
	b->len += len;
	b->p[b->len] = '\0';
}

static inline void ktel_textbuf_puts(struct ktel_textbuf *b, const char *s)
{
	ktel_textbuf_put(b, s, strlen(s));
}

/*
 * Direct writes, for formatters that know a bound: room() makes room for up
 * to `most` more bytes (plus the NUL) and returns where they go, NULL when
 * failed; the caller writes at most `most` bytes there and ends with
 * commit(end), end = one past the last byte written. One capacity check for
 * a whole string or number instead of one per piece.
 */
static inline char *ktel_textbuf_room(struct ktel_textbuf *b, size_t most)
{
	if (b->fail)
		return NULL;
	if (b->len + most + 1 > b->cap) {
		ktel_textbuf_reserve(b, most);
		if (b->fail)
			return NULL;
	}
	return b->p + b->len;
}

static inline void ktel_textbuf_commit(struct ktel_textbuf *b, char *end)
{
	b->len = (size_t)(end - b->p);
	*end = '\0';
}

/* The decimal digits of v at p (no NUL, at most 20 bytes); returns the end. */
char *ktel_fmt_u64(char *p, uint64_t v);
/* The same, zero-padded to width (<= 20; wider numbers are not cut). */
char *ktel_fmt_u64_width(char *p, uint64_t v, unsigned width);
/* '-' and the magnitude (at most 20 bytes). */
char *ktel_fmt_i64(char *p, int64_t v);

/* Decimal integers without printf; _u64_width pads with zeros to width (<= 20). */
void ktel_textbuf_put_u64(struct ktel_textbuf *b, uint64_t v);
void ktel_textbuf_put_i64(struct ktel_textbuf *b, int64_t v);
void ktel_textbuf_put_u64_width(struct ktel_textbuf *b, uint64_t v, unsigned width);
/* printf of at most 255 characters (numbers, short names). */
void ktel_textbuf_printf(struct ktel_textbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* KTEL_TEXTBUF_H */
