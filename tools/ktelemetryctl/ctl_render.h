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

/* Print an inspect report for people. */
void ktel_ctl_render_inspect(FILE *out, const json_t *report);

#endif /* KTEL_CTL_RENDER_H */
