/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Attribution fold: one metric's pull, per window, from raw attribution ids
 * to at most K names plus "other" and "unknown".
 *
 * A pull of an attributed metric hands its delta records here instead of to
 * the router (records carry the attribution dimension with the raw id, see
 * metric_pull.h attr_name). For each record the fold names the id through
 * the resolve callback (attr_names.h in the daemon; anything in tests):
 * the kernel's overflow id is "other", an id that does not resolve is
 * "unknown", several ids with one name are one name. At the window's end it
 * ranks the names by the window's event count and keeps an admitted set of
 * at most K:
 *   - sticky: an admitted name stays while it had events in the last W
 *     windows, so the cumulative series of the sinks that keep totals
 *     (Prometheus, remote_write) do not flap in and out;
 *   - free places go to the newcomers with the most events, at most
 *     churn_per_hour of them per hour (a token bucket, full at start);
 *   - the rest is folded into "other".
 * It then emits, per (other dimensions, name), one record whose delta is
 * the bucket-wise sum of what it folded and whose total is the fold's own
 * running total of that output series. A series the fold forgets (its
 * name evicted from the admitted set, or released) ends with one record
 * with series_end (record.h). So, for every window, the sum over
 * the attribution values equals the unattributed total bucket by bucket,
 * and there are never more than K + 2 values.
 *
 * Pure: no I/O, no clock (the caller passes the window's time). The
 * records' strings are copied where the fold keeps them past a call.
 */
#ifndef KTEL_ATTR_FOLD_H
#define KTEL_ATTR_FOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metric_pull.h"
#include "record.h"

#define KTEL_ATTR_OTHER "other"
#define KTEL_ATTR_UNKNOWN "unknown"

/*
 * Name id (not KTEL_ATTR_OVERFLOW_ID or KTEL_ATTR_UNKNOWN_ID, which the fold
 * handles) into buf (len bytes): returns buf, or NULL when the id cannot be
 * named (it becomes "unknown"). A name "other" or "unknown" joins those.
 */
typedef const char *(*ktel_attr_resolve_fn)(void *ctx, uint64_t id, char *buf, size_t len);

struct ktel_attr_fold_opts {
	const char *dim_name; /* the attribution dimension's name in records ("cgroup") */
	uint32_t top;         /* K, >= 1 */
	uint32_t sticky_windows;
	uint32_t churn_per_hour;
	ktel_attr_resolve_fn resolve;
	void *resolve_ctx;
	/*
	 * Optional, both or neither: an id resolved once while its name
	 * stays, not once per window. generation(resolve_ctx) moves on
	 * whenever resolve could name some id differently than it did (0: it
	 * may at any time). An id that resolved to a name in an earlier
	 * window, the generation now what it was right after that resolve,
	 * keeps the name, and used(resolve_ctx, id, hint) is called instead
	 * at its first record of the window: it does what resolve would have
	 * done for the id besides naming it and returns true, or does nothing
	 * and returns false (resolve is then called). *hint is kept by the
	 * fold per id for used, 0 at first.
	 */
	uint64_t (*generation)(void *ctx);
	bool (*used)(void *ctx, uint64_t id, uint64_t *hint);
	/* Optional, with used: fetch ahead what used will touch for hint,
	 * called for a batch of keys before they are folded. */
	void (*prefetch)(void *ctx, uint64_t hint);
};

/* What a fold has done, for self-telemetry. Event counts are cumulative. */
struct ktel_attr_fold_stats {
	uint64_t folded_kernel; /* events under the kernel's overflow id */
	uint64_t folded_user;   /* events of names not admitted */
	uint64_t unknown;       /* events whose id did not resolve */
	uint64_t admissions;    /* names admitted so far */
	uint64_t evictions;     /* admitted names dropped for inactivity or release */
	uint64_t released;      /* names released (no live id carries them) */
	uint64_t ended;         /* series ended (records with series_end) */
	/* Events (histogram counts, counter deltas) of the windows' records
	 * the fold took in, and of the records it handed on without
	 * series_end (those a sink writing deltas writes): equal unless a
	 * window failed (out of memory) or an ending record carried a
	 * delta, which is the first thing to compare when a sum comes out
	 * short. */
	uint64_t events_in, events_out;
	uint32_t admitted;    /* names admitted now */
	uint32_t tracked;     /* names the fold keeps (admitted or recent) */
	uint32_t values_last; /* attribution values of the last window */
};

struct ktel_attr_fold;

int ktel_attr_fold__new(const struct ktel_attr_fold_opts *opts, struct ktel_attr_fold **ret,
			struct ktel_err *err);
void ktel_attr_fold__free(struct ktel_attr_fold *f);

/*
 * No live id carries the name text any more (its cgroup was released and
 * no other id has its name): at the end of the first window in which it
 * has no events (normally the next), its series end (one record each with
 * series_end, record.h, zero delta and the final total) and the fold
 * forgets the name. A name the fold does not know is ignored. A name
 * still carried by another id (a restarted service's new cgroup at the
 * old path) must not be released: its series go on.
 */
void ktel_attr_fold__release(struct ktel_attr_fold *f, const char *text);

/* Start a window (a pull). */
void ktel_attr_fold__begin(struct ktel_attr_fold *f);

/* Fold a pull's records (a ktel_pull_records_fn, ctx the fold). Out of
 * memory is remembered and reported by _end. */
void ktel_attr_fold__add(void *ctx, const struct ktel_record *recs, size_t n);

/*
 * Fold a batch of a pull's keys (a ktel_pull_keys_fn for
 * ktel_metric_pull__run_keys, ctx the fold), as _add folds their records:
 * the fold keeps, per place in the snapshot, the key's bytes and what its
 * record's other dimensions were, so a key it finds at its place again is
 * folded from its delta alone; any other key from its record, once.
 */
void ktel_attr_fold__add_keys(void *ctx, const struct ktel_pull_keys *b);

/*
 * End the window at now_ns (any monotonic clock, for the churn budget):
 * rank, admit, and hand the folded records to fn(ctx, ...), at most
 * KTEL_PULL_WINDOW at a time. Returns the number of records emitted, or
 * -ENOMEM (err set) when the window could not be folded (nothing emitted).
 */
long ktel_attr_fold__end(struct ktel_attr_fold *f, uint64_t now_ns, ktel_pull_records_fn fn,
			 void *ctx, struct ktel_err *err);

/*
 * The metric's cumulative totals (ktel_metric_pull__totals, every key's
 * record with its total) as the history the fold's first window starts
 * from: between the first _begin and _end, after the window's _add. The
 * output series' running totals then start from those of the raw ids they
 * fold (a pinned map the daemon reused keeps its history by name), and the
 * first window ranks names by that history, not by its own events alone.
 * Ignored after the first window.
 */
void ktel_attr_fold__add_history(void *ctx, const struct ktel_record *recs, size_t n);

/* Is the window begun the fold's first (does it take a history)? */
bool ktel_attr_fold__first_window(const struct ktel_attr_fold *f);

/* The last window's records again, as _end emitted them (for show). */
void ktel_attr_fold__last(struct ktel_attr_fold *f, ktel_pull_records_fn fn, void *ctx);

/*
 * Every output series' running total as of the last window, in records
 * whose delta is their total (as ktel_metric_pull__totals gives): for show
 * and the cumulative sinks' start-up totals, with the windows' names.
 */
void ktel_attr_fold__totals(struct ktel_attr_fold *f, ktel_pull_records_fn fn, void *ctx);

void ktel_attr_fold__stats(const struct ktel_attr_fold *f, struct ktel_attr_fold_stats *ret);

#endif /* KTEL_ATTR_FOLD_H */
