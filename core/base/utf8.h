/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * UTF-8 boundaries for text the daemon truncates (error messages, log lines,
 * answers): a cut never splits a character, so what reaches jansson or a log
 * reader stays valid UTF-8 when its input was.
 */
#ifndef KTEL_UTF8_H
#define KTEL_UTF8_H

#include <stddef.h>

/*
 * The length of s[0..len) without a multibyte character the end cuts in
 * two: len, or less by the 1-3 bytes of that character's start. Bytes that
 * are invalid anyway are left alone (ktel_utf8_sanitize is for those).
 */
size_t ktel_utf8_trim(const char *s, size_t len);

/* NUL-terminate s at ktel_utf8_trim(s, strlen(s)); returns the new length. */
size_t ktel_utf8_trim_str(char *s);

/* Replace every byte of s that is not part of valid UTF-8 by '?', in place. */
void ktel_utf8_sanitize(char *s);

#endif /* KTEL_UTF8_H */
