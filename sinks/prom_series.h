/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records as Prometheus series, for every sink that speaks Prometheus (the
 * scraped "prometheus" sink, the pushing "remote_write" sink): one place for
 * the names, the labels, the cumulative values and the histogram form, so
 * that a scrape and a push of the same daemon show the same series.
 *
 * - name: prefix (default "ktel_") + metric, unless the metric already
 *   starts with the prefix; characters outside [a-zA-Z0-9_:] become '_'.
 *   Time units ns/us/ms/s are exposed in seconds with the suffix
 *   "_seconds", "bytes" gets "_bytes" (units.h); a suffix the name already
 *   ends with is not repeated. Counters get "_total".
 * - values are the records' running totals (hist.total, counter.total), not
 *   deltas; a gauge is its last value.
 * - histogram: <name>_bucket{...,le="<bound>"} cumulative over buckets (le
 *   from ktel_hist_upper_bound(), the last one "+Inf"), <name>_sum when the
 *   map has a sum, <name>_count.
 * - dims are labels: the dim's label when one names the value, else the
 *   integer. Label names outside [a-zA-Z0-9_] get '_'; "le" and names
 *   starting with "__" (reserved) get the prefix "dim_".
 * - events have no Prometheus form (SKIPPED); a record whose metric changed
 *   type or histogram shape, whose name collides with another metric's, or
 *   that would add a series beyond max_series is DROPPED (the last counted
 *   in series_dropped).
 *
 * Families and series are only ever appended and their names, labels and
 * `le` strings never change once created: a reader on another thread may
 * walk and read them without the writer's lock, as long as it copies the
 * values under it (the prometheus sink's snapshot).
 */
#ifndef KTEL_PROM_SERIES_H
#define KTEL_PROM_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "textbuf.h"

#define KTEL_PROM_DEFAULT_PREFIX "ktel_"

struct ktel_prom_family {
	struct ktel_prom_family *next; /* in order of first appearance */
	char *metric;                  /* the records' metric name */
	char *unit;
	char *name; /* exposed name, _total included for counters */
	enum ktel_record_type type;
	double scale;                /* divisor into the exposed unit; 1: none */
	struct ktel_histogram shape; /* scheme and bounds; counts unused */
	/* `le="<bound>"` of each bucket, NUL-separated in le_text: formatting a
	 * bound takes up to 17 snprintf/strtod rounds, and the shape never
	 * changes, so it is done once here, not per series per output.
	 * le_voff: the bound alone, NUL-terminated, in the same buffer. */
	char *le_text;
	uint32_t le_off[KTEL_HIST_BUCKETS], le_voff[KTEL_HIST_BUCKETS];
	uint32_t n_series;
	struct ktel_prom_series *first, *last;
};

struct ktel_prom_series {
	struct ktel_prom_series *hnext; /* hash chain */
	struct ktel_prom_series *fnext; /* family's series, in order of appearance */
	struct ktel_prom_family *fam;
	uint64_t hash;
	char *labels; /* exposition form `a="x",b="y"` (escaped), or "" */
	char *pairs;  /* the same labels as name\0value\0..., unescaped */
	uint32_t n_pairs;
	bool has_sum;
	union {
		struct {
			uint64_t counts[KTEL_HIST_BUCKETS];
			uint64_t sum;
		} h;
		uint64_t total;
		int64_t gauge;
	};
};

struct ktel_prom_set {
	char *prefix;
	uint64_t max_series;
	struct ktel_prom_family *families, *families_tail;
	struct ktel_prom_series **table;
	size_t table_size, n_series, n_families;
	uint64_t series_dropped;     /* records refused by max_series */
	struct ktel_textbuf scratch; /* labels of the record at hand */
	struct ktel_textbuf scratch_pairs;
	uint32_t scratch_n_pairs;
};

enum ktel_prom_applied {
	KTEL_PROM_APPLIED,
	KTEL_PROM_SKIPPED,
	KTEL_PROM_DROPPED
};

/* One value of a series as it is exposed. */
enum ktel_prom_value_kind {
	KTEL_PROM_U64,
	KTEL_PROM_I64,
	KTEL_PROM_DOUBLE
};
struct ktel_prom_sample {
	const char *suffix;             /* "", "_bucket", "_sum", "_count" */
	const char *le_label;           /* `le="<bound>"` for a bucket, else NULL */
	const char *le_value;           /* <bound> (NUL-terminated), else NULL */
	enum ktel_prom_value_kind kind; /* how the text form writes it */
	uint64_t u;
	int64_t i;
	double value; /* the value as a double, whatever kind */
};
typedef void (*ktel_prom_sample_cb)(void *ctx, const struct ktel_prom_sample *sample);

/* Empty set with prefix (copied) and max_series; 0 or -ENOMEM. */
int ktel_prom_set__init(struct ktel_prom_set *set, const char *prefix, uint64_t max_series);
/* Release everything; accepts a zeroed or half-built set. */
void ktel_prom_set__fini(struct ktel_prom_set *set);
/* Set r's running totals as its series' values (the series created when new). */
enum ktel_prom_applied ktel_prom_set__apply(struct ktel_prom_set *set, const struct ktel_record *r);

/*
 * Call cb for each value of one series of family f, in exposition order
 * (histogram buckets cumulative, then _sum when the map has one, then
 * _count). se may be a copy of the series taken under the writer's lock.
 */
void ktel_prom_series__samples(const struct ktel_prom_family *f, const struct ktel_prom_series *se,
			       ktel_prom_sample_cb cb, void *ctx);

/* Is c allowed in a metric name (colon) or label name at this position? */
bool ktel_prom_name_char(char c, bool first, bool colon);
/* Is s a label name a user may set ([a-zA-Z_][a-zA-Z0-9_]*, not "le", not "__...")? */
bool ktel_prom_label_name_ok(const char *s);
/* s escaped for the exposition: backslash, newline and (quote) double quote. */
void ktel_prom_put_escaped(struct ktel_textbuf *b, const char *s, bool quote);
/* A double as the shortest decimal that reads back as it (units.h). */
void ktel_prom_put_double(struct ktel_textbuf *b, double v);

#endif /* KTEL_PROM_SERIES_H */
