// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The control protocol's wire pieces: see control_proto.h. */
#include "control_proto.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json_format.h"
#include "utf8.h"

int ktel_control_split_lines(char *buf, size_t *len, size_t max, int (*fn)(char *line, void *ctx),
			     void *ctx)
{
	size_t start = 0;
	char *nl;
	int r = 0;

	while (start < *len && (nl = memchr(buf + start, '\n', *len - start))) {
		char *line = buf + start;
		bool cr = nl > line && nl[-1] == '\r';

		*nl = '\0';
		if (cr)
			nl[-1] = '\0';
		r = fn(line, ctx);
		if (r == -EAGAIN) {
			/* Not taken: the line stays for the next call. */
			*nl = '\n';
			if (cr)
				nl[-1] = '\r';
			break;
		}
		start = (size_t)(nl - buf) + 1;
		if (r < 0)
			break;
		r = 0;
	}
	memmove(buf, buf + start, *len - start);
	*len -= start;
	if (!r && *len >= max)
		return -E2BIG;
	return r;
}


json_t *ktel_control_error_string(const char *msg)
{
	json_t *j = json_string(msg);
	char *copy;

	if (j || !msg || !(copy = strdup(msg)))
		return j;
	ktel_utf8_sanitize(copy);
	j = json_string(copy);
	free(copy);
	return j;
}

json_t *ktel_control_error(const char *code, const char *msg)
{
	return json_pack("{s:b, s:o, s:s}", "ok", 0, "error", ktel_control_error_string(msg),
			 "code", code);
}

char *ktel_control_dump_line(const json_t *resp, size_t *ret_len)
{
	char *s = json_dumps(resp, JSON_COMPACT), *line;
	size_t n;

	if (!s)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	if (ret_len)
		*ret_len = n + 1;
	return line;
}

json_t *ktel_control_record_json(const struct ktel_record *r)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;
	json_t *j = NULL;

	if (ktel_json__format_line(r, &buf, &len, &cap) == 0)
		j = json_loadb(buf, len, 0, NULL);
	free(buf);
	return j;
}
