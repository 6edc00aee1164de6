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
	double scale;       /* divisor into the base unit */
};

/* The rule for unit, or NULL when the unit has none (or unit is NULL). */
const struct ktel_unit_rule *ktel_unit_rule(const char *unit);

/* Does s end with suffix? */
bool ktel_str_ends_with(const char *s, const char *suffix);

/*
 * The shortest decimal that reads back as v ("1024", "1.6e-05" for 16 us in
 * seconds), "+Inf"/"-Inf" for infinities, into buf (at least 32 bytes).
 */
void ktel_format_shortest(double v, char *buf, size_t size);

#endif /* KTEL_SINK_UNITS_H */
