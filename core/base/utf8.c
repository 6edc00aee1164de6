// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "utf8.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Bytes in the character led by b: 1-4, or 0 when b cannot lead one. */
static size_t seq_len(unsigned char b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xc2 && b <= 0xdf)
		return 2;
	if ((b & 0xf0) == 0xe0)
		return 3;
	if (b >= 0xf0 && b <= 0xf4)
		return 4;
	return 0;
}

static bool is_cont(unsigned char b)
{
	return (b & 0xc0) == 0x80;
}

size_t ktel_utf8_trim(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = len, k = 0, need;

	while (i > 0 && k < 3 && is_cont(u[i - 1]))
		i--, k++;
	if (i == 0)
		return len;
	need = seq_len(u[i - 1]);
	if (need > 1 && k + 1 < need)
		return i - 1;
	return len;
}

size_t ktel_utf8_trim_str(char *s)
{
	size_t n = ktel_utf8_trim(s, strlen(s));

	s[n] = '\0';
	return n;
}

/* Is u[0..) a valid character of n bytes (no overlong form, no surrogate)? */
static bool valid_at(const unsigned char *u, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (!is_cont(u[i]))
			return false;
	if (n == 3 && ((u[0] == 0xe0 && u[1] < 0xa0) || (u[0] == 0xed && u[1] > 0x9f)))
		return false;
	if (n == 4 && ((u[0] == 0xf0 && u[1] < 0x90) || (u[0] == 0xf4 && u[1] > 0x8f)))
		return false;
	return true;
}

size_t ktel_utf8_char_len(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = len ? seq_len(u[0]) : 0;

	return n && n <= len && valid_at(u, n) ? n : 0;
}

void ktel_utf8_sanitize(char *s)
{
	unsigned char *u = (unsigned char *)s;

	while (*u) {
		size_t n = seq_len(*u);

		if (n && valid_at(u, n)) {
			u += n;
			continue;
		}
		*u++ = '?';
	}
}

size_t ktel_utf8_escape(const char *s, char *buf, size_t size)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t used = 0;

	if (!size)
		return 0;
	while (*u) {
		size_t n = seq_len(*u);

		if (n && valid_at(u, n) && (n > 1 || *u == '\t' || (*u >= 0x20 && *u != 0x7f))) {
			if (used + n >= size)
				break;
			memcpy(buf + used, u, n);
			used += n;
			u += n;
			continue;
		}
		if (used + 4 >= size)
			break;
		snprintf(buf + used, size - used, "\\x%02x", *u++);
		used += 4;
	}
	buf[used] = '\0';
	return used;
}
