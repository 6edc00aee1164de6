// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Control protocol (core/daemon/control.c) from bytes as a client sends them: the
 * line framing, then each complete line through the request parser, and
 * the error answer built from the parser's message dumped as the one line
 * the daemon writes back (it must still be one line of JSON with "error").
 * The bytes arrive in two reads split at the first byte's value, as a
 * socket may deliver them. A request the parser accepts is then answered
 * through the command table and the ops table, by the fake daemon of
 * tests/control_fake.h: the answer must be one line of JSON with "ok" (and
 * "error" and "code" when it is false).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control_fake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A small limit so that over-long lines are reached too. */
#define FUZZ_MAX_LINE 4096

/* resp as the daemon writes it: one line, newline-terminated, that parses
 * back with "ok", and with "error" and "code" when ok is false. */
static void check_answer(json_t *resp)
{
	size_t len = 0;
	char *out;
	json_t *back, *ok;

	if (!resp)
		return;
	out = ktel_control_dump_line(resp, &len);
	json_decref(resp);
	if (!out)
		return;
	if (len == 0 || out[len - 1] != '\n' || memchr(out, '\n', len - 1))
		abort();
	back = json_loadb(out, len, 0, NULL);
	ok = json_object_get(back, "ok");
	if (!back || !json_is_boolean(ok))
		abort();
	if (json_is_false(ok) && (!json_is_string(json_object_get(back, "error")) ||
				  !json_is_string(json_object_get(back, "code"))))
		abort();
	json_decref(back);
	free(out);
}

static int on_line(char *line, void *ctx)
{
	const struct ktel_control_cmd *cmd = NULL;
	struct ctl_fake *fake = ctx;
	struct ktel_err err = {0};
	json_t *req = NULL;

	if (ktel_control_parse_request(line, &req, &cmd, &err) != 0) {
		check_answer(ktel_control_error(KTEL_CTL_E_REQUEST, err.msg));
		return 0;
	}
	if (!cmd || !req || !json_is_object(req))
		abort();
	json_decref(req);
	/* Every third request the fake fails, so failure answers are built too. */
	if (fake->calls % 3 == 2)
		fake->fail = EIO;
	check_answer(ktel_control_answer_line(&ctl_fake_ops, fake, line));
	return 0;
}

static int feed(char *buf, size_t *len, const uint8_t *data, size_t n, struct ctl_fake *fake)
{
	if (*len + n > FUZZ_MAX_LINE * 2)
		n = FUZZ_MAX_LINE * 2 - *len;
	memcpy(buf + *len, data, n);
	*len += n;
	return ktel_control_split_lines(buf, len, FUZZ_MAX_LINE, on_line, fake);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[FUZZ_MAX_LINE * 2 + 1];
	struct ctl_fake fake;
	size_t len = 0, first;

	if (size == 0)
		return 0;
	ctl_fake_init(&fake);
	first = data[0] % size;
	data++;
	size--;
	if (first > size)
		first = size;
	if (feed(buf, &len, data, first, &fake) == -E2BIG)
		return 0;
	if (len > FUZZ_MAX_LINE * 2)
		abort();
	feed(buf, &len, data + first, size - first, &fake);
	return 0;
}
