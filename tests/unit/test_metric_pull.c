// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The pull path (core/engine/metric_pull.c) without a kernel: the maps' BTF comes
 * from a real BPF object built for the test (tests/plugins/fx_pull_values),
 * opened but never loaded, and the map reader's bpf() calls go to a fake map
 * that answers like the kernel's hashtab batch code (u32 bucket cursor,
 * -ENOENT with the last entries) and, on demand, cuts a walk short with
 * -ENOSPC part-way (as it does when entries move under the walk) or says
 * batch is unsupported.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "delta.h"
#include "log.h"
#include "map_reader.h"
#include "metric_pull.h"
#include "ktel_test.h"

#define OBJ_PATH KTEL_BINARY_DIR "/tests/plugins/fx_pull_values/fx_pull_values.bpf.o"
#define BOOT "0b7a1d3e-1111-4c2e-9a55-5c1d2e3f4a5b"
#define MAXN 16
#define MAXCPU 2
#define MAXVAL 264 /* struct accumulator_value_sum */
#define MAXKEY 16  /* struct fx_attr_key */

struct fake {
	struct bpf_map_info info;
	int ncpus;
	__u32 n;
	__u32 keys[MAXN];
	/* Keys wider than a u32 (info.key_size), when set. */
	unsigned char wide[MAXN][MAXKEY];
	bool use_wide;
	unsigned char vals[MAXN][MAXCPU][MAXVAL]; /* each CPU's copy */
	int truncate_walks;                       /* this many walks stop part-way with -ENOSPC */
	bool batch_unsupported;
	int walks, batch_calls;
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

static bool fake_percpu(const struct fake *f)
{
	return f->info.type == BPF_MAP_TYPE_PERCPU_HASH;
}

static void copy_value(const struct fake *f, __u32 i, unsigned char *dst)
{
	size_t stride = (f->info.value_size + 7) & ~7u;

	for (int c = 0; c < (fake_percpu(f) ? f->ncpus : 1); c++)
		memcpy(dst + c * stride, f->vals[i][c], f->info.value_size);
}

static const void *key_of(const struct fake *f, __u32 i)
{
	return f->use_wide ? (const void *)f->wide[i] : (const void *)&f->keys[i];
}

static size_t key_size(const struct fake *f)
{
	return f->use_wide ? f->info.key_size : 4;
}

static size_t raw_size(const struct fake *f)
{
	size_t stride = (f->info.value_size + 7) & ~7u;

	return fake_percpu(f) ? stride * f->ncpus : f->info.value_size;
}

static int fake_batch(void *ctx, int fd, void *in_batch, void *out_batch, void *keys, void *values,
		      __u32 *count)
{
	struct fake *f = ctx;
	__u32 pos = 0, take;

	f->batch_calls++;
	if (f->batch_unsupported)
		return -EINVAL;
	if (in_batch)
		memcpy(&pos, in_batch, 4);
	else
		f->walks++;
	if (f->walks <= f->truncate_walks && in_batch) {
		/* The next bucket no longer fits in the room left. */
		*count = 0;
		return -ENOSPC;
	}
	take = f->n - pos < *count ? f->n - pos : *count;
	if (f->walks <= f->truncate_walks)
		take = f->n / 2; /* a first call that stops half-way */
	for (__u32 i = 0; i < take; i++) {
		memcpy((unsigned char *)keys + i * key_size(f), key_of(f, pos + i), key_size(f));
		copy_value(f, pos + i, (unsigned char *)values + i * raw_size(f));
	}
	pos += take;
	memcpy(out_batch, &pos, 4);
	*count = take;
	return pos == f->n ? -ENOENT : 0;
}

static int find_key(const struct fake *f, const void *key)
{
	for (__u32 i = 0; i < f->n; i++)
		if (!memcmp(key_of(f, i), key, key_size(f)))
			return i;
	return -1;
}

static int fake_gnk(void *ctx, int fd, const void *key, void *next)
{
	struct fake *f = ctx;
	int i = key ? find_key(f, key) : -1;
	__u32 nexti = i < 0 ? 0 : i + 1;

	if (nexti >= f->n)
		return -ENOENT;
	memcpy(next, key_of(f, nexti), key_size(f));
	return 0;
}

static int fake_lookup(void *ctx, int fd, const void *key, void *value)
{
	struct fake *f = ctx;
	int i = find_key(f, key);

	if (i < 0)
		return -ENOENT;
	copy_value(f, i, value);
	return 0;
}

static const struct ktel_map_reader_sys fake_sys = {
	.get_info = fake_info,
	.num_possible_cpus = fake_ncpus,
	.lookup_batch = fake_batch,
	.get_next_key = fake_gnk,
	.lookup_elem = fake_lookup,
};

/* Records handed on window by window, copied end to end. */
struct collected {
	struct ktel_record *recs;
	size_t n, cap;
	size_t windows;  /* calls */
	size_t max_part; /* the largest window */
};

struct ctx {
	struct bpf_object *obj;
	struct fake f;
	struct ktel_delta *d;
	const char *map_name; /* info.name is cut to BPF_OBJ_NAME_LEN - 1 */
	struct ktel_metric_desc md;
	struct ktel_metric_pull *mp;
	struct collected got, got_last;
};

static void collect(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct collected *g = ctx;

	assert_true(n > 0);
	if (g->n + n > g->cap) {
		g->cap = (g->n + n) * 2;
		g->recs = realloc(g->recs, g->cap * sizeof(*g->recs));
		assert_non_null(g->recs);
	}
	memcpy(&g->recs[g->n], recs, n * sizeof(*recs));
	g->n += n;
	g->windows++;
	if (n > g->max_part)
		g->max_part = n;
}

static void collected_reset(struct collected *g)
{
	g->n = g->windows = g->max_part = 0;
}

static void assert_hist_equal(const struct ktel_histogram *a, const struct ktel_histogram *b)
{
	assert_int_equal(a->scheme, b->scheme);
	assert_int_equal(a->n_buckets, b->n_buckets);
	assert_memory_equal(a->counts, b->counts, a->n_buckets * sizeof(a->counts[0]));
	assert_int_equal(a->has_sum, b->has_sum);
	assert_int_equal(a->sum, b->sum);
}

/* Every member a sink reads (record.h: what n_dims, n_buckets and the type
 * say; the rest of a record is left as it was). */
static void assert_record_same(const struct ktel_record *a, const struct ktel_record *b, bool times)
{
	assert_int_equal(a->type, b->type);
	assert_string_equal(a->metric, b->metric);
	assert_ptr_equal(a->atom, b->atom);
	assert_int_equal(a->atom_id, b->atom_id);
	assert_string_equal(a->unit, b->unit);
	if (times) {
		assert_int_equal(a->start_boottime_ns, b->start_boottime_ns);
		assert_int_equal(a->end_boottime_ns, b->end_boottime_ns);
		assert_int_equal(a->start_wall_ns, b->start_wall_ns);
		assert_int_equal(a->end_wall_ns, b->end_wall_ns);
	}
	assert_string_equal(a->boot_id, b->boot_id);
	assert_int_equal(a->map_id, b->map_id);
	assert_int_equal(a->seq, b->seq);
	assert_int_equal(a->n_dims, b->n_dims);
	for (uint32_t i = 0; i < a->n_dims; i++) {
		assert_string_equal(a->dims[i].name, b->dims[i].name);
		assert_int_equal(a->dims[i].value, b->dims[i].value);
		assert_ptr_equal(a->dims[i].label, b->dims[i].label);
		assert_int_equal(a->dims[i].id_label, b->dims[i].id_label);
		assert_int_equal(a->dims[i].derived, b->dims[i].derived);
	}
	if (a->type == KTEL_RECORD_HISTOGRAM) {
		assert_hist_equal(&a->hist.delta, &b->hist.delta);
		assert_hist_equal(&a->hist.total, &b->hist.total);
	} else if (a->type == KTEL_RECORD_COUNTER) {
		assert_int_equal(a->counter.delta, b->counter.delta);
		assert_int_equal(a->counter.total, b->counter.total);
	} else {
		assert_int_equal(a->gauge, b->gauge);
	}
}

static void assert_record_equal(const struct ktel_record *a, const struct ktel_record *b)
{
	assert_record_same(a, b, true);
}

/* One pull of mp against d, its records collected in got. */
static int run_into(struct ktel_metric_pull *mp, struct ktel_delta *d, struct collected *got,
		    struct ktel_pull_info *ret_info, struct ktel_err *err)
{
	struct ktel_pull_info info;
	int r;

	collected_reset(got);
	r = ktel_metric_pull__run(mp, d, BOOT, collect, got, &info, err);
	if (!r) {
		assert_int_equal(info.records, got->n);
		if (ret_info)
			*ret_info = info;
	}
	return r;
}

/* One pull, its records collected in c->got. */
static int run(struct ctx *c, const struct ktel_record **ret_recs, size_t *ret_n,
	       struct ktel_pull_info *ret_info, struct ktel_err *err)
{
	int r = run_into(c->mp, c->d, &c->got, ret_info, err);

	*ret_recs = c->got.recs;
	*ret_n = c->got.n;
	return r;
}

/* The last pull's records, rebuilt, in c->got_last. */
static void last(struct ctx *c, const struct ktel_record **ret_recs, size_t *ret_n)
{
	collected_reset(&c->got_last);
	ktel_metric_pull__last_records(c->mp, collect, &c->got_last);
	*ret_recs = c->got_last.recs;
	*ret_n = c->got_last.n;
}

/* A fake map shaped like the object's map `name`, with n keys 1..n. */
static void fake_init(struct ctx *c, const char *name, __u32 n, int ncpus)
{
	struct bpf_map *map = bpf_object__find_map_by_name(c->obj, name);

	assert_non_null(map);
	c->map_name = name;
	memset(&c->f, 0, sizeof(c->f));
	c->f.info.type = bpf_map__type(map);
	c->f.info.key_size = bpf_map__key_size(map);
	c->f.info.value_size = bpf_map__value_size(map);
	c->f.info.max_entries = bpf_map__max_entries(map);
	c->f.info.id = 7;
	snprintf(c->f.info.name, sizeof(c->f.info.name), "%s", name);
	c->f.ncpus = ncpus;
	c->f.n = n;
	for (__u32 i = 0; i < n; i++)
		c->f.keys[i] = i + 1;
}

static void set_u64(struct ctx *c, __u32 i, int cpu, size_t off, __u64 v)
{
	memcpy(&c->f.vals[i][cpu][off], &v, 8);
}

/* A pull of the fake map with records made window records at a time (0:
 * the default window). */
static int pull_new_window(struct ctx *c, const char *metric, enum ktel_value_kind kind,
			   size_t window, struct ktel_metric_pull **ret, struct ktel_err *err)
{
	struct ktel_map_reader_opts ro = {.sys = &fake_sys, .sys_ctx = &c->f};
	struct ktel_metric_pull_opts po = {.reader = &ro, .window = window};

	c->md = (struct ktel_metric_desc)KTEL_METRIC(.name = metric, .map_name = c->map_name,
						     .model = KTEL_MODEL_ACCUMULATOR,
						     .unit = "events", .value_kind = kind);
	return ktel_metric_pull__new_opts(&c->md, c->obj, true, &po, ret, err);
}

static int pull_new(struct ctx *c, const char *metric, enum ktel_value_kind kind, bool map_created,
		    struct ktel_err *err)
{
	struct ktel_map_reader_opts ro = {.sys = &fake_sys, .sys_ctx = &c->f};
	struct ktel_metric_pull_opts po = {.reader = &ro};

	c->md = (struct ktel_metric_desc)KTEL_METRIC(.name = metric, .map_name = c->map_name,
						     .model = KTEL_MODEL_ACCUMULATOR,
						     .unit = "events", .value_kind = kind);
	return ktel_metric_pull__new_opts(&c->md, c->obj, map_created, &po, &c->mp, err);
}

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	c->obj = bpf_object__open_file(OBJ_PATH, NULL);
	if (!c->obj) {
		fprintf(stderr, "cannot open %s: %s\n", OBJ_PATH, strerror(errno));
		free(c);
		return -1;
	}
	c->d = ktel_delta__new(BOOT);
	if (!c->d) {
		bpf_object__close(c->obj);
		free(c);
		return -1;
	}
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	ktel_metric_pull__free(c->mp);
	ktel_delta__free(c->d);
	bpf_object__close(c->obj);
	free(c->got.recs);
	free(c->got_last.recs);
	free(c);
	return 0;
}

/* Run one pull; return its records' deltas per key (index key - 1). */
static int pull(struct ctx *c, uint64_t *deltas, size_t *ret_n, struct ktel_err *err)
{
	const struct ktel_record *recs;
	struct ktel_pull_info info;
	size_t n = 0;
	int r;

	r = run(c, &recs, &n, &info, err);
	if (r)
		return r;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(recs[i].type, KTEL_RECORD_COUNTER);
		assert_int_equal(recs[i].n_dims, 0);
		assert_true(recs[i].seq > 0);
	}
	if (deltas)
		for (size_t i = 0; i < n; i++)
			deltas[i] = recs[i].counter.delta;
	*ret_n = n;
	return 0;
}

/*
 * A walk that stays truncated must not end the delta round: keys it missed
 * would be forgotten, and the next pull would emit their whole cumulative
 * value again. Every key's emitted deltas must add up to its value, exactly.
 */
static void test_truncated_walk_never_reemits(void **state)
{
	struct ctx *c = *state;
	uint64_t emitted[MAXN] = {0}, deltas[MAXN];
	struct ktel_err err = {0};
	size_t n;

	fake_init(c, "fx_counters", 4, 1);
	assert_int_equal(pull_new(c, "fx_counters", KTEL_VALUE_COUNTER, true, &err), 0);
	for (int round = 0; round < 4; round++) {
		for (__u32 i = 0; i < c->f.n; i++)
			set_u64(c, i, 0, 0, (i + 1) * 10 + round);
		/* Round 1: both walks stop half-way; round 2: the first only. */
		c->f.walks = 0;
		c->f.truncate_walks = round == 1 ? 2 : round == 2 ? 1 : 0;
		if (round == 1) {
			assert_int_equal(pull(c, NULL, &n, &err), -EAGAIN);
			assert_non_null(strstr(err.msg, "incomplete"));
			assert_non_null(strstr(err.msg, "fx_counters"));
			assert_int_equal(c->f.walks, 2); /* walked again once, no more */
			continue;
		}
		assert_int_equal(pull(c, deltas, &n, &err), 0);
		assert_int_equal(n, c->f.n);
		for (size_t i = 0; i < n; i++)
			emitted[i] += deltas[i];
		if (round == 2)
			assert_int_equal(c->f.walks, 2);
	}
	for (__u32 i = 0; i < c->f.n; i++)
		assert_int_equal(emitted[i], (i + 1) * 10 + 3);
}

/*
 * Every record of a pull carries the pull's sequence number, stamped as the
 * records are made; a pull that emits nothing takes none, so the next
 * pull's records carry the next number (no gap consumers could take for a
 * lost window).
 */
static void test_seq_per_emitting_pull(void **state)
{
	struct ctx *c = *state;
	const struct ktel_record *recs, *last_recs;
	struct ktel_delta_stats st;
	struct ktel_err err = {0};
	size_t n, n_last;

	fake_init(c, "fx_counters", 4, 1);
	assert_int_equal(pull_new(c, "fx_counters", KTEL_VALUE_COUNTER, true, &err), 0);
	for (__u32 i = 0; i < c->f.n; i++)
		set_u64(c, i, 0, 0, i + 1);
	assert_int_equal(run(c, &recs, &n, NULL, &err), 0);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(recs[i].seq, 1);
	/* Nothing changed: no records, no number taken. */
	assert_int_equal(run(c, &recs, &n, NULL, &err), 0);
	assert_int_equal(n, 0);
	last(c, &last_recs, &n_last);
	assert_int_equal(n_last, 0);
	set_u64(c, 2, 0, 0, 30);
	assert_int_equal(run(c, &recs, &n, NULL, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(recs[0].seq, 2);
	assert_int_equal(recs[0].counter.delta, 27);
	last(c, &last_recs, &n_last);
	assert_int_equal(n_last, 1);
	assert_record_equal(&last_recs[0], &recs[0]);
	assert_int_equal(ktel_delta__stats(c->d, "fx_counters", &st), 0);
	assert_int_equal(st.seq, 2);
}

/* A gauge is a level: unchanged, falling, zero or negative, it is emitted
 * as read on every pull, also in a reused map's first window. */
static void test_gauge_levels_bypass_delta(void **state)
{
	static const int64_t levels[][2] = {{5, -3}, {5, -3}, {2, 0}, {2, 0}};
	struct ctx *c = *state;
	const struct ktel_record *recs;
	struct ktel_pull_info info;
	struct ktel_err err = {0};
	uint64_t last_seq = 0;
	size_t n;

	fake_init(c, "fx_gauges", 2, 1);
	assert_int_equal(pull_new(c, "fx_gauges", KTEL_VALUE_GAUGE, false, &err), 0);
	for (size_t p = 0; p < 4; p++) {
		for (__u32 i = 0; i < 2; i++)
			set_u64(c, i, 0, 0, (uint64_t)levels[p][i]);
		assert_int_equal(run(c, &recs, &n, &info, &err), 0);
		assert_int_equal(n, 2);
		assert_int_equal(info.start, 0);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(recs[i].type, KTEL_RECORD_GAUGE);
			assert_int_equal(recs[i].gauge, levels[p][i]);
			assert_true(recs[i].seq > last_seq);
		}
		last_seq = recs[0].seq;
	}
}

/* Per-CPU values are summed per u64 word: a narrower member is refused by
 * name; 8-byte members and histograms are read and summed right. */
static void test_percpu_narrow_member_refused(void **state)
{
	struct ctx *c = *state;
	struct ktel_err err = {0};

	fake_init(c, "fx_narrow_percpu", 1, 2);
	assert_int_equal(pull_new(c, "fx_narrow", KTEL_VALUE_COUNTER, true, &err), -EINVAL);
	assert_null(c->mp);
	assert_non_null(strstr(err.msg, "per-CPU"));
	assert_non_null(strstr(err.msg, "member a of 4 bytes"));
	assert_non_null(strstr(err.msg, "fx_narrow_percpu"));
}

static void test_percpu_wide_members_summed(void **state)
{
	struct ctx *c = *state;
	const struct ktel_record *recs;
	struct ktel_err err = {0};
	size_t n;

	fake_init(c, "fx_wide_percpu", 1, 2);
	set_u64(c, 0, 0, 0, 5);
	set_u64(c, 0, 1, 0, 7);
	set_u64(c, 0, 0, 8, (uint64_t)-1);
	set_u64(c, 0, 1, 8, 0);
	assert_int_equal(pull_new(c, "fx_wide", KTEL_VALUE_GAUGE, true, &err), 0);
	assert_int_equal(run(c, &recs, &n, NULL, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(recs[0].metric, "fx_wide_a");
	assert_int_equal(recs[0].gauge, 12);
	assert_string_equal(recs[1].metric, "fx_wide_b");
	assert_int_equal(recs[1].gauge, -1);
	ktel_metric_pull__free(c->mp);
	c->mp = NULL;

	fake_init(c, "fx_hist_percpu", 1, 2);
	set_u64(c, 0, 0, 3 * 8, 4);
	set_u64(c, 0, 1, 3 * 8, 6);
	assert_int_equal(pull_new(c, "fx_hist", KTEL_VALUE_COUNTER, true, &err), 0);
	assert_int_equal(run(c, &recs, &n, NULL, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(recs[0].type, KTEL_RECORD_HISTOGRAM);
	assert_int_equal(recs[0].hist.delta.counts[3], 10);
}

/* Bucket k and the sum of key index i in round r of test_hist_records. */
static uint64_t hist_val(__u32 i, int k, int r)
{
	if (r == 2 && i == 2)
		return k == 0 ? 1 : 0; /* key 3 was reset: it went down */
	return (uint64_t)(i + 1) * 100 + (uint64_t)k + (r >= 1 && i != 1 && k == 5 ? 7 * r : 0);
}

static uint64_t hist_sum(__u32 i, int r)
{
	return r == 2 && i == 2 ? 1 : (uint64_t)(i + 1) * 1000 + (r >= 1 && i != 1 ? 3 * r : 0);
}

static void check_hist(const struct ktel_histogram *h, const uint64_t *want, bool has_sum,
		       uint64_t sum)
{
	assert_int_equal(h->scheme, KTEL_HIST_LOG2);
	assert_int_equal(h->n_buckets, KTEL_HIST_BUCKETS);
	assert_memory_equal(h->counts, want, KTEL_HIST_BUCKETS * sizeof(uint64_t));
	assert_int_equal(h->has_sum, has_sum);
	assert_int_equal(h->sum, has_sum ? sum : 0);
}

/*
 * Histogram records are built in place (the delta engine writes into them),
 * with unchanged keys skipped in between: each record has its own key's
 * totals and deltas (sum included), the header every record of the pull
 * shares, and the totals show makes agree with them.
 */
static void hist_records(struct ctx *c, const char *map, bool has_sum)
{
	const struct ktel_record *recs, *tot;
	struct ktel_err err = {0};
	uint64_t want_tot[4][KTEL_HIST_BUCKETS], prev[4][KTEL_HIST_BUCKETS],
		want[KTEL_HIST_BUCKETS];
	uint64_t prev_sum[4] = {0}, last_end = 0;
	size_t n, n_tot;

	fake_init(c, map, 4, 1);
	assert_int_equal(pull_new(c, "fx_hist", KTEL_VALUE_COUNTER, true, &err), 0);
	memset(prev, 0, sizeof(prev));
	for (int r = 0; r < 3; r++) {
		size_t want_n = r == 0 ? 4 : 3; /* key 2 (index 1) unchanged after round 0 */

		for (__u32 i = 0; i < 4; i++) {
			for (int k = 0; k < KTEL_HIST_BUCKETS; k++) {
				want_tot[i][k] = hist_val(i, k, r);
				set_u64(c, i, 0, (size_t)k * 8, want_tot[i][k]);
			}
			if (has_sum)
				set_u64(c, i, 0, KTEL_HIST_BUCKETS * 8, hist_sum(i, r));
		}
		assert_int_equal(run(c, &recs, &n, NULL, &err), 0);
		assert_int_equal(n, want_n);
		for (size_t j = 0; j < n; j++) {
			__u32 i = r == 0 ? (__u32)j : (__u32)(j == 0 ? 0 : j + 1);
			bool reset = r == 2 && i == 2;

			assert_int_equal(recs[j].type, KTEL_RECORD_HISTOGRAM);
			assert_string_equal(recs[j].metric, "fx_hist");
			assert_string_equal(recs[j].unit, "events");
			assert_string_equal(recs[j].boot_id, BOOT);
			assert_int_equal(recs[j].map_id, 7);
			assert_int_equal(recs[j].seq, r + 1);
			assert_int_equal(recs[j].n_dims, 0);
			assert_true(recs[j].end_boottime_ns > last_end);
			assert_int_equal(recs[j].end_boottime_ns, recs[0].end_boottime_ns);
			assert_int_equal(recs[j].start_boottime_ns, recs[0].start_boottime_ns);
			check_hist(&recs[j].hist.total, want_tot[i], has_sum, hist_sum(i, r));
			for (int k = 0; k < KTEL_HIST_BUCKETS; k++)
				want[k] = reset ? want_tot[i][k] : want_tot[i][k] - prev[i][k];
			check_hist(&recs[j].hist.delta, want, has_sum,
				   reset ? hist_sum(i, r) : hist_sum(i, r) - prev_sum[i]);
		}
		last_end = recs[0].end_boottime_ns;
		/* show's totals: one per key, the same totals. */
		collected_reset(&c->got_last);
		ktel_metric_pull__totals(c->mp, collect, &c->got_last);
		tot = c->got_last.recs;
		n_tot = c->got_last.n;
		assert_int_equal(n_tot, 4);
		for (__u32 i = 0; i < 4; i++)
			check_hist(&tot[i].hist.total, want_tot[i], has_sum, hist_sum(i, r));
		memcpy(prev, want_tot, sizeof(prev));
		for (__u32 i = 0; i < 4; i++)
			prev_sum[i] = hist_sum(i, r);
	}
	ktel_metric_pull__free(c->mp);
	c->mp = NULL;
}

static void test_hist_records(void **state)
{
	struct ctx *c = *state;

	hist_records(c, "fx_hist_percpu", true);
	ktel_delta__free(c->d);
	c->d = ktel_delta__new(BOOT);
	assert_non_null(c->d);
	hist_records(c, "fx_hist_nosum", false);
}

/* Read stderr written while fn ran. */
static void capture_stderr(void (*fn)(struct ctx *), struct ctx *c, char *buf, size_t len)
{
	char path[] = "/tmp/test_metric_pull.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	ssize_t got;

	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, 2), 2);
	fn(c);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	got = pread(fd, buf, len - 1, 0);
	buf[got > 0 ? got : 0] = '\0';
	close(fd);
	unlink(path);
}

static void pull_three_times(struct ctx *c)
{
	struct ktel_err err = {0};
	size_t n;

	for (int i = 0; i < 3; i++) {
		set_u64(c, 0, 0, 0, 10 + i);
		assert_int_equal(pull(c, NULL, &n, &err), 0);
		assert_int_equal(n, 1);
	}
}

/* A reader that falls back to iteration says so once, at INFO, with the
 * map named and the reason; the reason stays readable for status. */
static void test_fallback_logged_once(void **state)
{
	struct ctx *c = *state;
	struct ktel_err err = {0};
	const char *want = "ktelemetryd info: metric fx_counters: map fx_counters (id 7) is read "
			   "by iteration: batch unsupported for map type hash";
	const char *first;
	char out[8192];

	fake_init(c, "fx_counters", 1, 1);
	c->f.batch_unsupported = true;
	assert_int_equal(pull_new(c, "fx_counters", KTEL_VALUE_COUNTER, true, &err), 0);
	assert_null(ktel_metric_pull__fallback_reason(c->mp));
	ktel_log_set_level(KTEL_LOG_INFO);
	capture_stderr(pull_three_times, c, out, sizeof(out));
	first = strstr(out, want);
	if (!first)
		fail_msg("no \"%s\" in: %s", want, out);
	if (strstr(first + strlen(want), "is read by iteration"))
		fail_msg("fallback logged more than once: %s", out);
	assert_int_equal(c->f.batch_calls, 1);
	assert_non_null(strstr(ktel_metric_pull__fallback_reason(c->mp), "batch unsupported"));
}

/*
 * KTEL_DIM_DEV_T: a dev_t key gets a "device" dimension named from the
 * sysfs root (a test directory here), after the declared dimension, marked
 * derived; a device sysfs does not know gets none.
 */
static void test_device_dim_from_sysfs(void **state)
{
	static const struct ktel_dimension_desc dims[] = {{.name = "dev", .key_member = ""}};
	static const uint32_t flags[] = {KTEL_DIM_DEV_T};
	struct ctx *c = *state;
	struct ktel_map_reader_opts ro = {.sys = &fake_sys, .sys_ctx = &c->f};
	char root[] = "/tmp/ktel-pull-sysfs-XXXXXX", cmd[512];
	struct ktel_metric_pull_opts po = {.reader = &ro, .sysfs_root = root};
	const struct ktel_record *recs;
	struct ktel_err err = {0};
	size_t n = 0;

	assert_non_null(mkdtemp(root));
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s/dev/block/7:3 && printf 'MAJOR=7\\nMINOR=3\\n"
		 "DEVNAME=loop3\\n' > %s/dev/block/7:3/uevent",
		 root, root);
	assert_int_equal(system(cmd), 0);
	fake_init(c, "fx_counters", 2, 1);
	c->f.keys[0] = 7u << 20 | 3;  /* loop3 */
	c->f.keys[1] = 7u << 20 | 99; /* not in this sysfs */
	set_u64(c, 0, 0, 0, 5);
	set_u64(c, 1, 0, 0, 6);
	c->md = (struct ktel_metric_desc)KTEL_METRIC(.name = "fx_dev", .map_name = "fx_counters",
						     .model = KTEL_MODEL_ACCUMULATOR,
						     .unit = "events", .dims = dims, .n_dims = 1,
						     .dim_flags = flags);
	assert_int_equal(ktel_metric_pull__new_opts(&c->md, c->obj, true, &po, &c->mp, &err), 0);
	assert_int_equal(run(c, &recs, &n, NULL, &err), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		if (recs[i].dims[0].value == (7 << 20 | 99)) {
			assert_int_equal(recs[i].n_dims, 1);
			continue;
		}
		assert_int_equal(recs[i].n_dims, 2);
		assert_string_equal(recs[i].dims[1].name, "device");
		assert_string_equal(recs[i].dims[1].label, "loop3");
		assert_true(recs[i].dims[1].derived);
		assert_false(recs[i].dims[0].derived);
		assert_int_equal(recs[i].counter.delta, 5);
	}
	assert_int_equal(ktel_test_rm_rf(root), 0);
}

/* Round r's value of member m of key index i: every key changes in round
 * 0 and 1, only the even ones in round 2 (the others emit nothing). */
static uint64_t round_val(__u32 i, int m, int r)
{
	return (uint64_t)(i + 1) * 100 + (uint64_t)m * 10 + (r < 2 || i % 2 ? (uint64_t)r : 1);
}

/*
 * A pull of more keys than a window holds hands its records on in several
 * windows, none larger than the window and no key's records split, which
 * end to end are the records one window of the whole pull makes: same
 * records, same order, same sequence number. show's rebuild of the last
 * pull gives them again, window times included, in the same windows.
 */
static void windows_same_records(struct ctx *c, const char *map, int n_members, int ncpus)
{
	struct ktel_delta *d1 = ktel_delta__new(BOOT);
	struct ktel_metric_pull *one = NULL;
	struct collected whole = {0};
	struct ktel_err err = {0};
	size_t per_key = n_members > 1 ? (size_t)n_members : 1;

	assert_non_null(d1);
	ktel_delta__free(c->d);
	c->d = ktel_delta__new(BOOT);
	assert_non_null(c->d);
	fake_init(c, map, MAXN, ncpus);
	assert_int_equal(pull_new_window(c, "fx_win", KTEL_VALUE_COUNTER, 3, &c->mp, &err), 0);
	assert_int_equal(pull_new_window(c, "fx_win", KTEL_VALUE_COUNTER, 0, &one, &err), 0);
	for (int r = 0; r < 3; r++) {
		for (__u32 i = 0; i < MAXN; i++)
			for (int m = 0; m < (n_members ? n_members : KTEL_HIST_BUCKETS); m++)
				set_u64(c, i, 0, (size_t)m * 8, round_val(i, m, r));
		assert_int_equal(run_into(c->mp, c->d, &c->got, NULL, &err), 0);
		assert_int_equal(run_into(one, d1, &whole, NULL, &err), 0);
		assert_int_equal(c->got.n, (r < 2 ? MAXN : MAXN / 2) * per_key);
		assert_int_equal(whole.n, c->got.n);
		assert_int_equal(whole.windows, 1);
		assert_int_equal(c->got.windows,
				 (c->got.n / per_key + 3 / per_key - 1) / (3 / per_key));
		assert_true(c->got.max_part <= 3);
		for (size_t j = 0; j < whole.n; j++) {
			assert_int_equal(c->got.recs[j].seq, r + 1);
			assert_record_same(&c->got.recs[j], &whole.recs[j], false);
		}
		collected_reset(&c->got_last);
		ktel_metric_pull__last_records(c->mp, collect, &c->got_last);
		assert_int_equal(c->got_last.n, c->got.n);
		assert_int_equal(c->got_last.windows, c->got.windows);
		for (size_t j = 0; j < c->got.n; j++)
			assert_record_equal(&c->got_last.recs[j], &c->got.recs[j]);
	}
	ktel_metric_pull__free(one);
	ktel_metric_pull__free(c->mp);
	c->mp = NULL;
	ktel_delta__free(d1);
	free(whole.recs);
}

static void test_windows_same_records(void **state)
{
	struct ctx *c = *state;

	windows_same_records(c, "fx_counters", 1, 1);
	windows_same_records(c, "fx_wide_percpu", 2, 1);
	windows_same_records(c, "fx_hist_percpu", 0, 2);
}

/* Keys handed on by run_keys, with the records they make. */
struct got_keys {
	size_t n;
	size_t pos[MAXN];
	uint64_t id[MAXN], derived[MAXN];
	uint64_t vals[MAXN][KTEL_HIST_BUCKETS + 1];
	size_t n_vals[MAXN];
	struct ktel_record head[MAXN], rec[MAXN];
	size_t batches;
};

static void collect_keys(void *ctx, const struct ktel_pull_keys *b)
{
	struct got_keys *g = ctx;

	assert_int_equal(b->key_size, sizeof(struct {
				 uint32_t cpu, pad;
				 uint64_t attr;
			 }));
	assert_true(b->n_vals <= KTEL_HIST_BUCKETS + 1);
	for (size_t i = 0; i < b->n; i++) {
		const struct ktel_pull_key *k = &b->k[i];
		size_t j = g->n++;

		assert_true(j < MAXN);
		g->pos[j] = k->pos;
		g->id[j] = k->id;
		g->derived[j] = k->derived;
		g->n_vals[j] = b->n_vals;
		memcpy(g->vals[j], k->vals, b->n_vals * sizeof(uint64_t));
		g->head[j] = *b->head;
	}
	/* The records, made after the batch's keys were read: each its
	 * key's, made again the same. */
	for (size_t i = 0; i < b->n; i++) {
		size_t j = g->n - b->n + i;

		g->rec[j] = *b->record(b, i);
		assert_memory_equal(b->record(b, i), &g->rec[j], sizeof(g->rec[j]));
	}
	g->batches++;
}

static void no_records(void *ctx, const struct ktel_record *recs, size_t n)
{
	(void)ctx;
	(void)recs;
	(void)n;
	fail_msg("run_keys made records of a pull whose keys it hands on");
}

static void no_keys(void *ctx, const struct ktel_pull_keys *b)
{
	(void)ctx;
	(void)b;
	fail_msg("run_keys handed on the keys of a pull of several records per key");
}

/* Key index i of an attributed map: CPU i % 2, id 1000 + i / 2. */
static void attr_keys(struct ctx *c, const char *map)
{
	fake_init(c, map, 6, 1);
	c->f.use_wide = true;
	for (__u32 i = 0; i < c->f.n; i++) {
		struct {
			uint32_t cpu, pad;
			uint64_t attr;
		} k = {.cpu = i % 2, .attr = 1000 + i / 2};

		memcpy(c->f.wide[i], &k, sizeof(k));
	}
}

static int attr_pull_new(struct ctx *c, const char *metric, struct ktel_metric_pull **ret,
			 struct ktel_err *err)
{
	static const struct ktel_dimension_desc dims[] = {{.name = "cpu"}, {.name = "attr"}};
	static const uint32_t flags[] = {0, KTEL_DIM_ATTRIBUTION};
	struct ktel_map_reader_opts ro = {.sys = &fake_sys, .sys_ctx = &c->f};
	/* Batches of 4 keys; the deltas of 2 kept for last_records, so the
	 * others' are where the delta engine writes the next key's. */
	struct ktel_metric_pull_opts po = {.reader = &ro,
					   .attr_name = "cgroup",
					   .window = 4,
					   .keep_values = 2 * (KTEL_HIST_BUCKETS + 1)};

	c->md = (struct ktel_metric_desc)KTEL_METRIC(.name = metric, .map_name = c->map_name,
						     .model = KTEL_MODEL_ACCUMULATOR, .unit = "us",
						     .scheme = KTEL_HIST_LOG2, .dims = dims,
						     .n_dims = 2, .dim_flags = flags);
	return ktel_metric_pull__new_opts(&c->md, c->obj, true, &po, ret, err);
}

/*
 * run_keys hands an attributed histogram's keys on instead of records,
 * each emitted key once, in the snapshot's order: its place, id and delta
 * (buckets then the sum) are those of the record run makes of it, which
 * the key's record is, made on demand; unchanged keys are not handed on.
 * A metric of several records per key gets records as from run.
 */
static void test_run_keys(void **state)
{
	struct ctx *c = *state;
	struct ktel_delta *d1 = ktel_delta__new(BOOT);
	struct ktel_metric_pull *recs_mp = NULL;
	static struct got_keys got;
	struct ktel_pull_info info;
	struct ktel_err err = {0};

	assert_non_null(d1);
	attr_keys(c, "fx_attr_hist");
	assert_int_equal(attr_pull_new(c, "fx_attr", &c->mp, &err), 0);
	assert_int_equal(attr_pull_new(c, "fx_attr", &recs_mp, &err), 0);
	for (int r = 0; r < 3; r++) {
		for (__u32 i = 0; i < c->f.n; i++) {
			for (int k = 0; k < KTEL_HIST_BUCKETS; k++)
				set_u64(c, i, 0, (size_t)k * 8, round_val(i, k, r));
			set_u64(c, i, 0, KTEL_HIST_BUCKETS * 8, round_val(i, 40, r));
		}
		memset(&got, 0, sizeof(got));
		assert_int_equal(ktel_metric_pull__run_keys(c->mp, c->d, BOOT, collect_keys,
							    no_records, &got, &info, &err),
				 0);
		assert_int_equal(run_into(recs_mp, d1, &c->got, NULL, &err), 0);
		assert_int_equal(got.n, r < 2 ? c->f.n : c->f.n / 2);
		assert_int_equal(info.records, got.n);
		/* In batches of at most a window (4 keys). */
		assert_int_equal(got.batches, (got.n + 3) / 4);
		assert_int_equal(c->got.n, got.n);
		for (size_t j = 0; j < got.n; j++) {
			const struct ktel_record *want = &c->got.recs[j];

			assert_int_equal(got.pos[j], r < 2 ? j : 2 * j + 1);
			assert_int_equal(got.id[j], want->dims[1].value);
			assert_int_equal(got.derived[j], KTEL_PULL_NO_DERIVED);
			assert_int_equal(got.n_vals[j], KTEL_HIST_BUCKETS + 1);
			assert_memory_equal(got.vals[j], want->hist.delta.counts,
					    KTEL_HIST_BUCKETS * sizeof(uint64_t));
			assert_int_equal(got.vals[j][KTEL_HIST_BUCKETS], want->hist.delta.sum);
			assert_record_same(&got.rec[j], want, false);
			assert_int_equal(got.head[j].type, KTEL_RECORD_HISTOGRAM);
			assert_int_equal(got.head[j].seq, want->seq);
			assert_int_equal(got.head[j].map_id, want->map_id);
			assert_int_equal(got.head[j].hist.delta.n_buckets, KTEL_HIST_BUCKETS);
			assert_true(got.head[j].hist.delta.has_sum);
		}
	}
	ktel_metric_pull__free(recs_mp);
	ktel_metric_pull__free(c->mp);
	c->mp = NULL;

	/* Two counters per key: records, as run makes them. */
	attr_keys(c, "fx_attr_wide");
	assert_int_equal(attr_pull_new(c, "fx_attr_w", &c->mp, &err), 0);
	set_u64(c, 0, 0, 0, 5);
	collected_reset(&c->got);
	assert_int_equal(ktel_metric_pull__run_keys(c->mp, c->d, BOOT, no_keys, collect, &c->got,
						    &info, &err),
			 0);
	assert_int_equal(c->got.n, 2);
	assert_int_equal(c->got.recs[0].counter.delta, 5);
	assert_int_equal(c->got.recs[0].dims[1].value, 1000);
	ktel_delta__free(d1);
}

/*
 * A pull with more keys than last_records keeps: every record still goes
 * out; the first keys' records are rebuilt, identical, and the rest are
 * counted, not kept.
 */
static void test_last_records_kept_bounded(void **state)
{
	struct ctx *c = *state;
	struct ktel_map_reader_opts ro = {.sys = &fake_sys, .sys_ctx = &c->f};
	struct ktel_metric_pull_opts po = {.reader = &ro,
					   .window = 4,
					   .keep_values = 5 * (KTEL_HIST_BUCKETS + 1)};
	struct ktel_err err = {0};

	fake_init(c, "fx_hist_percpu", MAXN, 1);
	for (__u32 i = 0; i < MAXN; i++)
		set_u64(c, i, 0, 8, i + 1);
	c->md = (struct ktel_metric_desc)KTEL_METRIC(.name = "fx_keep", .map_name = c->map_name,
						     .model = KTEL_MODEL_ACCUMULATOR,
						     .unit = "events");
	assert_int_equal(ktel_metric_pull__new_opts(&c->md, c->obj, true, &po, &c->mp, &err), 0);
	assert_int_equal(run_into(c->mp, c->d, &c->got, NULL, &err), 0);
	assert_int_equal(c->got.n, MAXN);
	collected_reset(&c->got_last);
	assert_int_equal(ktel_metric_pull__last_records(c->mp, collect, &c->got_last), MAXN - 5);
	assert_int_equal(c->got_last.n, 5);
	for (size_t j = 0; j < 5; j++)
		assert_record_equal(&c->got_last.recs[j], &c->got.recs[j]);
}

/* Abort the metric's delta round from the first window's hand-off: the
 * engine then fails at the next key (as it does out of memory). */
struct failing {
	struct ktel_delta *d;
	struct collected got;
};

static void fail_after_first(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct failing *f = ctx;

	if (!f->got.windows)
		ktel_delta__abort(f->d, "fx_win");
	collect(&f->got, recs, n);
}

/*
 * The delta engine failing mid-pull: the records of the keys applied before
 * the failure were handed on (their state moved on with them), with the
 * pull's sequence number, which is taken; the keys after it kept their
 * state and come whole in the next pull, under the next number. Every key's
 * value is emitted exactly once across the two pulls.
 */
static void test_delta_failure_mid_pull(void **state)
{
	struct ctx *c = *state;
	struct failing f = {.d = c->d};
	struct ktel_delta_stats st;
	struct ktel_err err = {0};

	fake_init(c, "fx_counters", MAXN, 1);
	for (__u32 i = 0; i < MAXN; i++)
		set_u64(c, i, 0, 0, (i + 1) * 10);
	assert_int_equal(pull_new_window(c, "fx_win", KTEL_VALUE_COUNTER, 3, &c->mp, &err), 0);
	assert_int_equal(ktel_metric_pull__run(c->mp, c->d, BOOT, fail_after_first, &f, NULL, &err),
			 -ENOENT);
	assert_non_null(strstr(err.msg, "records of the keys before it were emitted"));
	/* The window flushed before the key that failed, then the one key
	 * applied after that flush. */
	assert_int_equal(f.got.n, 4);
	assert_int_equal(ktel_delta__stats(c->d, "fx_win", &st), 0);
	assert_int_equal(st.seq, 1);
	/* Keys 1..4 (the fake walks keys in order), each whole. */
	for (size_t j = 0; j < f.got.n; j++) {
		assert_int_equal(f.got.recs[j].seq, 1);
		assert_int_equal(f.got.recs[j].counter.total, (j + 1) * 10);
		assert_int_equal(f.got.recs[j].counter.delta, (j + 1) * 10);
	}
	/* Nothing changed in the map: keys 5..16 only, whole, once. */
	assert_int_equal(run_into(c->mp, c->d, &c->got, NULL, &err), 0);
	assert_int_equal(c->got.n, MAXN - 4);
	for (size_t j = 0; j < c->got.n; j++) {
		assert_int_equal(c->got.recs[j].seq, 2);
		assert_int_equal(c->got.recs[j].counter.total, (j + 5) * 10);
		assert_int_equal(c->got.recs[j].counter.delta, (j + 5) * 10);
	}
	assert_int_equal(run_into(c->mp, c->d, &c->got, NULL, &err), 0);
	assert_int_equal(c->got.n, 0);
	free(f.got.recs);
}

/* KTEL_DIM_ENUM_SHORT on a dimension no enum labels is refused, named. */
static void test_short_without_enum_refused(void **state)
{
	static const struct ktel_dimension_desc dims[] = {{.name = "id", .key_member = ""}};
	static const uint32_t flags[] = {KTEL_DIM_ENUM_SHORT};
	struct ctx *c = *state;
	struct ktel_map_reader_opts ro = {.sys = &fake_sys, .sys_ctx = &c->f};
	struct ktel_metric_pull_opts po = {.reader = &ro};
	struct ktel_err err = {0};

	fake_init(c, "fx_counters", 1, 1);
	c->md = (struct ktel_metric_desc)KTEL_METRIC(.name = "fx_short", .map_name = "fx_counters",
						     .model = KTEL_MODEL_ACCUMULATOR,
						     .unit = "events", .dims = dims, .n_dims = 1,
						     .dim_flags = flags);
	assert_int_equal(ktel_metric_pull__new_opts(&c->md, c->obj, true, &po, &c->mp, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "dimension id: KTEL_DIM_ENUM_SHORT but no enum"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_truncated_walk_never_reemits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seq_per_emitting_pull, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gauge_levels_bypass_delta, setup, teardown),
		cmocka_unit_test_setup_teardown(test_percpu_narrow_member_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_percpu_wide_members_summed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hist_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fallback_logged_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_dim_from_sysfs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_without_enum_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_windows_same_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delta_failure_mid_pull, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_records_kept_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_keys, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
