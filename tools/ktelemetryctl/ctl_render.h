/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Human rendering of control-socket answers and inspect reports, for
 * ktelemetryctl: tables, sections, and histograms drawn as bars the way
 * bpftrace's @hist does, with this project's upper-inclusive bounds.
 */
#ifndef KTEL_CTL_RENDER_H
#define KTEL_CTL_RENDER_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/*
 * Bucket k of a histogram as the JSON line format carries it ("scheme",
 * "le"): "[0, 1]" for log2's first bucket, "(256, 512]" (upper-inclusive)
 * for the others, "(1G, +Inf)" for the overflow; "[lo, hi)" for log2_floor
 * and linear. Bounds of 1024 and above in K/M/G (powers of 1024) like
 * bpftrace's. Returns 0 or -EINVAL when k is out of range.
 */
int ktel_ctl_bucket_label(const json_t *hist, size_t k, char *buf, size_t len);

/*
 * Draw one histogram (a "histogram" object) as bpftrace's @hist does: the
 * buckets from the first to the last non-empty one, each with its bounds,
 * its count and a bar of '@' scaled to the largest count (width columns).
 */
void ktel_ctl_draw_hist(FILE *out, const json_t *hist, int width);

/*
 * Print an answer of cmd for people: list and leases as aligned tables,
 * status as sections, show as bars, pull as one line per record, the others
 * as a line or two. Unknown commands fall back to indented JSON.
 */
void ktel_ctl_render(FILE *out, const char *cmd, const json_t *resp);

/*
 * One line of a stream socket for people: a record as `pull` prints it, any
 * other line (not JSON, not a record) as it came.
 */
void ktel_ctl_render_stream_line(FILE *out, const char *line);

/* What one screen of `ktelemetryctl top` shows, and the terminal it fits. */
struct ktel_ctl_top {
	const json_t *shows;       /* the `show` answer of each metric */
	long long interval_min_ms; /* the pull intervals of those metrics (list); */
	long long interval_max_ms; /* 0: unknown */
	long long redraw_ms;       /* --interval: a fixed redraw; 0: after each pull */
	long long now;             /* seconds since the epoch */
	int rows, cols;            /* the screen: at most rows lines of cols columns */
};

/*
 * One screen of the live view into out: at most t->rows lines, none wider
 * than t->cols columns (a column per character), every line ended by '\n'
 * but the last. A header says when the daemon last pulled and how often it
 * pulls; then one row per metric and key, those with events in the last
 * window first (most events first), then the others (most events since the
 * map was created first), with the last window's median and 99th percentile
 * bucket bounds; a "+N more" line when they do not all fit; with lines to
 * spare, the bars of the busiest key's last window.
 */
void ktel_ctl_render_top(FILE *out, const struct ktel_ctl_top *t);

/* The newest "last_pull" time of the `show` answers in shows, in seconds
 * since the epoch; 0 when none was pulled. */
long long ktel_ctl_top_newest_pull(const json_t *shows);

/* Print an inspect report for people. */
void ktel_ctl_render_inspect(FILE *out, const json_t *report);

#endif /* KTEL_CTL_RENDER_H */
