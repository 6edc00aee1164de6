// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * StatsD line formatting (sinks/statsd/statsd_line.c) of a record built
 * from the bytes (fuzz_record.h), in both tag styles, then packed into
 * datagrams. Whatever the record's strings hold, every unit must be at
 * most KTEL_STATSD_LINE_MAX bytes of one line (two for a negative gauge)
 * that a StatsD server parses as intended:
 *   name ':' value '|' ('c' | 'g') [ '|#' tags ]
 * with name of [A-Za-z0-9_.-], value a decimal number, tags of
 * [A-Za-z0-9_.:,+-]; and a datagram never exceeds the packer's max.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_record.h"
#include "statsd/statsd_line.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool name_char(char c, bool tag)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.' || (tag && (c == ':' || c == ',' || c == '+'));
}

static void bad(const char *why, const char *unit, size_t len)
{
	fprintf(stderr, "statsd unit %s: \"%.*s\"\n", why, (int)len, unit);
	abort();
}

/* One line, s[0..len) without its newline. */
static void check_line(const char *s, size_t len)
{
	size_t i = 0, name_end, v;

	while (i < len && name_char(s[i], false))
		i++;
	if (i == 0 || i == len || s[i] != ':')
		bad("has a bad name", s, len);
	name_end = i++;
	v = i;
	if (i < len && s[i] == '-')
		i++;
	while (i < len && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == 'e' ||
			   s[i] == '+' || s[i] == '-'))
		i++;
	if (i == v || i == len || s[i] != '|')
		bad("has a bad value", s, len);
	i++;
	if (i == len || (s[i] != 'c' && s[i] != 'g'))
		bad("has a bad type", s, len);
	i++;
	if (i == len)
		return;
	if (len - i < 3 || s[i] != '|' || s[i + 1] != '#')
		bad("has bytes after its type that are not tags", s, len);
	for (i += 2; i < len; i++)
		if (!name_char(s[i], true))
			bad("has a bad tag character", s, len);
	(void)name_end;
}

static struct ktel_statsd_packer packer;

static int emit(void *ctx, const char *unit, size_t len)
{
	const char *nl;

	(void)ctx;
	if (len == 0 || len > 2 * KTEL_STATSD_LINE_MAX + 1)
		bad("has a bad length", unit, len);
	nl = memchr(unit, '\n', len);
	if (nl) {
		/* The negative gauge: "name:0|g\nname:-N|g". */
		if (memchr(nl + 1, '\n', len - (size_t)(nl + 1 - unit)))
			bad("has more than two lines", unit, len);
		check_line(unit, (size_t)(nl - unit));
		check_line(nl + 1, len - (size_t)(nl + 1 - unit));
	} else {
		if (len > KTEL_STATSD_LINE_MAX)
			bad("is over the line limit", unit, len);
		check_line(unit, len);
	}
	ktel_statsd_packer__add(&packer, unit, len);
	return 0;
}

static int flush(void *ctx, const char *data, size_t len)
{
	(void)ctx;
	if (len == 0 || len > packer.max)
		bad("datagram over the packer's max", data, len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fuzz_record fr;
	struct fuzz_in in = {data, size};
	struct ktel_statsd_style style;
	char prefix[FUZZ_STR_MAX + 1] = "ktel.";
	uint8_t opts = fuzz_in__u8(&in);
	const char *p;

	fuzz_record__build(&fr, &in);
	p = (opts & 2) ? fuzz_in__str(&in, &fr) : NULL;
	if (p)
		snprintf(prefix, sizeof(prefix), "%s", p);
	style.prefix = (opts & 4) ? NULL : prefix;
	if (ktel_statsd_packer__init(&packer, 64 + (opts >> 3) * 64, flush, NULL) != 0)
		return 0;
	style.tags = KTEL_STATSD_TAGS_DOGSTATSD;
	ktel_statsd__format(&style, &fr.rec, emit, NULL);
	style.tags = KTEL_STATSD_TAGS_DOTTED;
	ktel_statsd__format(&style, &fr.rec, emit, NULL);
	ktel_statsd_packer__flush(&packer);
	ktel_statsd_packer__release(&packer);
	return 0;
}
