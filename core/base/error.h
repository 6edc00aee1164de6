/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Error context. Core code never prints: a fallible function returns 0 or
 * -errno and, when given a struct ktel_err, fills it with one line saying what
 * failed and why, naming the file, plugin, map or field involved. The caller
 * (the daemon, a tool, a test) decides whether and how to print it.
 */
#ifndef KTEL_ERROR_H
#define KTEL_ERROR_H

#include <stddef.h>

#define KTEL_ERR_MSG_MAX 512

struct ktel_err {
	int code;                   /* positive errno of the failure */
	char msg[KTEL_ERR_MSG_MAX]; /* one line, no trailing newline */
};

/*
 * Record a failure in err (which may be NULL) and return -code, so callers can
 * write `return ktel_err_set(err, EINVAL, "%s: ...", path);`.
 */
int ktel_err_set(struct ktel_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix an existing message with more context ("plugin x: " + msg). */
int ktel_err_prefix(struct ktel_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline void ktel_err_clear(struct ktel_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}

#endif /* KTEL_ERROR_H */
