// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The base-unit naming rule shared by the naming sinks; see units.h. */
#include "units.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ktelemetry/plugin.h>

static const struct ktel_unit_rule unit_rules[] = {
	{"ns", "_seconds", 1e9, 9}, {"us", "_seconds", 1e6, 6},    {"ms", "_seconds", 1e3, 3},
	{"s", "_seconds", 1, 0},    {"seconds", "_seconds", 1, 0}, {"bytes", "_bytes", 1, 0},
};

const struct ktel_unit_rule *ktel_unit_rules(size_t *ret_n)
{
	*ret_n = KTEL_ARRAY_SIZE(unit_rules);
	return unit_rules;
}

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

/* Append c to *p while there is room before the NUL. */
static void put_char(char **p, size_t *left, char c)
{
	if (*left > 1) {
		*(*p)++ = c;
		(*left)--;
	}
}

void ktel_format_plain(double v, unsigned decimals, char *buf, size_t size)
{
	char digits[KTEL_PLAIN_DECIMAL_MAX], *p = buf;
	size_t n, whole, left = size;
	bool neg;

	if (!size)
		return;
	if (isnan(v) || isinf(v)) {
		snprintf(buf, size, "%s", isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
		return;
	}
	/* "%.0f" of an integral double prints its exact digits (glibc). */
	snprintf(digits, sizeof(digits), "%.0f", fabs(nearbyint(v)));
	n = strlen(digits);
	neg = v < 0 && strcmp(digits, "0") != 0;
	/* Trailing zeros of the fraction say nothing: drop them. */
	while (decimals && n > 1 && digits[n - 1] == '0') {
		digits[--n] = '\0';
		decimals--;
	}
	if (n == 1 && digits[0] == '0')
		decimals = 0;
	whole = n > decimals ? n - decimals : 0;
	if (neg)
		put_char(&p, &left, '-');
	if (!whole)
		put_char(&p, &left, '0');
	for (size_t i = 0; i < whole; i++)
		put_char(&p, &left, digits[i]);
	if (decimals) {
		put_char(&p, &left, '.');
		for (size_t i = n; i < decimals; i++)
			put_char(&p, &left, '0');
		for (size_t i = whole; i < n; i++)
			put_char(&p, &left, digits[i]);
	}
	*p = '\0';
}
