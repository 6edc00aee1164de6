// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Map reader logic without a kernel: the reader's bpf() calls go to a fake
 * map that answers the way the kernel's hashtab batch code does (u32 bucket
 * cursor written to out_batch, count zeroed then set, -ENOENT with the last
 * entries, get_next_key restarting from the first key when its cursor key is
 * gone), plus scripted answers the real kernel gives only under races: EBUSY,
 * EDEADLK, -ENOSPC, a zero count, a count larger than asked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "map_reader.h"

#ifndef ENOTSUPP
#define ENOTSUPP 524
#endif

#define MAXN 64
#define MAXCPU 4
#define NSCRIPT 16

/* One scripted batch answer: copy up to take entries (-1: all that fit), return rc. */
struct step {
	int rc;
	int take;
	__u32 force_count; /* non-zero: report this count whatever was copied */
};

#define STEP(r, t) ((struct step){.rc = (r), .take = (t)})

struct fake {
	struct bpf_map_info info;
	int ncpus;
	__u32 n;                     /* live entries, in walk order */
	__u16 keys[MAXN];            /* keys are u16 ... */
	__u64 vals[MAXN][MAXCPU][2]; /* ... values up to 2 u64 per CPU */
	struct step script[NSCRIPT];
	int nscript, batch_calls, gnk_calls, lookup_calls;
	bool saw_null_first, cursor_ok;
	__u32 last_cursor;
	int delete_at_gnk; /* delete the returned key after this gnk call */
	bool cycle;        /* get_next_key never ends: 0,1,0,1... */
	int take_rc;       /* non-zero: lookup_and_delete answers it */
	int take_calls;
};

static int fake_info(void *ctx, int fd, struct bpf_map_info *info)
{
	*info = ((struct fake *)ctx)->info;
	return 0;
}

static int fake_ncpus(void *ctx)
{
	return ((struct fake *)ctx)->ncpus;
}

static size_t raw_size(const struct fake *f)
{
	bool percpu = f->info.type == BPF_MAP_TYPE_PERCPU_HASH;

	return percpu ? ((f->info.value_size + 7) & ~7u) * f->ncpus : f->info.value_size;
}

static void copy_value(const struct fake *f, __u32 i, unsigned char *dst)
{
	bool percpu = f->info.type == BPF_MAP_TYPE_PERCPU_HASH;
	size_t stride = (f->info.value_size + 7) & ~7u;

	for (int c = 0; c < (percpu ? f->ncpus : 1); c++)
		memcpy(dst + c * stride, f->vals[i][c], f->info.value_size);
}

static int fake_batch(void *ctx, int fd, void *in_batch, void *out_batch, void *keys, void *values,
		      __u32 *count)
{
	struct fake *f = ctx;
	struct step st = {.rc = 0, .take = -1};
	__u32 pos = 0, room = *count, take, i;

	if (f->batch_calls < f->nscript)
		st = f->script[f->batch_calls];
	if (f->batch_calls++ == 0)
		f->saw_null_first = in_batch == NULL;
	if (st.rc == -EINVAL || st.rc == -ENOTSUPP)
		return st.rc; /* early kernel errors leave count untouched */
	if (in_batch) {
		memcpy(&pos, in_batch, 4);
		f->cursor_ok &= pos == f->last_cursor;
	}
	*count = 0;
	take = f->n - pos < room ? f->n - pos : room;
	if (st.take >= 0 && (__u32)st.take < take)
		take = st.take;
	for (i = 0; i < take; i++) {
		memcpy((unsigned char *)keys + i * f->info.key_size, &f->keys[pos + i],
		       f->info.key_size);
		copy_value(f, pos + i, (unsigned char *)values + i * raw_size(f));
	}
	pos += take;
	/* hashtab writes its u32 bucket cursor whatever the key size. */
	memcpy(out_batch, &pos, 4);
	f->last_cursor = pos;
	*count = st.force_count ? st.force_count : take;
	if (st.rc)
		return st.rc;
	return pos == f->n ? -ENOENT : 0;
}

static int find_key(const struct fake *f, const void *key)
{
	for (__u32 i = 0; i < f->n; i++)
		if (!memcmp(&f->keys[i], key, f->info.key_size))
			return i;
	return -1;
}

static void delete_at(struct fake *f, __u32 i)
{
	memmove(&f->keys[i], &f->keys[i + 1], (f->n - i - 1) * sizeof(f->keys[0]));
	memmove(&f->vals[i], &f->vals[i + 1], (f->n - i - 1) * sizeof(f->vals[0]));
	f->n--;
}

/* Like htab_map_get_next_key: a missing cursor key restarts from the first. */
static int fake_gnk(void *ctx, int fd, const void *key, void *next)
{
	struct fake *f = ctx;
	int i = key ? find_key(f, key) : -1;
	__u32 nexti = i < 0 ? 0 : i + 1;

	f->gnk_calls++;
	if (f->cycle)
		nexti = f->gnk_calls % 2;
	if (nexti >= f->n)
		return -ENOENT;
	memcpy(next, &f->keys[nexti], f->info.key_size);
	if (f->gnk_calls == f->delete_at_gnk)
		delete_at(f, nexti);
	return 0;
}

static int fake_lookup(void *ctx, int fd, const void *key, void *value)
{
	struct fake *f = ctx;
	int i = find_key(f, key);

	f->lookup_calls++;
	if (i < 0)
		return -ENOENT;
	copy_value(f, i, value);
	return 0;
}

static int fake_lookup_and_delete(void *ctx, int fd, const void *key, void *value)
{
	struct fake *f = ctx;
	int i = find_key(f, key);

	f->take_calls++;
	if (f->take_rc)
		return f->take_rc;
	if (i < 0)
		return -ENOENT;
	copy_value(f, i, value);
	delete_at(f, i);
	return 0;
}

static const struct ktel_map_reader_sys fake_sys = {
	.lookup_and_delete_elem = fake_lookup_and_delete,
	.get_info = fake_info,
	.num_possible_cpus = fake_ncpus,
	.lookup_batch = fake_batch,
	.get_next_key = fake_gnk,
	.lookup_elem = fake_lookup,
};

/* A fake map of n u16 keys (k*5+1) with 8-byte values k*100 + cpu + 1. */
static struct fake *fake_new(__u32 type, __u32 n, __u32 max_entries, int ncpus)
{
	struct fake *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->info.type = type;
	f->info.key_size = 2;
	f->info.value_size = 8;
	f->info.max_entries = max_entries;
	f->info.id = 42;
	strcpy(f->info.name, "fake_map");
	f->ncpus = ncpus;
	f->n = n;
	f->cursor_ok = true;
	for (__u32 i = 0; i < n; i++) {
		f->keys[i] = i * 5 + 1;
		for (int c = 0; c < MAXCPU; c++)
			f->vals[i][c][0] = f->keys[i] * 100ull + c + 1;
	}
	return f;
}

static struct ktel_map_reader *reader(struct fake *f, bool fallback, unsigned int retries)
{
	struct ktel_map_reader_opts o = {
		.force_fallback = fallback,
		.max_retries = retries,
		.sys = &fake_sys,
		.sys_ctx = f,
	};
	struct ktel_map_reader *r = NULL;
	struct ktel_err err = {0};

	if (ktel_map_reader__new(3, &o, &r, &err))
		fail_msg("new: %s", err.msg);
	return r;
}

/* Every key of the fake (first n of the original fill) exactly once, right value. */
static void check(const struct ktel_map_snapshot *s, __u32 n, int ncpus)
{
	bool seen[MAXN * 5 + 2] = {0};

	assert_int_equal(s->count, n);
	for (size_t e = 0; e < s->count; e++) {
		__u16 k;
		__u64 v, want = 0;

		memcpy(&k, (const char *)s->keys + 2 * e, 2);
		memcpy(&v, (const char *)s->values + 8 * e, 8);
		assert_true(k % 5 == 1 && k < sizeof(seen));
		assert_false(seen[k]);
		seen[k] = true;
		for (int c = 0; c < ncpus; c++)
			want += k * 100ull + c + 1;
		assert_int_equal(v, want);
	}
}

static void test_sum_percpu(void **state)
{
	__u64 raw[3][2] = {{1, 10}, {2, 20}, {4, UINT64_MAX - 30}}, out[2];

	ktel_map_reader_sum_percpu(out, raw, 16, 3);
	assert_int_equal(out[0], 7);
	assert_int_equal(out[1], UINT64_MAX); /* 10 + 20 + (max - 30) */
	ktel_map_reader_sum_percpu(out, raw, 8, 1);
	assert_int_equal(out[0], 1);
}

static void test_one_call_enoent_with_data(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;

	assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
	check(&s, 40, 1);
	assert_true(f->saw_null_first);
	assert_int_equal(s.stats.syscalls, 1);
	assert_string_equal(s.stats.method, "batch");
	assert_int_equal(ktel_map_reader__map_id(r), 42);
	ktel_map_reader__free(r);
	free(f);
}

static void test_partial_calls_and_cursor(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;

	/* 2-byte keys with a 4-byte cursor: ASan catches an undersized buffer. */
	f->script[0] = STEP(0, 7);
	f->script[1] = STEP(0, 1);
	f->script[2] = STEP(0, 30);
	f->nscript = 3;
	assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
	check(&s, 40, 1);
	assert_true(f->cursor_ok);
	assert_int_equal(s.stats.syscalls, 4);
	ktel_map_reader__free(r);
	free(f);
}

static void test_busy_retried(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;

	/* Entries copied before the lock error are kept; the cursor moves on. */
	f->script[0] = STEP(-EBUSY, 5);
	f->script[1] = STEP(-EDEADLK, 0);
	f->script[2] = STEP(-EBUSY, 10);
	f->nscript = 3;
	assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
	check(&s, 40, 1);
	assert_int_equal(s.stats.retries, 3);
	assert_int_equal(s.stats.syscalls, 4);
	assert_true(f->cursor_ok);
	ktel_map_reader__free(r);
	free(f);
}

static void test_busy_bounded(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 3);
	struct ktel_map_snapshot s = {.count = 777};
	struct ktel_err err = {0};

	for (int i = 0; i < NSCRIPT; i++)
		f->script[i] = STEP(-EBUSY, 0);
	f->nscript = NSCRIPT;
	assert_int_equal(ktel_map_reader__read(r, &s, &err), -EBUSY);
	assert_int_equal(f->batch_calls, 4); /* first try + 3 retries */
	assert_non_null(strstr(err.msg, "fake_map"));
	assert_non_null(strstr(err.msg, "3 retries"));
	assert_int_equal(s.count, 777); /* output untouched on failure */
	ktel_map_reader__free(r);
	free(f);
}

static void test_zero_count_never_spins(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;
	struct ktel_err err = {0};

	for (int i = 0; i < NSCRIPT; i++)
		f->script[i] = STEP(0, 0);
	f->nscript = NSCRIPT;
	assert_int_equal(ktel_map_reader__read(r, &s, &err), -EIO);
	assert_int_equal(f->batch_calls, 1);
	assert_non_null(strstr(err.msg, "never advance"));
	ktel_map_reader__free(r);
	free(f);
}

static void test_enospc(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;
	struct ktel_err err = {0};

	/* With the whole room, a bucket that does not fit is impossible: error. */
	f->script[0] = STEP(-ENOSPC, 0);
	f->nscript = 1;
	assert_int_equal(ktel_map_reader__read(r, &s, &err), -ENOSPC);
	assert_non_null(strstr(err.msg, "max_entries"));

	/*
	 * After some entries, it means the room left is too small: the walk
	 * is started over once with the whole room, which here completes.
	 */
	f->batch_calls = 0;
	f->script[0] = STEP(0, 12);
	f->script[1] = STEP(-ENOSPC, 0);
	f->nscript = 2;
	assert_int_equal(ktel_map_reader__read(r, &s, &err), 0);
	check(&s, 40, 1);
	assert_false(s.stats.truncated);
	assert_int_equal(s.stats.rewalks, 1);
	assert_int_equal(s.stats.syscalls, 3);

	/* Cut short again: one walk more only, and the read says truncated. */
	f->batch_calls = 0;
	f->script[2] = STEP(0, 7);
	f->script[3] = STEP(-ENOSPC, 0);
	f->nscript = 4;
	assert_int_equal(ktel_map_reader__read(r, &s, &err), 0);
	assert_int_equal(s.count, 7);
	assert_true(s.stats.truncated);
	assert_int_equal(s.stats.rewalks, 1);
	assert_int_equal(f->batch_calls, 4);
	ktel_map_reader__free(r);
	free(f);
}

static void test_count_beyond_room_refused(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;
	struct ktel_err err = {0};

	f->script[0] = (struct step){.rc = 0, .take = 10, .force_count = 65};
	f->nscript = 1;
	assert_int_equal(ktel_map_reader__read(r, &s, &err), -EOVERFLOW);
	ktel_map_reader__free(r);
	free(f);
}

static void test_full_room_stops(void **state)
{
	/* One entry more than the room: the call fills it and answers 0. */
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 41, 40, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;

	/* Nothing more fits, so no second call is made. */
	assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
	check(&s, 40, 1);
	assert_int_equal(f->batch_calls, 1);
	ktel_map_reader__free(r);
	free(f);
}

static void test_unsupported_switches_once(void **state)
{
	int codes[] = {-EINVAL, -ENOTSUPP, -EOPNOTSUPP};

	for (size_t c = 0; c < 3; c++) {
		struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 20, 64, 1);
		struct ktel_map_reader *r = reader(f, false, 0);
		struct ktel_map_snapshot s;

		f->script[0] = STEP(codes[c], 0);
		f->nscript = 1;
		assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
		check(&s, 20, 1);
		assert_string_equal(s.stats.method, "iterate");
		assert_non_null(strstr(ktel_map_reader__fallback_reason(r), "hash"));
		assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
		check(&s, 20, 1);
		assert_int_equal(f->batch_calls, 1); /* never tried again */
		ktel_map_reader__free(r);
		free(f);
	}
}

static void test_einval_later_is_an_error(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 20, 64, 1);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;
	struct ktel_err err = {0};

	f->script[0] = STEP(0, 5);
	f->script[1] = STEP(-EINVAL, 0);
	f->nscript = 2;
	assert_int_equal(ktel_map_reader__read(r, &s, &err), -EINVAL);
	assert_string_equal(ktel_map_reader__method(r), "batch");
	ktel_map_reader__free(r);
	free(f);
}

static void test_percpu_summed(void **state)
{
	for (int fallback = 0; fallback < 2; fallback++) {
		struct fake *f = fake_new(BPF_MAP_TYPE_PERCPU_HASH, 30, 64, 3);
		struct ktel_map_reader *r = reader(f, fallback, 0);
		struct ktel_map_snapshot s;

		assert_true(ktel_map_reader__is_percpu(r));
		assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
		check(&s, 30, 3);
		ktel_map_reader__free(r);
		free(f);
	}
}

/* take: the value as the key left the map (per CPU, summed) replaces the
 * one read; a key gone is -ENOENT; a kernel without the command is said
 * once, then not asked again. */
static void test_take(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_PERCPU_HASH, 10, 64, 3);
	struct ktel_map_reader *r = reader(f, false, 0);
	struct ktel_map_snapshot s;
	__u16 k;
	__u64 v;

	assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
	check(&s, 10, 3);
	memcpy(&k, (const char *)s.keys + 2 * 4, 2);
	/* Events after the read, on every CPU. */
	for (int c = 0; c < 3; c++)
		f->vals[find_key(f, &k)][c][0] += 7;
	assert_int_equal(ktel_map_reader__take(r, 4), 0);
	memcpy(&v, (const char *)s.values + 8 * 4, 8);
	assert_int_equal(v, 3 * (k * 100ull) + 1 + 2 + 3 + 3 * 7);
	assert_int_equal(f->n, 9);
	assert_true(find_key(f, &k) < 0);
	assert_int_equal(ktel_map_reader__take(r, 4), -ENOENT);
	memcpy(&v, (const char *)s.values + 8 * 4, 8);
	assert_int_equal(v, 3 * (k * 100ull) + 1 + 2 + 3 + 3 * 7);
	f->take_rc = -ENOTSUPP;
	assert_int_equal(ktel_map_reader__take(r, 5), -EOPNOTSUPP);
	assert_int_equal(ktel_map_reader__take(r, 6), -EOPNOTSUPP);
	assert_int_equal(f->take_calls, 3);
	assert_int_equal(f->n, 9);
	ktel_map_reader__free(r);
	free(f);
}

static void test_refusals(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_PERCPU_HASH, 0, 64, 2);
	struct ktel_map_reader_opts o = {.sys = &fake_sys, .sys_ctx = f};
	struct ktel_map_reader *r = NULL;
	struct ktel_err err = {0};

	f->info.value_size = 12;
	assert_int_equal(ktel_map_reader__new(3, &o, &r, &err), -EINVAL);
	assert_null(r);
	assert_non_null(strstr(err.msg, "multiple of 8"));

	/* A 1-CPU machine still gets the per-CPU rule (stride rounding). */
	f->ncpus = 1;
	assert_int_equal(ktel_map_reader__new(3, &o, &r, &err), -EINVAL);

	f->info.type = BPF_MAP_TYPE_RINGBUF;
	f->info.key_size = 0;
	assert_int_equal(ktel_map_reader__new(3, &o, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "cannot be read"));

	f->info.type = BPF_MAP_TYPE_HASH;
	f->info.key_size = 4;
	f->info.value_size = 4096;
	f->info.max_entries = 1u << 20;
	assert_int_equal(ktel_map_reader__new(3, &o, &r, &err), -EFBIG);

	f->info.max_entries = UINT32_MAX;
	f->info.value_size = UINT32_MAX;
	assert_int_equal(ktel_map_reader__new(3, &o, &r, &err), -EFBIG);
	free(f);
	ktel_map_reader__free(NULL);
}

/* The cursor key vanishes under get_next_key: restart, re-anchor, no repeats. */
static void test_iterate_restart(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 40, 64, 1);
	struct ktel_map_reader *r = reader(f, true, 0);
	struct ktel_map_snapshot s;
	bool seen[MAXN * 5 + 2] = {0};

	/* The 10th key returned is deleted before its lookup. */
	f->delete_at_gnk = 10;
	assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
	assert_int_equal(s.count, 39);
	for (size_t e = 0; e < s.count; e++) {
		__u16 k;

		memcpy(&k, (const char *)s.keys + 2 * e, 2);
		assert_false(seen[k]);
		seen[k] = true;
	}
	/* Restart from key 0 hit a repeat once, then the re-anchor resumed at the 9th. */
	assert_int_equal(s.stats.skipped, 2);
	assert_false(s.stats.truncated);
	ktel_map_reader__free(r);
	free(f);
}

static void test_iterate_bounded(void **state)
{
	struct fake *f = fake_new(BPF_MAP_TYPE_HASH, 2, 10, 1);
	struct ktel_map_reader *r = reader(f, true, 0);
	struct ktel_map_snapshot s;

	f->cycle = true; /* a get_next_key that never ends */
	assert_int_equal(ktel_map_reader__read(r, &s, NULL), 0);
	assert_int_equal(s.count, 2);
	assert_true(s.stats.truncated);
	/* The step limit holds for each of the two walks. */
	assert_int_equal(s.stats.rewalks, 1);
	assert_true(f->gnk_calls <= 2 * (2 * 10 + 2));
	ktel_map_reader__free(r);
	free(f);
}

/* Steady state: reads allocate nothing (glibc heap counters; ASan has none). */
static void test_no_alloc_steady_state(void **state)
{
	for (int fallback = 0; fallback < 2; fallback++) {
		struct fake *f = fake_new(BPF_MAP_TYPE_PERCPU_HASH, 40, 64, 2);
		struct ktel_map_reader *r = reader(f, fallback, 0);
		struct ktel_map_snapshot s;
		struct mallinfo2 before, after;
		int rc = 0;

		rc |= ktel_map_reader__read(r, &s, NULL); /* a switch may allocate once */
		before = mallinfo2();
		for (int i = 0; i < 50; i++)
			rc |= ktel_map_reader__read(r, &s, NULL);
		after = mallinfo2();
		assert_int_equal(rc, 0);
		assert_int_equal(before.uordblks, after.uordblks);
		assert_int_equal(before.hblkhd, after.hblkhd);
		check(&s, 40, 2);
		ktel_map_reader__free(r);
		free(f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sum_percpu),
		cmocka_unit_test(test_one_call_enoent_with_data),
		cmocka_unit_test(test_partial_calls_and_cursor),
		cmocka_unit_test(test_busy_retried),
		cmocka_unit_test(test_busy_bounded),
		cmocka_unit_test(test_zero_count_never_spins),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_count_beyond_room_refused),
		cmocka_unit_test(test_full_room_stops),
		cmocka_unit_test(test_unsupported_switches_once),
		cmocka_unit_test(test_einval_later_is_an_error),
		cmocka_unit_test(test_percpu_summed),
		cmocka_unit_test(test_take),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_iterate_restart),
		cmocka_unit_test(test_iterate_bounded),
		cmocka_unit_test(test_no_alloc_steady_state),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
