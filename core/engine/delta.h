/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Delta engine. Accumulator maps hold cumulative values; sinks want what
 * happened during one pull window. The engine remembers, per (metric, raw
 * key bytes), the last cumulative vector of u64 values it saw (histogram
 * buckets plus the optional sum, or counters) and the id of the map they came
 * from, and turns each new reading into a delta. It knows nothing about any
 * metric's layout: keys are opaque bytes, values a u64 vector.
 *
 * One pull of one metric is:
 *
 *	struct ktel_delta_metric *m;
 *	struct ktel_delta_reading in = { .key_size = ..., .n = ... };
 *
 *	ktel_delta__begin(d, metric, map_id, created_by_us, &m, &start);
 *	for each key read:
 *		in.key = key; in.vals = cur;
 *		switch (ktel_delta__apply(m, &in, delta)) { ... }
 *	ktel_delta__end(d, metric);          -- only after a COMPLETE walk
 *	seq = ktel_delta__next_seq(d, metric);  -- when a record is emitted
 *	ktel_delta__save(d, state_path, &err);  -- after the pull
 *
 * begin looks the metric up (or creates it) once; the handle it returns is
 * what the per-key apply works on, so the hot path never searches by name.
 *
 * Rules:
 * - A key whose values went down in any element, or that was last seen in a
 *   map with another id, was reset: its delta is the current value.
 * - Where the window starts (enum ktel_delta_start): the persisted or
 *   in-memory state of the same map id when there is one; otherwise zero for
 *   a map this daemon created (first values emitted in full); otherwise, for
 *   a reused pinned map nobody remembers, the current values: that window is
 *   a baseline and nothing is emitted for it.
 * - Keys not touched between begin and end are forgotten by end: keys that
 *   vanished from the map. After a walk that failed half-way call abort
 *   instead: end would forget keys that still exist and count them twice.
 * - Each metric holds at most max_entries keys. A key the limit refuses is
 *   neither tracked nor emitted (and counted); since nothing was emitted for
 *   it, emitting its full value once there is room again is still correct.
 * - Gauges are levels, not cumulative: do not pass them through the engine.
 *
 * The state file binds itself to the boot id: map ids mean nothing across
 * boots, so a file from another boot is never trusted.
 */
#ifndef KTEL_DELTA_H
#define KTEL_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "sink.h"

#define KTEL_DELTA_DEFAULT_MAX_ENTRIES 65536
#define KTEL_DELTA_MAX_METRICS 1024
#define KTEL_DELTA_MAX_KEY_SIZE 4096
#define KTEL_DELTA_MAX_VALUES 256
#define KTEL_DELTA_MAX_BOOT_ID 63

struct ktel_delta;

/* Where this pull's window of a metric starts. */
enum ktel_delta_start {
	/* The engine has state for this very map id (from an earlier pull or
	 * the loaded state file): deltas continue from it. */
	KTEL_DELTA_START_STATE = 1,
	/* A map this daemon created: it started empty, so the first values
	 * read are emitted in full. */
	KTEL_DELTA_START_ZERO = 2,
	/* A reused pinned map with no state for its id: the current values
	 * become the baseline and nothing is emitted for this window. */
	KTEL_DELTA_START_BASELINE = 3,
};

struct ktel_delta_stats {
	uint64_t entries;       /* keys tracked now */
	uint64_t limit_dropped; /* readings refused by max_entries */
	uint64_t resets;        /* keys seen reset (decrease or new map id) */
	uint64_t forgotten;     /* keys dropped by end() as vanished */
	uint64_t seq;           /* last sequence number handed out */
	uint32_t map_id;        /* map the state belongs to, 0 = none */
};

/* boot_id: this boot's id (/proc/sys/kernel/random/boot_id), at most
 * KTEL_DELTA_MAX_BOOT_ID chars. NULL with errno set on failure. */
struct ktel_delta *ktel_delta__new(const char *boot_id);
void ktel_delta__free(struct ktel_delta *d);

/* Limit on keys per metric (applies to all metrics); >= 1. */
int ktel_delta__set_max_entries(struct ktel_delta *d, size_t max_entries);

/* Emit records whose delta is all zero for this metric (default: skip). */
int ktel_delta__set_emit_zeros(struct ktel_delta *d, const char *metric, bool emit_zeros);

/* One metric's state, as begin hands it out. It stays valid until
 * ktel_delta__free (metrics are never removed); apply accepts it only
 * between begin and end (or abort). */
struct ktel_delta_metric;

/*
 * Start a pull of metric from map map_id (not 0). Finds or creates the
 * metric's state and hands it out in *ret_m for apply; *ret_start (may be
 * NULL) says where the window starts, see enum ktel_delta_start. 0, or
 * -EINVAL (map_id 0), -E2BIG (KTEL_DELTA_MAX_METRICS metrics already),
 * -ENOMEM.
 */
int ktel_delta__begin(struct ktel_delta *d, const char *metric, uint32_t map_id,
		      bool map_created_by_us, struct ktel_delta_metric **ret_m,
		      enum ktel_delta_start *ret_start);

/* One key as read from the map, the input of apply. */
struct ktel_delta_reading {
	const void *key;
	size_t key_size;      /* 1..KTEL_DELTA_MAX_KEY_SIZE */
	const uint64_t *vals; /* current cumulative values, n of them */
	size_t n;             /* 1..KTEL_DELTA_MAX_VALUES */
};

/* What apply did with one key. Each outcome that emits nothing has its own
 * value: they are counted and tested apart. */
enum ktel_delta_outcome {
	/* The delta is in ret_delta: emit a record. */
	KTEL_DELTA_EMIT = 1,
	/* The key was reset (values went down, another map id, another value
	 * count): ret_delta holds the current values; emit a record. */
	KTEL_DELTA_RESET = 2,
	/* The delta is all zero and the metric does not emit zeros (a reset
	 * to all-zero values too): nothing to emit. */
	KTEL_DELTA_ZERO = 3,
	/* A window under KTEL_DELTA_START_BASELINE: the values are kept as
	 * where the next window starts, nothing is emitted. */
	KTEL_DELTA_BASELINE = 4,
	/* The metric holds max_entries keys already: the key is neither
	 * tracked nor emitted (counted in limit_dropped). */
	KTEL_DELTA_REFUSED = 5,
};

/*
 * Feed one key's current cumulative values to m, between begin and end. The
 * same key should come with the same n every time; a changed n is a reset.
 * Writes ret_delta[0..in->n) for every outcome, all zero for those that emit
 * nothing; ret_delta may be in->vals. Returns an enum ktel_delta_outcome, or
 * -ENOENT (no pull of m under way), -EINVAL (bad sizes), -ENOMEM; on an
 * error the key's state is as it was.
 */
int ktel_delta__apply(struct ktel_delta_metric *m, const struct ktel_delta_reading *in,
		      uint64_t *ret_delta);

/*
 * The same for a key that was deleted from the map as it was read (its
 * last values, taken with the delete): the delta is counted as by apply,
 * and the key's state then holds zero, so a key the programs make again
 * under the same bytes counts from zero, and end forgets it at the first
 * pull that does not read it.
 */
int ktel_delta__apply_taken(struct ktel_delta_metric *m, const struct ktel_delta_reading *in,
			    uint64_t *ret_delta);

/* End the pull: forget keys not applied since begin. Returns how many were
 * forgotten, or -ENOENT. */
int ktel_delta__end(struct ktel_delta *d, const char *metric);

/* End a pull whose walk failed half-way: keep every key (forgetting the
 * ones not read yet would count them twice later). 0 or -ENOENT. */
int ktel_delta__abort(struct ktel_delta *d, const char *metric);

/* Next per-metric sequence number (1, 2, ...), persisted with the state.
 * 0 when metric is unknown (begin creates it). */
uint64_t ktel_delta__next_seq(struct ktel_delta *d, const char *metric);

/* The number next_seq will hand out next, without taking it (nothing
 * changes): a pull writes it into its records as it makes them and takes it
 * only if it emitted any. 0 when metric is unknown. */
uint64_t ktel_delta__peek_seq(const struct ktel_delta *d, const char *metric);

/* Does the engine hold state (loaded or pulled) for metric's map map_id? */
bool ktel_delta__knows_map(const struct ktel_delta *d, const char *metric, uint32_t map_id);

int ktel_delta__stats(const struct ktel_delta *d, const char *metric, struct ktel_delta_stats *ret);

/*
 * Write the whole state to path atomically: a temp file in the same
 * directory, fsync, rename over path, fsync of the directory. A crash leaves
 * either the old or the new file, never a mix. This is blocking file I/O.
 * The format is binary, native byte order (the file never leaves the
 * machine): header (magic, version, boot id, payload length), payload, and a
 * CRC32 over everything before it.
 */
int ktel_delta__save(const struct ktel_delta *d, const char *path, struct ktel_err *err);

/*
 * The same in two steps, for a save that waits until the records of the
 * pulls it covers are durable (docs/sinks.md, "Delivery guarantees"):
 * snapshot serializes the state as it is now into ret (memory only; clear
 * it with ktel_delta_snapshot__clear); write puts a snapshot at path
 * atomically, as save does (blocking file I/O).
 */
struct ktel_delta_snapshot {
	uint8_t *data;
	size_t len;
};
int ktel_delta__snapshot(const struct ktel_delta *d, struct ktel_delta_snapshot *ret,
			 struct ktel_err *err);
int ktel_delta_snapshot__write(const struct ktel_delta_snapshot *s, const char *path,
			       struct ktel_err *err);
void ktel_delta_snapshot__clear(struct ktel_delta_snapshot *s);

/*
 * Where an emitted window (boot_id, metric, map_id, seq), as read back from
 * a sink's output, stands against the state: SAVED when the state covers it
 * (same boot, the metric's state is of that map and its seq is at least
 * seq), AFTER when the state is of that map but older (the window was
 * emitted after the state was saved: the next pull reports it again), and
 * UNKNOWN otherwise (another boot, metric or map, or not a pulled window).
 */
enum ktel_window_standing ktel_delta__window(const struct ktel_delta *d, const char *boot_id,
					     const char *metric, uint32_t map_id, uint64_t seq);

/* Has the state changed since ktel_delta__mark_saved()? A pull that read
 * the same values as the last one changes nothing worth an fsync. */
bool ktel_delta__dirty(const struct ktel_delta *d);
void ktel_delta__mark_saved(struct ktel_delta *d);

/*
 * Load state written by save. Meant to be called once, right after _new.
 * Returns 0 when loaded and also when path does not exist (empty state).
 * A file that is corrupt, truncated, of another version or of another boot
 * is renamed to "<path>.corrupt-<unix time>" and never trusted: the engine
 * keeps its state untouched and the call returns -EBADMSG (corrupt,
 * truncated, version) or -ESTALE (other boot) with err saying what and where
 * the file went. These two are warnings: the engine is fully usable.
 * Only a file that starts with the state magic is moved aside: anything else
 * at path (another program's file, a sink's output, an empty file, not a
 * regular file, a symlink) is left alone and the call returns -EEXIST, an
 * error: the daemon refuses to start rather than move or overwrite it.
 * Any other negative return (-EACCES, -ENOMEM, ...) is a real error.
 */
int ktel_delta__load(struct ktel_delta *d, const char *path, struct ktel_err *err);

/*
 * What ktel_delta__load() refuses without reading further, checked without
 * reading, moving or writing anything (--check-config): 0 when nothing is
 * at path or a regular file there starts with the state magic (its content
 * is judged only by the load, which moves a bad one aside and goes on);
 * -EEXIST or another -errno, with err worded as the load words it,
 * otherwise. The load makes the same checks through the same code.
 */
int ktel_delta_state_check(const char *path, struct ktel_err *err);

#endif /* KTEL_DELTA_H */
