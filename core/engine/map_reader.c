// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Map reader (map_reader.h). The batch loop is written against the kernel's
 * two batch
 * implementations: hashtab's (cursor = u32 bucket index, whole buckets or
 * -ENOSPC, -ENOENT with data at the end, EBUSY/EDEADLK from bucket locks) and
 * the generic one used by arrays (cursor = last key, -ENOENT at the end).
 */
#include "map_reader.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* Kernel-internal "operation not supported" (not in userspace errno.h). */
#ifndef ENOTSUPP
#define ENOTSUPP 524
#endif

#define ROUND_UP8(x) (((x) + 7) & ~(size_t)7)

struct ktel_map_reader {
	int fd;
	__u32 id, type, key_size, value_size, max_entries;
	char name[BPF_OBJ_NAME_LEN];
	bool percpu;
	unsigned int ncpus;    /* 1 for maps that are not per-CPU */
	size_t raw_value_size; /* bytes per entry as the kernel returns it */
	unsigned int max_retries;
	bool iterate; /* batch unsupported or forced off */
	bool no_take; /* the kernel has no lookup-and-delete for this map */
	char fallback_reason[160];

	const struct ktel_map_reader_sys *sys;
	void *sys_ctx;

	void *keys;        /* max_entries * key_size */
	void *raw;         /* max_entries * raw_value_size */
	void *values;      /* summed per-CPU values, or == raw */
	void *cursor;      /* max(key_size, 4): hashtab's cursor is a u32 */
	__u32 *seen;       /* iteration: open-addressing set of key indexes */
	size_t seen_slots; /* power of two >= 2 * max_entries, sized in _new */
};

/* ---- real syscalls ---- */

static int sys_get_info(void *ctx, int fd, struct bpf_map_info *info)
{
	__u32 len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	return bpf_obj_get_info_by_fd(fd, info, &len);
}

static int sys_num_possible_cpus(void *ctx)
{
	return libbpf_num_possible_cpus();
}

static int sys_lookup_batch(void *ctx, int fd, void *in_batch, void *out_batch, void *keys,
			    void *values, __u32 *count)
{
	return bpf_map_lookup_batch(fd, in_batch, out_batch, keys, values, count, NULL);
}

static int sys_get_next_key(void *ctx, int fd, const void *key, void *next_key)
{
	return bpf_map_get_next_key(fd, key, next_key);
}

static int sys_lookup_elem(void *ctx, int fd, const void *key, void *value)
{
	return bpf_map_lookup_elem(fd, key, value);
}

static int sys_delete_elem(void *ctx, int fd, const void *key)
{
	return bpf_map_delete_elem(fd, key);
}

static int sys_lookup_and_delete_elem(void *ctx, int fd, const void *key, void *value)
{
	return bpf_map_lookup_and_delete_elem(fd, key, value);
}

static const struct ktel_map_reader_sys real_sys = {
	.delete_elem = sys_delete_elem,
	.lookup_and_delete_elem = sys_lookup_and_delete_elem,
	.get_info = sys_get_info,
	.num_possible_cpus = sys_num_possible_cpus,
	.lookup_batch = sys_lookup_batch,
	.get_next_key = sys_get_next_key,
	.lookup_elem = sys_lookup_elem,
};

static bool type_is_percpu(__u32 type)
{
	static const __u32 percpu[] = {
		BPF_MAP_TYPE_PERCPU_HASH,
		BPF_MAP_TYPE_PERCPU_ARRAY,
		BPF_MAP_TYPE_LRU_PERCPU_HASH,
		BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE,
	};
	size_t i;

	for (i = 0; i < sizeof(percpu) / sizeof(percpu[0]); i++)
		if (percpu[i] == type)
			return true;
	return false;
}

static const char *type_name(__u32 type)
{
	const char *s = libbpf_bpf_map_type_str(type);

	return s ? s : "unknown";
}

void ktel_map_reader_sum_percpu(void *out, const void *raw, size_t value_size, unsigned int ncpus)
{
	size_t stride = ROUND_UP8(value_size), w, words = value_size / 8;
	const unsigned char *src = raw;
	unsigned char *dst = out;
	unsigned int cpu;
	__u64 sum, v;

	/* memcpy keeps this correct for any alignment; compilers fold it. */
	for (w = 0; w < words; w++) {
		sum = 0;
		for (cpu = 0; cpu < ncpus; cpu++) {
			memcpy(&v, src + cpu * stride + w * 8, 8);
			sum += v;
		}
		memcpy(dst + w * 8, &sum, 8);
	}
}

/* Check sizes and compute every buffer length without overflow. */
static int size_buffers(struct ktel_map_reader *r, size_t *keys_len, size_t *raw_len,
			size_t *values_len, struct ktel_err *err)
{
	size_t total;

	if (!r->key_size || !r->value_size || !r->max_entries)
		return ktel_err_set(
			err, EINVAL,
			"map %s (id %u, %s): key_size %u, value_size %u, max_entries %u: a map without keys, values or entries cannot be read",
			r->name, r->id, type_name(r->type), r->key_size, r->value_size,
			r->max_entries);
	if (r->percpu && r->value_size % 8)
		return ktel_err_set(
			err, EINVAL,
			"map %s (id %u, %s): value_size %u is not a multiple of 8: per-CPU values are summed per u64 word and must be made of u64 members",
			r->name, r->id, type_name(r->type), r->value_size);
	r->raw_value_size = r->percpu ? ROUND_UP8(r->value_size) * r->ncpus : r->value_size;
	*keys_len = (size_t)r->max_entries * r->key_size;
	*values_len = r->percpu ? (size_t)r->max_entries * r->value_size : 0;
	/* The iteration key set, if ever needed, counts against the limit. */
	r->seen_slots = 16;
	while (r->seen_slots < 2 * (size_t)r->max_entries)
		r->seen_slots <<= 1;
	if (__builtin_mul_overflow((size_t)r->max_entries, r->raw_value_size, raw_len) ||
	    __builtin_add_overflow(*keys_len, *raw_len, &total) ||
	    __builtin_add_overflow(total, *values_len, &total) ||
	    __builtin_add_overflow(total, r->seen_slots * sizeof(*r->seen), &total) ||
	    total > KTEL_MAP_READER_MAX_BYTES)
		return ktel_err_set(
			err, EFBIG,
			"map %s (id %u): %u entries of %u+%zu bytes need more than the reader's limit of %lu MiB",
			r->name, r->id, r->max_entries, r->key_size, r->raw_value_size,
			KTEL_MAP_READER_MAX_BYTES >> 20);
	return 0;
}

static int alloc_seen(struct ktel_map_reader *r, struct ktel_err *err)
{
	r->seen = malloc(r->seen_slots * sizeof(*r->seen));
	if (!r->seen)
		return ktel_err_set(err, ENOMEM,
				    "map %s (id %u): no memory for the iteration key set", r->name,
				    r->id);
	return 0;
}

static void switch_to_iterate(struct ktel_map_reader *r, const char *why)
{
	r->iterate = true;
	snprintf(r->fallback_reason, sizeof(r->fallback_reason), "%s", why);
}

int ktel_map_reader__new(int map_fd, const struct ktel_map_reader_opts *opts,
			 struct ktel_map_reader **ret, struct ktel_err *err)
{
	size_t keys_len = 0, raw_len = 0, values_len = 0;
	struct bpf_map_info info;
	struct ktel_map_reader *r;
	int rc, ncpus;

	r = calloc(1, sizeof(*r));
	if (!r)
		return ktel_err_set(err, ENOMEM, "map fd %d: no memory for a reader", map_fd);
	r->fd = map_fd;
	r->sys = opts && opts->sys ? opts->sys : &real_sys;
	r->sys_ctx = opts ? opts->sys_ctx : NULL;
	r->max_retries = opts && opts->max_retries ? opts->max_retries
						   : KTEL_MAP_READER_DEFAULT_RETRIES;

	rc = r->sys->get_info(r->sys_ctx, map_fd, &info);
	if (rc) {
		ktel_err_set(err, -rc, "map fd %d: cannot read map info: %s", map_fd,
			     strerror(-rc));
		goto free_reader;
	}
	r->id = info.id;
	r->type = info.type;
	r->key_size = info.key_size;
	r->value_size = info.value_size;
	r->max_entries = info.max_entries;
	memcpy(r->name, info.name, sizeof(r->name));
	r->name[sizeof(r->name) - 1] = '\0';

	r->ncpus = 1;
	r->percpu = type_is_percpu(r->type);
	if (r->percpu) {
		ncpus = r->sys->num_possible_cpus(r->sys_ctx);
		if (ncpus <= 0) {
			rc = ktel_err_set(err, ncpus < 0 ? -ncpus : EINVAL,
					  "map %s (id %u): cannot count possible CPUs for a per-CPU map",
					  r->name, r->id);
			goto free_reader;
		}
		r->ncpus = ncpus;
	}
	rc = size_buffers(r, &keys_len, &raw_len, &values_len, err);
	if (rc)
		goto free_reader;

	/*
	 * Zeroed once: deterministic contents, and memory checkers that do not
	 * model BPF_MAP_LOOKUP_BATCH (valgrind 3.19) see defined bytes.
	 */
	r->keys = calloc(r->max_entries, r->key_size);
	r->raw = calloc(r->max_entries, r->raw_value_size);
	r->values = values_len ? calloc(r->max_entries, r->value_size) : r->raw;
	r->cursor = calloc(1, r->key_size < 4 ? 4 : r->key_size);
	if (!r->keys || !r->raw || !r->values || !r->cursor) {
		rc = ktel_err_set(err, ENOMEM, "map %s (id %u): no memory for %zu bytes of buffers",
				  r->name, r->id, keys_len + raw_len + values_len);
		goto free_reader;
	}
	if (opts && opts->force_fallback) {
		rc = alloc_seen(r, err);
		if (rc)
			goto free_reader;
		switch_to_iterate(r, "get_next_key iteration forced by the caller");
	}
	*ret = r;
	return 0;

free_reader:
	ktel_map_reader__free(r);
	return rc;
}

static bool retryable(int rc)
{
	/* Bucket locks: EBUSY (map_locked), EDEADLK/ETIMEDOUT (rqspinlock). */
	return rc == -EBUSY || rc == -EDEADLK || rc == -ETIMEDOUT;
}

static bool batch_unsupported(int rc)
{
	return rc == -EINVAL || rc == -ENOTSUPP || rc == -EOPNOTSUPP;
}

/*
 * What one batch call's result means for the walk: NEXT (call again), END,
 * FULL (no room left: stop, truncated when the map may hold more), or an
 * error. Entries reported with -ENOENT or a lock error are valid: the kernel
 * zeroes count before it walks and reports what it copied.
 */
enum batch_step {
	BATCH_NEXT,
	BATCH_END,
	BATCH_FULL
};

static int batch_step(struct ktel_map_reader *r, int rc, __u32 count, size_t room,
		      struct ktel_map_read_stats *st, struct ktel_err *err)
{
	if (count > room)
		return ktel_err_set(err, EOVERFLOW,
				    "map %s (id %u): batch lookup returned %u entries for room for %zu",
				    r->name, r->id, count, room);
	if (rc == -ENOENT)
		return BATCH_END;
	if (rc == -ENOSPC) {
		/*
		 * The next bucket does not fit in the room left. With the
		 * whole max_entries room it always fits; with less, entries
		 * moved while we walked and the buffers are as full as they
		 * may get: keep what was read and say it is truncated.
		 */
		if (room == r->max_entries)
			return ktel_err_set(
				err, ENOSPC,
				"map %s (id %u): a hash bucket holds more than max_entries (%u) entries",
				r->name, r->id, r->max_entries);
		st->truncated = true;
		return BATCH_FULL;
	}
	if (retryable(rc)) {
		if (st->retries++ >= r->max_retries)
			return ktel_err_set(
				err, -rc,
				"map %s (id %u): batch lookup still failing after %u retries: %s",
				r->name, r->id, r->max_retries, strerror(-rc));
		return count == room ? BATCH_FULL : BATCH_NEXT;
	}
	if (rc)
		return ktel_err_set(err, -rc, "map %s (id %u): batch lookup: %s", r->name, r->id,
				    strerror(-rc));
	if (!count)
		return ktel_err_set(
			err, EIO,
			"map %s (id %u): batch lookup returned no entries and no error: stopped, it would never advance",
			r->name, r->id);
	return count == room ? BATCH_FULL : BATCH_NEXT;
}

/*
 * Batch walk. Returns 0 when the walk ended, 1 when the first call says batch
 * is unsupported (nothing read), or -errno with err set.
 */
static int read_batch(struct ktel_map_reader *r, struct ktel_map_read_stats *st,
		      struct ktel_err *err)
{
	unsigned char *keys = r->keys, *raw = r->raw;
	size_t cap = r->max_entries, n = 0, calls;
	bool started = false;
	__u32 count;
	int rc;

	/*
	 * Every successful call returns entries or ends the walk, and the
	 * room shrinks by what it returns, so a walk takes at most cap calls
	 * plus the retries; the bound guards against a kernel breaking that.
	 * A call that fills the room ends the walk without the final -ENOENT
	 * call: the map never holds more than max_entries at once (arrays
	 * always end this way, in one call).
	 */
	for (calls = 0; calls < cap + r->max_retries + 2; calls++) {
		count = cap - n;
		st->syscalls++;
		rc = r->sys->lookup_batch(r->sys_ctx, r->fd, started ? r->cursor : NULL, r->cursor,
					  keys + n * r->key_size, raw + n * r->raw_value_size,
					  &count);
		if (!started && batch_unsupported(rc))
			return 1;
		rc = batch_step(r, rc, count, cap - n, st, err);
		if (rc < 0)
			return rc;
		/* The kernel writes the cursor only when it returned entries. */
		n += count;
		started |= count > 0;
		if (rc != BATCH_NEXT) {
			st->entries = n;
			return 0;
		}
	}
	return ktel_err_set(err, ELOOP, "map %s (id %u): batch walk did not end within %zu calls",
			    r->name, r->id, calls);
}

static size_t key_hash(const unsigned char *key, size_t len)
{
	size_t h = 2166136261u, i;

	for (i = 0; i < len; i++)
		h = (h ^ key[i]) * 16777619u;
	return h;
}

/* Slot of key in the seen set: either the slot holding an equal key or the
 * empty slot where it belongs. The set holds at most max_entries indexes in
 * 2 * max_entries slots, so probing always ends. */
static size_t seen_slot(const struct ktel_map_reader *r, const void *key)
{
	size_t mask = r->seen_slots - 1, s = key_hash(key, r->key_size) & mask;

	for (; r->seen[s] != UINT32_MAX; s = (s + 1) & mask)
		if (!memcmp((const unsigned char *)r->keys + (size_t)r->seen[s] * r->key_size, key,
			    r->key_size))
			break;
	return s;
}

/*
 * After get_next_key restarted (its cursor key was deleted), move the cursor
 * back to the latest key read that still exists, so the walk resumes near
 * where it was instead of re-walking the map. A few probes only: when none
 * survives, the walk goes on from the restart and skips what it has seen.
 */
static void reanchor(struct ktel_map_reader *r, size_t n, struct ktel_map_read_stats *st)
{
	void *scratch = (unsigned char *)r->raw + n * r->raw_value_size;
	const unsigned char *key;
	size_t j;

	for (j = n; j > 0 && n - j < 8; j--) {
		key = (const unsigned char *)r->keys + (j - 1) * r->key_size;
		st->syscalls++;
		if (!r->sys->lookup_elem(r->sys_ctx, r->fd, key, scratch)) {
			memcpy(r->cursor, key, r->key_size);
			return;
		}
	}
}

/*
 * get_next_key walk. A hash map restarts from its first key when the cursor
 * key was deleted meanwhile, so keys are de-duplicated (a key seen again is a
 * restart: re-anchor once, then skip the repeats), and the walk has room for
 * one full restart before it is declared truncated.
 */
static int read_iterate(struct ktel_map_reader *r, struct ktel_map_read_stats *st,
			struct ktel_err *err)
{
	unsigned char *keys = r->keys, *raw = r->raw;
	size_t cap = r->max_entries, n = 0, steps, max_steps = 2 * cap + 2, s;
	bool started = false, in_repeats = false;
	unsigned char *slot;
	int rc;

	memset(r->seen, 0xff, r->seen_slots * sizeof(*r->seen));
	for (steps = 0;; steps++) {
		if (n == cap || steps == max_steps) {
			st->truncated = steps == max_steps;
			break;
		}
		slot = keys + n * r->key_size;
		st->syscalls++;
		rc = r->sys->get_next_key(r->sys_ctx, r->fd, started ? r->cursor : NULL, slot);
		if (rc == -ENOENT)
			break;
		if (rc)
			return ktel_err_set(err, -rc, "map %s (id %u): get_next_key: %s", r->name,
					    r->id, strerror(-rc));
		memcpy(r->cursor, slot, r->key_size);
		started = true;
		s = seen_slot(r, slot);
		if (r->seen[s] != UINT32_MAX) {
			st->skipped++;
			if (!in_repeats)
				reanchor(r, n, st);
			in_repeats = true;
			continue;
		}
		in_repeats = false;
		st->syscalls++;
		rc = r->sys->lookup_elem(r->sys_ctx, r->fd, slot, raw + n * r->raw_value_size);
		if (rc == -ENOENT) {
			/* Deleted since get_next_key: skip it, keep walking. */
			st->skipped++;
			continue;
		}
		if (rc)
			return ktel_err_set(err, -rc, "map %s (id %u): lookup: %s", r->name, r->id,
					    strerror(-rc));
		r->seen[s] = n++;
	}
	st->entries = n;
	return 0;
}

/* One walk of the whole map: batch, or iteration once batch is known not to
 * work (switching on the first read that finds it unsupported). */
static int read_walk(struct ktel_map_reader *r, struct ktel_map_read_stats *st,
		     struct ktel_err *err)
{
	char why[160];
	int rc;

	if (!r->iterate) {
		st->method = "batch";
		rc = read_batch(r, st, err);
		if (rc <= 0)
			return rc;
		rc = alloc_seen(r, err);
		if (rc)
			return rc;
		snprintf(why, sizeof(why), "batch unsupported for map type %s: using get_next_key",
			 type_name(r->type));
		switch_to_iterate(r, why);
	}
	st->method = "iterate";
	return read_iterate(r, st, err);
}

int ktel_map_reader__read(struct ktel_map_reader *r, struct ktel_map_snapshot *ret,
			  struct ktel_err *err)
{
	struct ktel_map_read_stats st = {0};
	size_t i;
	int rc;

	rc = read_walk(r, &st, err);
	if (!rc && st.truncated) {
		/*
		 * The walk ran out of room (-ENOSPC part-way: entries moved
		 * under it) or out of steps (get_next_key kept restarting).
		 * ENOSPC means retry with more room, and the most
		 * room the buffers have is a fresh walk's max_entries. Once:
		 * a map churning that hard would only do it again.
		 */
		st.rewalks++;
		st.truncated = false;
		rc = read_walk(r, &st, err);
	}
	if (rc)
		return rc;
	if (r->percpu)
		for (i = 0; i < st.entries; i++)
			ktel_map_reader_sum_percpu((unsigned char *)r->values + i * r->value_size,
						   (const unsigned char *)r->raw +
							   i * r->raw_value_size,
						   r->value_size, r->ncpus);
	ret->keys = r->keys;
	ret->values = r->values;
	ret->count = st.entries;
	ret->key_size = r->key_size;
	ret->value_size = r->value_size;
	ret->stats = st;
	return 0;
}

const char *ktel_map_reader__method(const struct ktel_map_reader *r)
{
	return r->iterate ? "iterate" : "batch";
}

const char *ktel_map_reader__fallback_reason(const struct ktel_map_reader *r)
{
	return r->iterate ? r->fallback_reason : NULL;
}

__u32 ktel_map_reader__map_id(const struct ktel_map_reader *r)
{
	return r->id;
}

const char *ktel_map_reader__map_name(const struct ktel_map_reader *r)
{
	return r->name;
}

__u32 ktel_map_reader__max_entries(const struct ktel_map_reader *r)
{
	return r->max_entries;
}

bool ktel_map_reader__is_percpu(const struct ktel_map_reader *r)
{
	return r->percpu;
}

void ktel_map_reader__free(struct ktel_map_reader *r)
{
	if (!r)
		return;
	if (r->values != r->raw)
		free(r->values);
	free(r->raw);
	free(r->keys);
	free(r->cursor);
	free(r->seen);
	free(r);
}

int ktel_map_reader__take(struct ktel_map_reader *r, size_t i)
{
	unsigned char *raw = (unsigned char *)r->raw + i * r->raw_value_size;
	const void *key = (const unsigned char *)r->keys + i * r->key_size;
	int rc;

	if (i >= r->max_entries)
		return -EINVAL;
	if (!r->sys->lookup_and_delete_elem || r->no_take)
		return -EOPNOTSUPP;
	rc = r->sys->lookup_and_delete_elem(r->sys_ctx, r->fd, key, raw);
	/* Hash maps take this command since 5.14; before, the kernel
	 * answers -ENOTSUPP (524, which user space has no name for) or,
	 * for a flagless call on some types, -EINVAL. */
	if (rc == -EOPNOTSUPP || rc == -524 || rc == -EINVAL) {
		r->no_take = true;
		return -EOPNOTSUPP;
	}
	if (rc)
		return rc;
	if (r->percpu)
		ktel_map_reader_sum_percpu((unsigned char *)r->values + i * r->value_size, raw,
					   r->value_size, r->ncpus);
	return 0;
}

int ktel_map_reader__delete(struct ktel_map_reader *r, const void *key)
{
	if (!r->sys->delete_elem)
		return -EOPNOTSUPP;
	return r->sys->delete_elem(r->sys_ctx, r->fd, key);
}
