// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "error.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ktel_err_set(struct ktel_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (code < 0)
		code = -code;
	if (err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		ktel_utf8_trim_str(err->msg);
	}
	return -code;
}

int ktel_err_prefix(struct ktel_err *err, const char *fmt, ...)
{
	char old[KTEL_ERR_MSG_MAX];
	size_t len;
	va_list ap;
	int n;

	if (!err)
		return 0;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	len = n < 0 ? 0 : (size_t)n;
	if (len < sizeof(err->msg) - 1)
		snprintf(err->msg + len, sizeof(err->msg) - len, "%.*s",
			 (int)(sizeof(err->msg) - len - 1), old);
	ktel_utf8_trim_str(err->msg);
	return -err->code;
}
