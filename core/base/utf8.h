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

/*
 * Bytes of the valid character that starts s[0..len): 1-4, or 0 when the
 * bytes there are not one (a stray continuation byte, an overlong form, a
 * surrogate, a character the end cuts in two).
 */
size_t ktel_utf8_char_len(const char *s, size_t len);

/* Replace every byte of s that is not part of valid UTF-8 by '?', in place. */
void ktel_utf8_sanitize(char *s);

/*
 * Copy s into buf[0..size) as valid UTF-8 of one line: every byte that is
 * not part of a valid character, and every control character but tab
 * (newlines included, so a file name cannot forge a log line), becomes
 * "\xNN". A name the kernel accepts but no UTF-8 reader does (a file name
 * is bytes) is then shown, distinguishably, instead of breaking the line or
 * the JSON it goes into. Output that does not fit is cut between characters
 * and escapes; buf is always NUL-terminated (size > 0). Returns the length
 * written.
 */
size_t ktel_utf8_escape(const char *s, char *buf, size_t size);

#endif /* KTEL_UTF8_H */
