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
 * - configured labels (ktel_prom_set__add_label(): a sink's "labels", the
 *   identity of the machine) are on every series, with the name and value
 *   configured. A dim whose label name is a configured one is renamed as
 *   Prometheus renames an exposed label that collides with a target label
 *   (honor_labels: false): "exported_" + its name, prefixed again as long as
 *   that collides with a configured label or another dim
 *   (ktel_prom_label_names()). So neither the identity nor the dim is lost.
 * - HELP text: the record's description (the plugin descriptor's), else a
 *   generic line naming the metric and its unit.
 * - events have no Prometheus form (SKIPPED); a record whose metric changed
 *   type or histogram shape, whose name collides with another metric's, or
 *   that would add a series beyond max_series is DROPPED (the last counted
 *   in series_dropped).
 *
 * - a record with series_end (record.h) ends its series: it is taken out of
 *   the families and the table (no longer exposed, no longer counted in
 *   max_series) and kept on the set's `ended` list with its final values,
 *   until the sink frees it (ktel_prom_set__free_ended()): remote_write
 *   sends Prometheus' staleness marker for each (rw_encode.h) first; the
 *   scraped sink waits until no scrape still renders from a copy of it.
 *   A series made again with the same labels before that supersedes the
 *   ended one, which then sends no marker.
 *
 * Families are only ever appended, and the names, labels and `le` strings
 * of families and series never change once created: a reader on another
 * thread may walk and read them without the writer's lock, as long as it
 * copies the values under it (the prometheus sink's snapshot) and the
 * series it copied are not freed while it reads (ended series wait).
 */
#ifndef KTEL_PROM_SERIES_H
#define KTEL_PROM_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "error.h"
#include "record.h"
#include "textbuf.h"

#define KTEL_PROM_DEFAULT_PREFIX "ktel_"

struct ktel_prom_family {
	struct ktel_prom_family *next; /* in order of first appearance */
	char *metric;                  /* the records' metric name */
	char *unit;
	char *name; /* exposed name, _total included for counters */
	char *help; /* the first record's description, or NULL */
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
	/* Ended (on the set's ended list) and made again since: no marker. */
	bool superseded;
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
	/* Configured labels, on every series (ktel_prom_set__add_label()). */
	char **label_names, **label_values;
	uint32_t n_labels;
	struct ktel_prom_family *families, *families_tail;
	struct ktel_prom_series **table;
	size_t table_size, n_series, n_families;
	uint64_t series_dropped; /* records refused by max_series */
	/* Series a series_end record ended, linked by fnext, newest first. */
	struct ktel_prom_series *ended;
	size_t n_ended;
	struct ktel_textbuf scratch; /* labels of the record at hand */
	struct ktel_textbuf scratch_pairs;
	uint32_t scratch_n_pairs;
	struct ktel_textbuf scratch_names; /* ktel_prom_label_names() of the record at hand */
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
/*
 * Add the configured label name="value" to every series of set (copied).
 * Before the first apply: a series' labels never change. 0, -EINVAL when
 * name is not one a user may set (ktel_prom_label_name_ok()), -EEXIST when
 * set has it already, or -ENOMEM.
 */
int ktel_prom_set__add_label(struct ktel_prom_set *set, const char *name, const char *value);
/* ktel_prom_set__add_label() for each member of the JSON object labels (a
 * sink's "labels" option; NULL: none); err names sinks.<sink_name>.labels. */
int ktel_prom_set__add_labels(struct ktel_prom_set *set, const json_t *labels,
			      const char *sink_name, struct ktel_err *err);
/* The labels (exposition form, escaped) a series of r's dims gets in set,
 * configured labels included, malloc'd: for series a sink writes itself.
 * Not while another thread applies records (it shares their scratch).
 * NULL on ENOMEM. */
char *ktel_prom_set__labels_text(struct ktel_prom_set *set, const struct ktel_record *r);
/* Release everything; accepts a zeroed or half-built set. */
void ktel_prom_set__fini(struct ktel_prom_set *set);
/* Set r's running totals as its series' values (the series created when new);
 * a series_end record ends the series instead (APPLIED, also when the set
 * has no such series). */
enum ktel_prom_applied ktel_prom_set__apply(struct ktel_prom_set *set, const struct ktel_record *r);

/* Free the ended series (prom_series.h, series_end). */
void ktel_prom_set__free_ended(struct ktel_prom_set *set);

/* Prometheus' staleness marker: the NaN with this bit pattern as a sample's
 * value says the series ended (Prometheus' value.StaleNaN). */
#define KTEL_PROM_STALE_NAN_BITS 0x7ff0000000000002ULL

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
/* The most dims ktel_prom_label_names() names at once (records have fewer). */
#define KTEL_PROM_MAX_DIM_NAMES 32

/*
 * The label names the n dims named dims[] (as records name them; NULL is
 * "dim") get in a series that also carries the configured labels
 * taken[0..n_taken): each dim's name made a valid label name (characters
 * outside [a-zA-Z0-9_] become '_', "le" and "__..." get "dim_"), and when a
 * configured label has that name, "exported_" prepended, again and again
 * while the result is a configured label's or another dim's name (what
 * Prometheus does to exposed labels that collide with target labels). The
 * names go NUL-terminated into b (emptied first): ret_off[i] is the offset
 * of dims[i]'s, ret_renamed[i] (may be NULL) whether it was renamed.
 * Shared by every sink with configured labels and by the daemon's collision
 * warnings, so that what is warned is what is sent. 0, -E2BIG beyond
 * KTEL_PROM_MAX_DIM_NAMES, or -ENOMEM; outputs written only on success.
 */
int ktel_prom_label_names(const char *const *dims, uint32_t n, const char *const *taken,
			  uint32_t n_taken, struct ktel_textbuf *b, uint32_t *ret_off,
			  bool *ret_renamed);
/* s escaped for the exposition: backslash, newline and (quote) double quote. */
void ktel_prom_put_escaped(struct ktel_textbuf *b, const char *s, bool quote);
/* A double as the shortest decimal that reads back as it (units.h). */
void ktel_prom_put_double(struct ktel_textbuf *b, double v);

#endif /* KTEL_PROM_SERIES_H */
