// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Control protocol (core/control.c) from bytes as a client sends them: the
 * line framing, then each complete line through the request parser, and
 * the error answer built from the parser's message dumped as the one line
 * the daemon writes back (it must still be one line of JSON with "error").
 * The bytes arrive in two reads split at the first byte's value, as a
 * socket may deliver them.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A small limit so that over-long lines are reached too. */
#define FUZZ_MAX_LINE 4096

static int on_line(char *line, void *ctx)
{
	const struct ktel_control_cmd *cmd = NULL;
	struct ktel_err err = {0};
	json_t *req = NULL, *resp, *back;
	size_t len = 0;
	char *out;

	(void)ctx;
	if (ktel_control_parse_request(line, &req, &cmd, &err) == 0) {
		if (!cmd || !req || !json_is_object(req))
			abort();
		json_decref(req);
		return 0;
	}
	resp = ktel_control_error(KTEL_CTL_E_REQUEST, err.msg);
	if (!resp)
		return 0;
	out = ktel_control_dump_line(resp, &len);
	json_decref(resp);
	if (!out)
		return 0;
	/* One line, newline-terminated, that parses back with its error. */
	if (len == 0 || out[len - 1] != '\n' || memchr(out, '\n', len - 1))
		abort();
	back = json_loadb(out, len, 0, NULL);
	if (!back || !json_is_string(json_object_get(back, "error")))
		abort();
	json_decref(back);
	free(out);
	return 0;
}

static int feed(char *buf, size_t *len, const uint8_t *data, size_t n)
{
	if (*len + n > FUZZ_MAX_LINE * 2)
		n = FUZZ_MAX_LINE * 2 - *len;
	memcpy(buf + *len, data, n);
	*len += n;
	return ktel_control_split_lines(buf, len, FUZZ_MAX_LINE, on_line, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[FUZZ_MAX_LINE * 2 + 1];
	size_t len = 0, first;

	if (size == 0)
		return 0;
	first = data[0] % size;
	data++;
	size--;
	if (first > size)
		first = size;
	if (feed(buf, &len, data, first) == -E2BIG)
		return 0;
	if (len > FUZZ_MAX_LINE * 2)
		abort();
	feed(buf, &len, data + first, size - first);
	return 0;
}
