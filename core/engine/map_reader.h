/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Map reader: copies every entry of one BPF map into buffers
 * owned by the reader, with one BPF_MAP_LOOKUP_BATCH syscall in the common
 * case, and falls back to get_next_key + lookup_elem iteration only for map
 * types or kernels without batch support.
 *
 * Buffers are sized from the map's max_entries once, in _new, and reused by
 * every read: a steady-state read allocates nothing. A read never returns
 * more than max_entries entries, even when the map changes while it is walked.
 *
 * A read is a walk, not an atomic snapshot: entries added or removed during
 * the walk may or may not be seen. Each key is returned at most once.
 *
 * Per-CPU maps (PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH,
 * PERCPU_CGROUP_STORAGE) are returned with one value per key: the sum over
 * the possible CPUs, computed per 8-byte word as a u64. Their values must
 * therefore be made only of u64 members (accumulators are: buckets, sums and
 * counters), and their value_size must be a multiple of 8; _new refuses other
 * sizes. The reader knows no layout: a narrower member would carry into its
 * neighbour ({s32 a = -1; u32 b = 0} on two CPUs reads b = 1), so the caller,
 * which has the BTF, refuses such values (metric_pull does).
 */
#ifndef KTEL_MAP_READER_H
#define KTEL_MAP_READER_H

#include <stdbool.h>
#include <stddef.h>

#include <linux/bpf.h>
#include <linux/types.h>

#include "error.h"

/* Default bound on EBUSY/EDEADLK/ETIMEDOUT retries within one read. */
#define KTEL_MAP_READER_DEFAULT_RETRIES 8
/* A reader refuses maps whose buffers would exceed this many bytes. */
#define KTEL_MAP_READER_MAX_BYTES (512UL << 20)

/*
 * The bpf() operations the reader performs. NULL in the options selects the
 * real syscalls (libbpf); tests substitute their own to produce kernel answers
 * that cannot be provoked on demand (EBUSY, ENOSPC, a zero count...). Each
 * returns 0 or -errno, like libbpf 1.x; lookup_batch writes *count on return
 * exactly as the kernel leaves attr.batch.count.
 */
struct ktel_map_reader_sys {
	int (*get_info)(void *ctx, int fd, struct bpf_map_info *info);
	int (*num_possible_cpus)(void *ctx);
	int (*lookup_batch)(void *ctx, int fd, void *in_batch, void *out_batch, void *keys,
			    void *values, __u32 *count);
	int (*get_next_key)(void *ctx, int fd, const void *key, void *next_key);
	int (*lookup_elem)(void *ctx, int fd, const void *key, void *value);
	/* Optional (NULL: ktel_map_reader__delete answers -EOPNOTSUPP). */
	int (*delete_elem)(void *ctx, int fd, const void *key);
	/* Optional (NULL: ktel_map_reader__take answers -EOPNOTSUPP). value
	 * is laid out as lookup_elem's (per CPU for a per-CPU map). */
	int (*lookup_and_delete_elem)(void *ctx, int fd, const void *key, void *value);
};

struct ktel_map_reader_opts {
	/* Use get_next_key iteration even where batch works (tests, benchmark). */
	bool force_fallback;
	/* Bound on retryable errors per read; 0 selects the default. */
	unsigned int max_retries;
	/* NULL: real bpf() syscalls. */
	const struct ktel_map_reader_sys *sys;
	void *sys_ctx;
};

struct ktel_map_read_stats {
	const char *method;    /* "batch" or "iterate" */
	unsigned int syscalls; /* bpf() calls made by this read */
	size_t entries;        /* == snapshot count */
	unsigned int retries;  /* retryable errors met and retried */
	size_t skipped;        /* keys gone between get_next_key and lookup,
				 * or seen again after an iteration restart */
	unsigned int rewalks;  /* walks started over because the one
				 * before was truncated (at most 1) */
	bool truncated;        /* a bound (the room left or the walk step
				 * limit) stopped the last walk before its
				 * end: the snapshot is INCOMPLETE, keys
				 * that exist may be missing from it */
};

/*
 * The result of one read. keys and values point into the reader's buffers:
 * valid until the next read or free. Entry i is keys + i * key_size and
 * values + i * value_size (per-CPU values already summed).
 */
struct ktel_map_snapshot {
	const void *keys;
	const void *values;
	size_t count;
	size_t key_size;
	size_t value_size;
	struct ktel_map_read_stats stats;
};

struct ktel_map_reader;

/*
 * Read the map's type, sizes, id and name from map_fd (which must stay open
 * while the reader lives; the reader does not own it) and allocate all
 * buffers. opts may be NULL. Returns 0 and sets *ret, or -errno with err set.
 */
int ktel_map_reader__new(int map_fd, const struct ktel_map_reader_opts *opts,
			 struct ktel_map_reader **ret, struct ktel_err *err);

/*
 * Read every entry of the map into the reader's buffers and describe them in
 * *ret (written only on success). The first read that finds batch lookup
 * unsupported (EINVAL/ENOTSUPP/EOPNOTSUPP on its first batch call) switches
 * this reader to iteration for good; ktel_map_reader__fallback_reason() then
 * says why. A walk that a bound stopped early is walked once more from the
 * start with the whole room (stats.rewalks); when that one is cut short too,
 * the read still succeeds with stats.truncated set, and the caller must not
 * treat the snapshot as the whole map. Returns 0 or -errno with err set.
 */
int ktel_map_reader__read(struct ktel_map_reader *r, struct ktel_map_snapshot *ret,
			  struct ktel_err *err);

/* "batch" or "iterate": what the next read will use. */
const char *ktel_map_reader__method(const struct ktel_map_reader *r);

/* Why this reader iterates instead of batching, or NULL while it batches. */
const char *ktel_map_reader__fallback_reason(const struct ktel_map_reader *r);

__u32 ktel_map_reader__map_id(const struct ktel_map_reader *r);
const char *ktel_map_reader__map_name(const struct ktel_map_reader *r);
__u32 ktel_map_reader__max_entries(const struct ktel_map_reader *r);
bool ktel_map_reader__is_percpu(const struct ktel_map_reader *r);

/* Delete key from the map (not a read: the attribution's ageing). 0 or
 * -errno (-ENOENT: not there). */
int ktel_map_reader__delete(struct ktel_map_reader *r, const void *key);

/*
 * Take entry i of the last read's snapshot out of the map: delete its key
 * and, in the same bpf() call (BPF_MAP_LOOKUP_AND_DELETE_ELEM), get the
 * value it held at that moment, which replaces entry i's value in the
 * snapshot (per-CPU values summed). An event counted under the key
 * between the read and the delete is in that value, where a read followed
 * by a delete would lose it. 0; -ENOENT (the key is not there: entry i
 * unchanged); -EOPNOTSUPP (the kernel has no such command for this map,
 * before 5.14, said once and then without a call; the caller deletes
 * instead); or another -errno.
 */
int ktel_map_reader__take(struct ktel_map_reader *r, size_t i);

/* Accepts NULL. Does not close the map fd. */
void ktel_map_reader__free(struct ktel_map_reader *r);

/*
 * Sum n per-CPU values laid out as the kernel returns them (each CPU's copy
 * at a stride of round_up(value_size, 8)) into out, per u64 word.
 * value_size must be a multiple of 8. Exposed for unit tests.
 */
void ktel_map_reader_sum_percpu(void *out, const void *raw, size_t value_size, unsigned int ncpus);

#endif /* KTEL_MAP_READER_H */
