/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `ktelemetryctl report`: the JSON sink's log drawn as one self-contained
 * HTML page (docs/report.md). Per histogram metric and key (combination of
 * dims): a latency heatmap (x time window, y bucket, colour the count) and
 * the p50/p90/p99 lines estimated from the buckets. The page holds inline
 * CSS and SVG only: no script, no font, no image, no URL.
 *
 * The log comes from files and devices: every line is hostile. A line the
 * report cannot read is skipped and counted by reason, never fatal; what the
 * report keeps is bounded (the KTEL_REPORT_MAX_* below), and a record over a
 * bound is skipped and counted the same way.
 */
#ifndef KTEL_REPORT_H
#define KTEL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

#define KTEL_REPORT_MAX_LINE (1u << 20) /* bytes of one line */
#define KTEL_REPORT_MAX_BUCKETS 64      /* buckets of one histogram */
#define KTEL_REPORT_MAX_METRICS 64
#define KTEL_REPORT_MAX_KEYS 64 /* keys of one metric */
#define KTEL_REPORT_MAX_WINDOWS (1u << 19)
#define KTEL_REPORT_MAX_NAME 256 /* bytes of a metric name */
#define KTEL_REPORT_MAX_KEY 512  /* bytes of a key's text */
#define KTEL_REPORT_MAX_DIMS 16

/* Why a line was skipped. */
enum ktel_report_skip {
	KTEL_REPORT_SKIP_TOO_LONG,
	KTEL_REPORT_SKIP_NOT_JSON,
	KTEL_REPORT_SKIP_NO_METRIC,
	KTEL_REPORT_SKIP_BAD_TIME,
	KTEL_REPORT_SKIP_BAD_HISTOGRAM,
	KTEL_REPORT_SKIP_BAD_DIMS,
	KTEL_REPORT_SKIP_BUCKETS_CHANGED,
	KTEL_REPORT_SKIP_OVER_LIMIT,
	KTEL_REPORT_SKIP_N
};

struct ktel_report_stats {
	uint64_t lines;      /* non-empty lines read */
	uint64_t windows;    /* histogram windows drawn */
	uint64_t other;      /* counter, gauge and event records: not drawn */
	uint64_t filtered;   /* left out by --metric, --since, --until */
	uint64_t duplicates; /* a window read before (overlapping files) */
	uint64_t skipped;    /* lines skipped: the sum of skip[] */
	uint64_t skip[KTEL_REPORT_SKIP_N];
	char first[KTEL_REPORT_SKIP_N][160]; /* "file:line" of each reason's first */
};

/*
 * What to draw. metrics: fnmatch(3) patterns, any of which a metric name
 * must match (none: every metric); the strings are borrowed for the
 * report's life. A window is kept when it overlaps [since, until). A
 * relative bound (*_rel) is a duration before the end of the newest window
 * in the input, so "the last 6h" of a log pulled from a device days later
 * means its last 6 hours.
 */
struct ktel_report_filter {
	const char *const *metrics;
	size_t n_metrics;
	bool since_set, until_set, since_rel, until_rel;
	int64_t since_ms, until_ms; /* epoch ms, or the duration when *_rel */
};

struct ktel_report;

/* An empty report keeping what f selects (f copied; NULL: everything). NULL
 * with errno on allocation failure. */
struct ktel_report *ktel_report__new(const struct ktel_report_filter *f);
void ktel_report__free(struct ktel_report *r);

/*
 * One line of a log (len bytes, without its '\n'; need not be
 * NUL-terminated): kept, or counted as filtered, duplicate, not a
 * histogram, or skipped with its reason (at file:lineno when it is the
 * reason's first).
 */
void ktel_report__add_line(struct ktel_report *r, const char *line, size_t len, const char *file,
			   uint64_t lineno);

/*
 * Every line of the file at path (plain or gzip, as the JSON sink's
 * rotation leaves them; "-" is stdin). A file already read (the same inode)
 * is not read again. 0, or -errno with err naming the file when it cannot
 * be opened or read (the lines before a read error are kept).
 */
int ktel_report__read_file(struct ktel_report *r, const char *path, struct ktel_err *err);

/*
 * The page into out. Applies the relative time bounds first, so call it
 * once, after the last line; the stats are final after it. 0, or -EIO when
 * out reports an error.
 */
int ktel_report__write_html(struct ktel_report *r, FILE *out);

const struct ktel_report_stats *ktel_report__stats(const struct ktel_report *r);
/* Metrics and keys with a window to draw (final after write_html). */
void ktel_report__shape(const struct ktel_report *r, size_t *ret_metrics, size_t *ret_keys);

/* One sentence for a skip reason ("not a JSON object"), and a short
 * identifier for JSON ("not_json"). */
const char *ktel_report_skip_text(enum ktel_report_skip s);
const char *ktel_report_skip_id(enum ktel_report_skip s);

/*
 * The q-quantile (0..1) of a histogram of n buckets: counts[k] observations
 * in bucket k, whose upper bound is le[k] (ascending, the last may be
 * INFINITY) and whose lower bound is le[k-1] (for k = 0: 0, or below a
 * first bound <= 0 by the width of the second bucket). Estimated as
 * Prometheus' histogram_quantile() does: the bucket where the cumulative
 * count reaches q * total, interpolated linearly between its bounds; a
 * rank in a last bucket without upper bound gives that bucket's lower
 * bound and *ret_above true (may be NULL). NAN when there is no
 * observation.
 */
double ktel_report_quantile(const double *le, const uint64_t *counts, size_t n, double q,
			    bool *ret_above);

/*
 * s (len bytes) as HTML text or attribute value: & < > " ' as entities,
 * control characters and bytes that are not valid UTF-8 as U+FFFD; the rest
 * of UTF-8 as it is.
 */
void ktel_report_escape(FILE *out, const char *s, size_t len);

/*
 * A time for --since and --until: epoch seconds ("1796208285"), a UTC date
 * and time ("2026-12-02", "2026-12-02T10:44", "2026-12-02 10:44:45Z"), or a
 * duration ("6h", "90m", "2d": *ret_rel true). 0, or -EINVAL.
 */
int ktel_report_parse_when(const char *text, int64_t *ret_ms, bool *ret_rel);

/*
 * The command: `report [FILE...] [-o FILE] [--metric PATTERN]... [--since
 * WHEN] [--until WHEN] [--no-rotated]` (argv[0] is "report"); json prints
 * its summary as one JSON object. Says what it did on stderr; returns the
 * exit status (0 written, 1 nothing to draw or an input or the output
 * failed, 2 usage).
 */
int ktel_report_main(int argc, char **argv, bool json);

#endif /* KTEL_REPORT_H */
