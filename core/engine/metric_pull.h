/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One accumulator metric's pull: map snapshot (map_reader) -> per-key values
 * decoded from BTF (btf_layout) -> deltas (delta) -> records (record.h).
 *
 * Everything that can be resolved once is resolved in _new: the key and value
 * layouts, the key members that are dimensions, their label sources (a BTF
 * enum, or an id -> name map the kernel side fills). A pull then only reads
 * and computes; its buffers are sized in _new and reused, so a steady-state
 * pull allocates nothing.
 *
 * A pull hands its records on in windows of at most KTEL_PULL_WINDOW
 * records (one key's records are never split) as it makes them, rather than
 * all at once from a buffer of the whole pull: at 100k keys that buffer was
 * ~100 MB written per pull, the pull's main cost over the read itself.
 *
 * Values: a struct with a u64 `buckets` array is a histogram (plus `sum`);
 * otherwise each integer member is a counter or a gauge (the descriptor's
 * value_kind). A value with several integer members yields one record per
 * member, named <metric>_<member>.
 */
#ifndef KTEL_METRIC_PULL_H
#define KTEL_METRIC_PULL_H

#include <stdbool.h>
#include <stdint.h>

#include <ktelemetry/plugin.h>

#include "delta.h"
#include "error.h"
#include "record.h"

struct bpf_object;
struct ktel_metric_pull;

struct ktel_pull_info {
	const char *method;    /* "batch" or "iterate" */
	unsigned int syscalls; /* bpf() calls of the whole pull */
	size_t keys;           /* entries read */
	size_t records;        /* records produced */
	uint64_t duration_ns;  /* read + decode + delta */
	/* How the delta series started; 0 for gauges, which have none. */
	enum ktel_delta_start start;
	/* Always false: a walk that stays truncated fails the pull (-EAGAIN)
	 * instead of returning part of the map. Kept for the status layout. */
	bool truncated;
};

/* Records per window: ~250 KB of histogram records, which stay in the
 * cache between being made and being formatted by the sinks. */
#define KTEL_PULL_WINDOW 256

/*
 * Receives a pull's records, window after window, in the order they are
 * made; all windows of one pull carry its window, boot id and sequence
 * number. The records (and their strings) are valid during the call only.
 */
typedef void (*ktel_pull_records_fn)(void *ctx, const struct ktel_record *recs, size_t n);

/* Delta values kept of the last pull for ktel_metric_pull__last_records:
 * 2 MiB, 7943 histogram keys with a sum, about what one control answer
 * (16 MiB of JSON, which carries the totals too) can hold. */
#define KTEL_PULL_KEEP_VALUES (256u * 1024)

struct ktel_map_reader_opts;

struct ktel_metric_pull_opts {
	/* Options of the metric's map reader; NULL: the real bpf() calls.
	 * Tests pass a simulated kernel here. */
	const struct ktel_map_reader_opts *reader;
	/* Where block device names are read (blockdev.h); NULL: "/sys".
	 * Tests pass a directory laid out like it. */
	const char *sysfs_root;
	/* Records per window; 0: KTEL_PULL_WINDOW. Tests pass a few, to
	 * pull more keys than a window holds. */
	size_t window;
	/* Delta values kept for last_records; 0: KTEL_PULL_KEEP_VALUES. */
	size_t keep_values;
	/* Attribution on: the name records give the KTEL_DIM_ATTRIBUTION
	 * dimension ("cgroup", "user", ...), its value the raw id, its label
	 * NULL (attr_fold.h names it). NULL: off, and the dimension is left
	 * out of records. A metric without such a dimension is refused. */
	const char *attr_name;
};

/*
 * Resolve metric md of a BPF object. map_created tells whether this daemon
 * created the map (deltas start from zero) or reused a pin. A per-CPU map is
 * refused when a value member the pull reads is not an 8-byte integer at an
 * 8-byte offset: per-CPU copies are summed per u64 word (map_reader.h).
 * Errors name the plugin, metric, map and member involved. opts may be NULL.
 */
int ktel_metric_pull__new_opts(const struct ktel_metric_desc *md, struct bpf_object *obj,
			       bool map_created, const struct ktel_metric_pull_opts *opts,
			       struct ktel_metric_pull **ret, struct ktel_err *err);
int ktel_metric_pull__new(const struct ktel_metric_desc *md, struct bpf_object *obj,
			  bool map_created, struct ktel_metric_pull **ret, struct ktel_err *err);
void ktel_metric_pull__free(struct ktel_metric_pull *mp);

/*
 * Pull once: read the map, compute deltas against d, and hand the records to
 * fn(ctx, ...) window by window as they are made (fn NULL: made and dropped).
 * boot_id is carried into every record and must stay valid until the next
 * run (ktel_metric_pull__last_records rebuilds records with it).
 *
 * Counters and histograms go through the delta engine; gauges (value_kind
 * KTEL_VALUE_GAUGE) are levels and do not: every key read yields a record
 * with its current level, zero or falling included.
 *
 * A walk the reader could not complete even on its second try fails with
 * -EAGAIN ("incomplete"): nothing is emitted and the delta round is never
 * ended, so no key that was not read is forgotten (which would make its
 * whole cumulative value count again on the next pull).
 *
 * The delta engine failing at a key (out of memory) fails the pull too, after
 * the records of the keys before it were handed to fn: those keys' state
 * moved on with them, the others' did not (the round is aborted, none is
 * forgotten), and their sequence number is taken. What the state counts is
 * what fn was given: nothing is lost and nothing counted twice.
 *
 * The first pull whose reader works by iteration instead of batch logs why
 * at INFO, once per reader, naming the metric and map.
 */
/*
 * When the maps are opened, before any program is attached: a reused pinned
 * map that no state vouches for (state file deleted, corrupt, from another
 * daemon) gets its baseline now, so that the first pull reports everything
 * counted since this start. Counts from before it are not reported: nobody
 * knows which of them were already delivered. *ret_taken says whether a
 * baseline was taken (nothing to do for a map this daemon created or one
 * the state knows).
 */
int ktel_metric_pull__baseline(struct ktel_metric_pull *mp, struct ktel_delta *d, bool *ret_taken,
			       struct ktel_err *err);

int ktel_metric_pull__run(struct ktel_metric_pull *mp, struct ktel_delta *d, const char *boot_id,
			  ktel_pull_records_fn fn, void *ctx, struct ktel_pull_info *ret_info,
			  struct ktel_err *err);

/*
 * An attributed pull's keys, instead of records (attr_fold.h folds them):
 * the fold needs a key's attribution id, its other dimensions (which, for
 * a key it has seen, it keeps by the key's bytes) and its delta, not the
 * ~1 KB record the pull would write and the fold take apart.
 */
struct ktel_pull_key {
	size_t pos;      /* the key's place in this pull's snapshot */
	const void *key; /* its raw bytes, as the map holds them */
	uint64_t id;     /* the attribution id */
	/* The derived device dimension's value the key's record would carry,
	 * or KTEL_PULL_NO_DERIVED when it would carry none. */
	uint64_t derived;
	/* The delta (a gauge's level): a histogram's buckets then its sum when
	 * it has one, or the one counter. */
	const uint64_t *vals;
};

#define KTEL_PULL_NO_DERIVED UINT64_MAX

/* A batch of keys (at most a window's worth), valid during the call only. */
struct ktel_pull_keys {
	const struct ktel_pull_key *k;
	size_t n;
	size_t key_size, n_vals;
	/* The window's header: a record's members before dims, and a
	 * histogram's scheme and bucket count in hist.delta. */
	const struct ktel_record *head;
	/* Key i's record, made in full (dims with labels) into a buffer of
	 * the pull's, valid until the next call of it or the next batch. */
	const struct ktel_record *(*record)(const struct ktel_pull_keys *b, size_t i);
	void *priv; /* the pull's, for record */
};

typedef void (*ktel_pull_keys_fn)(void *ctx, const struct ktel_pull_keys *b);

/*
 * ktel_metric_pull__run, with the emitted keys handed to key_fn(ctx, ...)
 * in batches instead of as records, for an attributed metric whose keys
 * make one record each (a histogram, or one counter or gauge): in the
 * order of the snapshot, each key once. Any other pull makes records as
 * run does and hands them to fn(ctx, ...).
 */
int ktel_metric_pull__run_keys(struct ktel_metric_pull *mp, struct ktel_delta *d,
			       const char *boot_id, ktel_pull_keys_fn key_fn,
			       ktel_pull_records_fn fn, void *ctx, struct ktel_pull_info *ret_info,
			       struct ktel_err *err);

/* Cumulative state as of the last pull (for show and the cumulative sinks'
 * start-up totals): a record with the totals for every key read, to fn
 * window by window, as a run hands on its records. */
void ktel_metric_pull__totals(struct ktel_metric_pull *mp, ktel_pull_records_fn fn, void *ctx);

/*
 * The records the last run handed on, made again, the same and in the same
 * windows, to fn(ctx, ...); none before the first run, after a baseline,
 * or after a run that failed before its delta round (a failed read, an
 * incomplete walk). For show and the control socket's pull, which report
 * what a pull made without running it again. Only the records of the first
 * keys, up to KTEL_PULL_KEEP_VALUES delta values, are kept (all of a
 * gauge's): returns how many records after them were not (0: none).
 */
size_t ktel_metric_pull__last_records(struct ktel_metric_pull *mp, ktel_pull_records_fn fn,
				      void *ctx);

/*
 * Ageing of an attributed metric: the next run (and only it) takes every
 * key whose attribution id released(ctx, id) says was released out of the
 * map as it reads it, with BPF_MAP_LOOKUP_AND_DELETE_ELEM: the key's value
 * as it left the map is the one the run's window counts (its delta against
 * the last pull), so an event counted between the read and the delete is
 * not lost, and the key's delta state restarts from zero. An event after
 * the delete makes the key again through the kernel's admission: the next
 * pull counts it from zero (and takes it again while the id stays
 * released). The keys deleted give their slots back to the kernel's count
 * of admitted keys (<map>_attr_used) once each, so the kernel admits new
 * ids again. released is called once per attributed key read, overflow and
 * unknown keys aside. Nothing happens with attribution off or for a gauge.
 */
void ktel_metric_pull__attr_release(struct ktel_metric_pull *mp,
				    bool (*released)(void *ctx, uint64_t id), void *ctx);
/* Keys the last run deleted; *ret_err: the first deletion's -errno besides
 * -ENOENT (the others still tried), or 0. */
size_t ktel_metric_pull__attr_taken(const struct ktel_metric_pull *mp, int *ret_err);
/* Is the admitted-key count mapped, so deleted keys give their slots back? */
bool ktel_metric_pull__attr_counted(const struct ktel_metric_pull *mp);

uint32_t ktel_metric_pull__map_id(const struct ktel_metric_pull *mp);
/* Why the metric's map is read by iteration, or NULL while batch works. */
const char *ktel_metric_pull__fallback_reason(const struct ktel_metric_pull *mp);
const struct ktel_metric_desc *ktel_metric_pull__desc(const struct ktel_metric_pull *mp);

/* Boot id of this boot (/proc/sys/kernel/random/boot_id), cached. */
const char *ktel_boot_id(void);

/* CLOCK_BOOTTIME and CLOCK_REALTIME now, in nanoseconds. */
uint64_t ktel_now_boottime_ns(void);
int64_t ktel_now_wall_ns(void);

#endif /* KTEL_METRIC_PULL_H */
