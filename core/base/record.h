/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Record model: what a pull or a stream produces and what sinks
 * consume. Sinks never see BTF or raw map bytes, only records.
 *
 * Strings in a record (metric, unit, dimension names and labels, event field
 * names and string values) are borrowed: they stay valid only for the call
 * that hands the batch to a sink. A sink that queues must copy or format.
 */
#ifndef KTEL_RECORD_H
#define KTEL_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ktelemetry/plugin.h>

#define KTEL_HIST_BUCKETS 32
#define KTEL_MAX_DIMS 8
#define KTEL_MAX_EVENT_FIELDS 32

enum ktel_record_type {
	KTEL_RECORD_HISTOGRAM = 1,
	KTEL_RECORD_COUNTER = 2,
	KTEL_RECORD_GAUGE = 3,
	KTEL_RECORD_EVENT = 4,
};

/* A dimension: integer value plus the label naming it, when one does. */
struct ktel_dim {
	const char *name;
	int64_t value;
	const char *label; /* NULL when no enum or id->name map names value */
	/* value is an id from a label_map (assigned at run time, not stable):
	 * sinks that keep integers (Android atoms) send the label instead. */
	bool id_label;
	/* Computed from other dims (the "device" name from major and minor):
	 * no raw value of its own. Sinks that carry raw integers (JSON
	 * dims_raw, Android atoms) skip it; label is never NULL. */
	bool derived;
};

enum ktel_field_type {
	KTEL_FIELD_VALUE_INT = 1, /* signed */
	KTEL_FIELD_VALUE_UINT = 2,
	KTEL_FIELD_VALUE_STRING = 3,
};

/* One member of a stream event. */
struct ktel_event_field {
	const char *name;
	enum ktel_field_type type;
	int64_t i;
	uint64_t u;
	const char *s;     /* KTEL_FIELD_VALUE_STRING */
	const char *label; /* enum/id label of an integer, or NULL */
	/* Integers: bytes of the member in the event (1, 2, 4, 8), so sinks
	 * with typed fields (Android atoms: int32 / int64) keep the width;
	 * 0 when unknown (treated as 8). */
	uint8_t size;
	/* The integer is an id from a label_map (assigned at run time, not
	 * stable), as ktel_dim.id_label. */
	bool id_label;
};

struct ktel_histogram {
	enum ktel_hist_scheme scheme;
	int64_t linear_min, linear_step; /* KTEL_HIST_LINEAR */
	uint32_t n_buckets;              /* <= KTEL_HIST_BUCKETS */
	uint64_t counts[KTEL_HIST_BUCKETS];
	bool has_sum;
	uint64_t sum;
};

struct ktel_record {
	enum ktel_record_type type;
	const char *metric;
	const char *atom; /* atom name, or NULL */
	uint32_t atom_id; /* 0 when none */
	const char *unit;
	/* What the metric measures (the plugin descriptor's text), or NULL:
	 * sinks with a place for it (Prometheus HELP) show it. */
	const char *description;
	/* Window this record covers; for events start == end == event time. */
	uint64_t start_boottime_ns, end_boottime_ns;
	int64_t start_wall_ns, end_wall_ns;
	/* De-duplication: boot id, id of the map read and per-metric sequence. */
	const char *boot_id;
	uint32_t map_id;
	uint64_t seq;
	uint32_t n_dims;
	struct ktel_dim dims[KTEL_MAX_DIMS];
	/*
	 * The series (metric and dims) ends with this record: its producer
	 * forgets it (an attribution value whose cgroup was released, a name
	 * evicted from the top K). Such a record carries no delta (all zero),
	 * only the series' final total. Sinks that keep per-series state drop
	 * the series (Prometheus stops exposing it, remote_write sends
	 * Prometheus' staleness marker for it once); sinks that write deltas
	 * have nothing to write and skip it (ktel_record_ends_only()). The same
	 * series may start again later, from a total of zero.
	 */
	bool series_end;
	/* Cumulative values are carried too, for sinks (Prometheus) that
	 * expose totals instead of deltas. */
	union {
		struct {
			struct ktel_histogram delta;
			struct ktel_histogram total;
		} hist;
		struct {
			uint64_t delta;
			uint64_t total;
		} counter;
		int64_t gauge;
		/* Event fields live with the producer (the stream reader's
		 * per-batch arrays): histogram records, by far the most
		 * numerous, stay small. */
		struct {
			uint32_t n_fields; /* <= KTEL_MAX_EVENT_FIELDS */
			const struct ktel_event_field *fields;
		} event;
	};
};

/* A record that only ends its series (series_end): nothing for a sink that
 * writes deltas. */
static inline bool ktel_record_ends_only(const struct ktel_record *r)
{
	return r->series_end;
}

/* Upper bound of bucket k under scheme; sets *ret_inf for the +Inf bucket. */
double ktel_hist_upper_bound(const struct ktel_histogram *h, uint32_t k, bool *ret_inf);

/* "log2", "log2_floor", "linear", "none" ("unknown" out of range): the
 * names the JSON line format and inspect use. */
const char *ktel_hist_scheme_name(enum ktel_hist_scheme scheme);

/* Sum of all bucket counts. */
uint64_t ktel_hist_count(const struct ktel_histogram *h);

#endif /* KTEL_RECORD_H */
