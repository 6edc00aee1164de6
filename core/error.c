// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "error.h"

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
	}
	return -code;
}

int ktel_err_prefix(struct ktel_err *err, const char *fmt, ...)
{
	char prefix[KTEL_ERR_MSG_MAX], old[KTEL_ERR_MSG_MAX];
	va_list ap;

	if (!err)
		return 0;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s%s", prefix, old);
	return -err->code;
}
