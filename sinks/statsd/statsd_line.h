/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * StatsD line protocol: a pure formatter from records to lines and a packer
 * that puts lines into datagrams. No I/O here; statsd_sink.c does that.
 *
 * Names (prefix "ktel.", metric direct_reclaim_latency in us, dim
 * process_state; units per sinks/units.h, bounds in seconds):
 *   bucket   dotted     ktel.direct_reclaim_latency_seconds.process_state.STATE_FOREGROUND.bucket.le_0_001024:7|c
 *            dogstatsd  ktel.direct_reclaim_latency_seconds.bucket:7|c|#le:0.001024,process_state:STATE_FOREGROUND
 *   count    ktel.direct_reclaim_latency_seconds[.dims].count:N|c (or tagged)
 *   sum      ktel.direct_reclaim_latency_seconds[.dims].sum_us:S|c  (only when the map has a sum)
 *   counter  ktel.<metric>:DELTA|c
 *   gauge    ktel.<metric>:V|g; a negative V is "name:0|g\nname:-N|g"
 *   event    ktel.<metric>:1|c (StatsD has no events: they are counted)
 * Every value is an integer, exactly as the record has it: servers that
 * keep integers only (Netdata's counters) lose nothing. So a value whose
 * unit the rule scales (ns, us, ms) stays in that unit and is named for it:
 * the sum is ".sum_us" (".sum" when the unit is not scaled: bytes), a
 * counter or gauge in ns is "ktel.<metric>_ns". Bucket bounds are names,
 * not values: they are in the rule's unit as plain decimals ("0.000016",
 * never "1.6e-05"; units.h ktel_format_plain).
 * Bucket lines are cumulative (values <= bound; +Inf is the count), from the
 * first non-empty bucket to +Inf ("le_Inf" dotted: '+' and '.' are not
 * segment characters, so '.' in a dotted bound is '_'). A metric that starts
 * with the prefix's stem ("ktel_" under "ktel.") does not repeat it.
 * A dim is written as its label when it has one, else as its integer.
 * Characters that are structural in the protocol are replaced by '_'.
 */
#ifndef KTEL_STATSD_LINE_H
#define KTEL_STATSD_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* Longest line the formatter builds; longer ones are refused (-EMSGSIZE). */
#define KTEL_STATSD_LINE_MAX 4096
/* Largest UDP payload over IPv4; max_packet must be below it. */
#define KTEL_STATSD_UDP_MAX 65507

enum ktel_statsd_tags {
	KTEL_STATSD_TAGS_DOGSTATSD = 0,
	KTEL_STATSD_TAGS_DOTTED = 1,
};

struct ktel_statsd_style {
	const char *prefix; /* prepended to every name, e.g. "ktel." */
	enum ktel_statsd_tags tags;
};

/*
 * Receives one unit of output: a line, or the two lines of a negative gauge,
 * which must reach the server in the same datagram. Returns 0 or -errno.
 */
typedef int (*ktel_statsd_emit_fn)(void *ctx, const char *unit, size_t len);

/*
 * Format rec as StatsD lines, calling emit once per unit in order. Every unit
 * is offered even when an earlier one failed. Returns 0 when every unit was
 * formatted and accepted, else the first error (-EMSGSIZE for a line longer
 * than KTEL_STATSD_LINE_MAX, or what emit returned).
 */
int ktel_statsd__format(const struct ktel_statsd_style *style, const struct ktel_record *rec,
			ktel_statsd_emit_fn emit, void *ctx);

/* Receives a finished datagram: len bytes, lines separated by '\n'. */
typedef int (*ktel_statsd_flush_fn)(void *ctx, const char *data, size_t len);

/*
 * Packs units into datagrams of at most max bytes without splitting a unit.
 * A unit longer than max is dropped and counted in oversize.
 */
struct ktel_statsd_packer {
	size_t max;
	char *buf;
	size_t len;
	ktel_statsd_flush_fn flush;
	void *ctx;
	uint64_t oversize; /* units dropped because they exceed max */
};

/* Allocate the packer's buffer; returns 0 or -ENOMEM / -EINVAL. */
int ktel_statsd_packer__init(struct ktel_statsd_packer *p, size_t max, ktel_statsd_flush_fn flush,
			     void *ctx);
/* Release the buffer (pending bytes are discarded); accepts a zeroed packer. */
void ktel_statsd_packer__release(struct ktel_statsd_packer *p);
/*
 * Append a unit, first flushing the current datagram when the unit does not
 * fit after it. Returns 0, -EMSGSIZE (unit > max, dropped and counted) or the
 * flush callback's error (the unit is then still appended).
 */
int ktel_statsd_packer__add(struct ktel_statsd_packer *p, const char *unit, size_t len);
/* Hand the current datagram, if any, to the flush callback. */
int ktel_statsd_packer__flush(struct ktel_statsd_packer *p);

#endif /* KTEL_STATSD_LINE_H */
