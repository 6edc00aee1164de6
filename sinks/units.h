/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One naming rule for every sink that names series (Prometheus, StatsD):
 * a time unit (ns, us, ms, s) is exposed in seconds with the suffix
 * "_seconds", "bytes" with "_bytes"; any other unit adds no suffix and no
 * scaling. Values, bucket bounds and sums are divided by `scale`.
 */
#ifndef KTEL_SINK_UNITS_H
#define KTEL_SINK_UNITS_H

#include <stdbool.h>
#include <stddef.h>

struct ktel_unit_rule {
	const char *unit;   /* the record's unit, as a plugin declares it */
	const char *suffix; /* appended to the exposed name */
	double scale;       /* divisor into the base unit: 10^decimals */
	unsigned decimals;  /* decimal places an integer in unit takes in the base unit */
};

/* Every rule, for tests that go through all of them; n gets their number. */
const struct ktel_unit_rule *ktel_unit_rules(size_t *ret_n);

/* The rule for unit, or NULL when the unit has none (or unit is NULL). */
const struct ktel_unit_rule *ktel_unit_rule(const char *unit);

/* Does s end with suffix? */
bool ktel_str_ends_with(const char *s, const char *suffix);

/*
 * The shortest decimal that reads back as v ("1024", "1.6e-05" for 16 us in
 * seconds), "+Inf"/"-Inf" for infinities, into buf (at least 32 bytes).
 */
void ktel_format_shortest(double v, char *buf, size_t size);

/* Room for any ktel_format_plain() text: 309 digits of DBL_MAX, sign, point, NUL. */
#define KTEL_PLAIN_DECIMAL_MAX 320

/*
 * v, an integer in the record's unit (a bucket bound; a fraction is rounded
 * to the nearest integer first), divided by 10^decimals and written as a
 * plain decimal, without exponent and without trailing zeros: 16 us with 6
 * decimals is "0.000016", 2^30 us "1073.741824", 1024 bytes (0 decimals)
 * "1024". The digits are those of the integer, moved, so the text is exact
 * and the same on every machine. "+Inf"/"-Inf" for infinities, "NaN" for
 * NaN. buf should hold KTEL_PLAIN_DECIMAL_MAX bytes; a shorter one gets the
 * text cut.
 */
void ktel_format_plain(double v, unsigned decimals, char *buf, size_t size);

#endif /* KTEL_SINK_UNITS_H */
