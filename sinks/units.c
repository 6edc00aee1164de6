// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The base-unit naming rule shared by the naming sinks; see units.h. */
#include "units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ktelemetry/plugin.h>

static const struct ktel_unit_rule unit_rules[] = {
	{"ns", "_seconds", 1e9}, {"us", "_seconds", 1e6},    {"ms", "_seconds", 1e3},
	{"s", "_seconds", 1},    {"seconds", "_seconds", 1}, {"bytes", "_bytes", 1},
};

const struct ktel_unit_rule *ktel_unit_rule(const char *unit)
{
	for (size_t i = 0; unit && i < KTEL_ARRAY_SIZE(unit_rules); i++)
		if (strcmp(unit, unit_rules[i].unit) == 0)
			return &unit_rules[i];
	return NULL;
}

bool ktel_str_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

void ktel_format_shortest(double v, char *buf, size_t size)
{
	if (isinf(v)) {
		snprintf(buf, size, "%s", v > 0 ? "+Inf" : "-Inf");
		return;
	}
	/* Up to 17 significant digits always round-trip a double. */
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}
