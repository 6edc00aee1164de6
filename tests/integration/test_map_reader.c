// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Map reader against the running kernel. Maps are created directly with
 * bpf_map_create and filled from the test with values that are a known
 * function of the key (and of the CPU for per-CPU maps), so every entry read
 * back is checked against that function, and every expected key must appear
 * exactly once.
 *
 * The syscall counts the reader reports are cross-checked independently by
 * running one read under strace in a helper mode of this binary
 * (--read-fd FD METHOD) and counting the bpf() commands strace saw.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "delta.h"
#include "ktel_test.h"
#include "map_reader.h"
#include "metric_pull.h"

#ifndef ENOTSUPP
#define ENOTSUPP 524 /* kernel-internal errno */
#endif

#define HIST_WORDS 33 /* 32 buckets + sum */
#define BIG_KEYS 10000

struct hist_value {
	__u64 w[HIST_WORDS];
};

static int ncpus;

/* Keys are spread out so that a reader confusing index and key is caught. */
static __u32 key_of(__u32 i)
{
	return i * 7919u + 3u;
}

static __u64 word_of(__u32 key, unsigned int w, unsigned int cpu, __u64 gen)
{
	return gen * 1000000000000ull + (__u64)key * 1000u + w * 10u + cpu + 1u;
}

/* What a per-CPU map's summed word must be. */
static __u64 summed_word(__u32 key, unsigned int w, __u64 gen)
{
	__u64 s = 0;

	for (int c = 0; c < ncpus; c++)
		s += word_of(key, w, c, gen);
	return s;
}

static int create_map(enum bpf_map_type type, __u32 key_size, __u32 value_size, __u32 max_entries,
		      __u32 flags)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = flags);
	int fd = bpf_map_create(type, "ktel_test_rd", key_size, value_size, max_entries, &o);

	if (fd < 0)
		fail_msg("bpf_map_create(type %d): %s", type, strerror(-fd));
	return fd;
}

/* Fill n keys of a HASH/ARRAY map of struct hist_value, generation gen. */
static void fill_plain(int fd, __u32 n, __u64 gen, bool index_keys)
{
	struct hist_value v;

	for (__u32 i = 0; i < n; i++) {
		__u32 key = index_keys ? i : key_of(i);

		for (int w = 0; w < HIST_WORDS; w++)
			v.w[w] = word_of(key, w, 0, gen);
		assert_int_equal(bpf_map_update_elem(fd, &key, &v, BPF_ANY), 0);
	}
}

/* Fill n keys of a per-CPU map: each CPU's copy gets a different value. */
static void fill_percpu(int fd, __u32 n, bool index_keys)
{
	struct hist_value *v = calloc(ncpus, sizeof(*v));

	assert_non_null(v);
	for (__u32 i = 0; i < n; i++) {
		__u32 key = index_keys ? i : key_of(i);

		for (int c = 0; c < ncpus; c++)
			for (int w = 0; w < HIST_WORDS; w++)
				v[c].w[w] = word_of(key, w, c, 0);
		assert_int_equal(bpf_map_update_elem(fd, &key, v, BPF_ANY), 0);
	}
	free(v);
}

/*
 * Check a snapshot of u32 keys and struct hist_value values: exactly the n
 * expected keys, each once, each with its value. expect(key, w) gives a word.
 */
static void check_snapshot(const struct ktel_map_snapshot *s, __u32 n, bool index_keys, bool percpu,
			   __u64 gen)
{
	unsigned char *seen = calloc(n, 1);
	const struct hist_value *vals = s->values;
	const __u32 *keys = s->keys;

	assert_non_null(seen);
	assert_int_equal(s->key_size, sizeof(__u32));
	assert_int_equal(s->value_size, sizeof(struct hist_value));
	assert_int_equal(s->count, n);
	assert_int_equal(s->stats.entries, n);
	for (size_t e = 0; e < s->count; e++) {
		__u32 key = keys[e], i = index_keys ? key : (key - 3u) / 7919u;

		if (i >= n || (!index_keys && key_of(i) != key))
			fail_msg("entry %zu: key %u was never inserted", e, key);
		if (seen[i]++)
			fail_msg("entry %zu: key %u returned twice", e, key);
		for (int w = 0; w < HIST_WORDS; w++) {
			__u64 want = percpu ? summed_word(key, w, gen) : word_of(key, w, 0, gen);

			if (vals[e].w[w] != want)
				fail_msg("key %u word %d: got %llu, want %llu", key, w,
					 (unsigned long long)vals[e].w[w],
					 (unsigned long long)want);
		}
	}
	free(seen);
}

static struct ktel_map_reader *new_reader(int fd, bool fallback)
{
	struct ktel_map_reader_opts opts = {.force_fallback = fallback};
	struct ktel_map_reader *r = NULL;
	struct ktel_err err = {0};

	if (ktel_map_reader__new(fd, &opts, &r, &err))
		fail_msg("reader: %s", err.msg);
	return r;
}

static void read_ok(struct ktel_map_reader *r, struct ktel_map_snapshot *s)
{
	struct ktel_err err = {0};

	if (ktel_map_reader__read(r, s, &err))
		fail_msg("read: %s", err.msg);
}

static void test_hash_10k(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_HASH, 4, sizeof(struct hist_value), BIG_KEYS, 0);
	struct ktel_map_snapshot b, f;
	struct ktel_map_reader *rb, *rf;
	struct bpf_map_info info = {0};
	__u32 len = sizeof(info);

	fill_plain(fd, BIG_KEYS, 0, false);
	rb = new_reader(fd, false);
	rf = new_reader(fd, true);
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	assert_int_equal(ktel_map_reader__map_id(rb), info.id);
	assert_string_equal(ktel_map_reader__map_name(rb), "ktel_test_rd");

	read_ok(rb, &b);
	check_snapshot(&b, BIG_KEYS, false, false, 0);
	assert_string_equal(b.stats.method, "batch");
	assert_null(ktel_map_reader__fallback_reason(rb));
	assert_false(b.stats.truncated);
	if (b.stats.syscalls > 10)
		fail_msg("batch read of %d keys took %u syscalls", BIG_KEYS, b.stats.syscalls);

	read_ok(rf, &f);
	check_snapshot(&f, BIG_KEYS, false, false, 0);
	assert_string_equal(f.stats.method, "iterate");
	/*
	 * get_next_key + lookup per key; the map is full, so the walk ends
	 * when the buffers are, without a final get_next_key.
	 */
	assert_int_equal(f.stats.syscalls, 2 * BIG_KEYS);
	assert_int_equal(f.stats.skipped, 0);
	printf("# %d keys: batch %u syscalls, iterate %u syscalls\n", BIG_KEYS, b.stats.syscalls,
	       f.stats.syscalls);

	ktel_map_reader__free(rb);
	ktel_map_reader__free(rf);
	close(fd);
}

static void percpu_case(enum bpf_map_type type, __u32 n, __u32 max_entries, bool index_keys)
{
	int fd = create_map(type, 4, sizeof(struct hist_value), max_entries, 0);
	struct ktel_map_reader *r;
	struct ktel_map_snapshot s;

	fill_percpu(fd, n, index_keys);
	for (int fallback = 0; fallback < 2; fallback++) {
		r = new_reader(fd, fallback);
		assert_true(ktel_map_reader__is_percpu(r));
		read_ok(r, &s);
		check_snapshot(&s, n, index_keys, true, 0);
		assert_string_equal(s.stats.method, fallback ? "iterate" : "batch");
		if (!fallback && s.stats.syscalls > 10)
			fail_msg("batch read of %u per-CPU keys took %u syscalls", n,
				 s.stats.syscalls);
		ktel_map_reader__free(r);
	}
	close(fd);
}

static void test_percpu_hash(void **state)
{
	/* Not full, so a final -ENOENT call carries the data. */
	percpu_case(BPF_MAP_TYPE_PERCPU_HASH, 3000, 4096, false);
}

static void test_lru_percpu_hash(void **state)
{
	percpu_case(BPF_MAP_TYPE_LRU_PERCPU_HASH, 500, 4096, false);
}

static void test_percpu_array(void **state)
{
	percpu_case(BPF_MAP_TYPE_PERCPU_ARRAY, 700, 700, true);
}

static void test_array(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_ARRAY, 4, sizeof(struct hist_value), 1500, 0);
	struct ktel_map_reader *r;
	struct ktel_map_snapshot s;

	fill_plain(fd, 1500, 7, true);
	for (int fallback = 0; fallback < 2; fallback++) {
		r = new_reader(fd, fallback);
		read_ok(r, &s);
		check_snapshot(&s, 1500, true, false, 7);
		/* A full room ends the walk: one call for a whole array. */
		if (!fallback)
			assert_int_equal(s.stats.syscalls, 1);
		ktel_map_reader__free(r);
	}
	close(fd);
}

static void test_empty(void **state)
{
	enum bpf_map_type types[] = {BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_PERCPU_HASH};
	struct ktel_map_reader *r;
	struct ktel_map_snapshot s;

	for (size_t t = 0; t < 2; t++) {
		int fd = create_map(types[t], 4, sizeof(struct hist_value), 128, 0);

		for (int fallback = 0; fallback < 2; fallback++) {
			r = new_reader(fd, fallback);
			for (int i = 0; i < 3; i++) {
				read_ok(r, &s);
				assert_int_equal(s.count, 0);
				/* One call says "empty"; nothing spins. */
				assert_int_equal(s.stats.syscalls, 1);
			}
			ktel_map_reader__free(r);
		}
		close(fd);
	}
}

static void test_delete_refill_reuse(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_HASH, 4, sizeof(struct hist_value), BIG_KEYS, 0);
	struct ktel_map_snapshot s1, s2, s3;
	struct ktel_map_reader *r;
	__u32 key;

	for (int fallback = 0; fallback < 2; fallback++) {
		r = new_reader(fd, fallback);
		fill_plain(fd, BIG_KEYS, 0, false);
		read_ok(r, &s1);
		check_snapshot(&s1, BIG_KEYS, false, false, 0);

		for (__u32 i = 0; i < BIG_KEYS; i++) {
			key = key_of(i);
			assert_int_equal(bpf_map_delete_elem(fd, &key), 0);
		}
		read_ok(r, &s2);
		assert_int_equal(s2.count, 0);

		/* Fewer keys, new values: nothing of the first fill may survive. */
		fill_plain(fd, BIG_KEYS / 2, 3, false);
		read_ok(r, &s3);
		check_snapshot(&s3, BIG_KEYS / 2, false, false, 3);

		/* Buffers are reused, not reallocated. */
		assert_ptr_equal(s1.keys, s2.keys);
		assert_ptr_equal(s1.keys, s3.keys);
		assert_ptr_equal(s1.values, s3.values);

		for (__u32 i = 0; i < BIG_KEYS / 2; i++) {
			key = key_of(i);
			assert_int_equal(bpf_map_delete_elem(fd, &key), 0);
		}
		ktel_map_reader__free(r);
	}
	close(fd);
}

/* 2-byte keys: the hash batch cursor is a u32 bucket index all the same. */
static void test_small_keys(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_HASH, 2, 8, 2048, 0);
	struct ktel_map_reader *r;
	struct ktel_map_snapshot s;
	unsigned char seen[2048] = {0};

	for (__u16 k = 0; k < 2000; k++) {
		__u64 v = k * 3ull + 1;

		assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_ANY), 0);
	}
	for (int fallback = 0; fallback < 2; fallback++) {
		r = new_reader(fd, fallback);
		for (int rep = 0; rep < 2; rep++) {
			read_ok(r, &s);
			assert_int_equal(s.key_size, 2);
			assert_int_equal(s.count, 2000);
			memset(seen, 0, sizeof(seen));
			for (size_t e = 0; e < s.count; e++) {
				__u16 k;
				__u64 v;

				memcpy(&k, (const char *)s.keys + 2 * e, 2);
				memcpy(&v, (const char *)s.values + 8 * e, 8);
				assert_true(k < 2000);
				assert_int_equal(seen[k]++, 0);
				assert_int_equal(v, k * 3ull + 1);
			}
		}
		ktel_map_reader__free(r);
	}
	close(fd);
}

/*
 * A map type without batch support (DEVMAP_HASH: the kernel answers
 * ENOTSUPP): the first read switches to iteration for good and says why.
 * Values are ifindexes, so every key maps the loopback device (1).
 */
static void test_auto_fallback(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_DEVMAP_HASH, 4, 4, 256, 0);
	struct ktel_map_reader *r = new_reader(fd, false);
	__u32 cursor = 0, count = 1, k = 0, v = 1;
	unsigned char seen[100] = {0};
	struct ktel_map_snapshot s;
	int probe;

	/* Decide from the kernel, not from an assumption, that this holds. */
	probe = bpf_map_lookup_batch(fd, NULL, &cursor, &k, &v, &count, NULL);
	if (probe != -EINVAL && probe != -ENOTSUPP && probe != -EOPNOTSUPP) {
		printf("# DEVMAP_HASH batch lookup answered %d: batch is supported here\n", probe);
		ktel_map_reader__free(r);
		close(fd);
		skip();
	}
	v = 1;
	for (k = 0; k < 100; k++)
		assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_ANY), 0);
	assert_string_equal(ktel_map_reader__method(r), "batch");
	for (int rep = 0; rep < 2; rep++) {
		read_ok(r, &s);
		assert_string_equal(s.stats.method, "iterate");
		assert_string_equal(ktel_map_reader__method(r), "iterate");
		assert_non_null(strstr(ktel_map_reader__fallback_reason(r), "devmap_hash"));
		assert_int_equal(s.count, 100);
		/* The failed batch call counts once, on the first read only. */
		assert_int_equal(s.stats.syscalls, 2 * 100 + 1 + (rep == 0));
		for (size_t e = 0; e < s.count; e++) {
			k = ((const __u32 *)s.keys)[e];
			assert_true(k < 100);
			assert_int_equal(seen[k]++, rep);
			assert_int_equal(((const __u32 *)s.values)[e], 1);
		}
	}
	ktel_map_reader__free(r);
	close(fd);
}

/*
 * DEVMAP is an array whose get_next_key walks every index while lookup of an
 * empty slot says ENOENT: the reader must skip those and keep walking (not
 * stall on the hole, not restart).
 */
static void test_skip_holes(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_DEVMAP, 4, 4, 64, 0);
	struct ktel_map_reader *r = new_reader(fd, false);
	struct ktel_map_snapshot s;
	__u32 v = 1;

	for (__u32 k = 0; k < 64; k += 3)
		assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_ANY), 0);
	read_ok(r, &s);
	assert_string_equal(s.stats.method, "iterate");
	assert_int_equal(s.count, 22);
	assert_int_equal(s.stats.skipped, 64 - 22);
	for (size_t e = 0; e < s.count; e++)
		assert_int_equal(((const __u32 *)s.keys)[e], 3 * e);
	ktel_map_reader__free(r);
	close(fd);
}

static void test_refuse_odd_percpu_value(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_PERCPU_HASH, 4, 12, 16, 0);
	struct ktel_map_reader *r = NULL;
	struct ktel_err err = {0};

	assert_int_equal(ktel_map_reader__new(fd, NULL, &r, &err), -EINVAL);
	assert_null(r);
	assert_non_null(strstr(err.msg, "multiple of 8"));
	assert_non_null(strstr(err.msg, "ktel_test_rd"));
	close(fd);
}

/*
 * Churn: a thread deletes and re-inserts keys while the reader walks. No key
 * may come back twice, nothing may exceed max_entries, and every value must
 * still be the one of its key. Deleting the iteration cursor makes a hash
 * map's get_next_key restart from the start, which is what the reader's
 * de-duplication and re-anchoring are for.
 */
struct churn {
	int fd;
	volatile bool stop;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	struct hist_value v;
	__u32 i = 0, key;

	while (!c->stop) {
		key = key_of(i % 4000);
		bpf_map_delete_elem(c->fd, &key);
		for (int w = 0; w < HIST_WORDS; w++)
			v.w[w] = word_of(key, w, 0, 0);
		bpf_map_update_elem(c->fd, &key, &v, BPF_ANY);
		i += 13;
	}
	return NULL;
}

static void test_churn(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_HASH, 4, sizeof(struct hist_value), 4096, 0);
	struct churn c = {.fd = fd};
	struct ktel_map_snapshot s;
	struct ktel_map_reader *r;
	size_t skipped = 0, truncated = 0, min_count[2] = {4096, 4096};
	pthread_t th;

	fill_plain(fd, 4000, 0, false);
	assert_int_equal(pthread_create(&th, NULL, churn_thread, &c), 0);
	for (int fallback = 0; fallback < 2; fallback++) {
		r = new_reader(fd, fallback);
		for (int rep = 0; rep < 30; rep++) {
			unsigned char seen[4000] = {0};
			const struct hist_value *vals;

			read_ok(r, &s);
			vals = s.values;
			assert_true(s.count <= 4096);
			for (size_t e = 0; e < s.count; e++) {
				__u32 key = ((const __u32 *)s.keys)[e], i = (key - 3u) / 7919u;

				assert_true(i < 4000 && key_of(i) == key);
				assert_int_equal(seen[i]++, 0);
				assert_true(vals[e].w[5] == word_of(key, 5, 0, 0));
			}
			skipped += s.stats.skipped;
			truncated += s.stats.truncated;
			min_count[fallback] = s.count < min_count[fallback] ? s.count
									    : min_count[fallback];
		}
		ktel_map_reader__free(r);
	}
	c.stop = true;
	pthread_join(th, NULL);
	printf("# churn: smallest read batch %zu iterate %zu of 4000 keys; %zu keys skipped, %zu reads truncated\n",
	       min_count[0], min_count[1], skipped, truncated);
	/*
	 * One key at a time is out of the map, so a walk can miss only the few
	 * keys moved under it; an iteration that restarted from the first key
	 * without re-anchoring loses hundreds.
	 */
	assert_true(min_count[0] >= 3900);
	assert_true(min_count[1] >= 3900);
	close(fd);
}

/* ---- the pull path on real maps of a loaded object ---- */

#define PULL_OBJ KTEL_BINARY_DIR "/tests/plugins/fx_pull_values/fx_pull_values.bpf.o"

/*
 * Why metric_pull refuses a per-CPU value with members narrower than 8
 * bytes: the reader sums per u64 word, so {s32 a = -1; u32 b = 0} on every
 * CPU reads back with a's borrows carried into b (b = CPUs - 1).
 */
static void test_pull_refuses_narrow_percpu(void **state)
{
	struct bpf_object *obj = bpf_object__open_file(PULL_OBJ, NULL);
	struct ktel_metric_desc md = KTEL_METRIC(.name = "fx_narrow",
						 .map_name = "fx_narrow_percpu",
						 .model = KTEL_MODEL_ACCUMULATOR);
	struct {
		__s32 a;
		__u32 b;
	} *vals = calloc(ncpus, sizeof(*vals)), sum;
	struct ktel_metric_pull *mp = NULL;
	struct ktel_map_reader *r;
	struct ktel_map_snapshot s;
	struct ktel_err err = {0};
	__u32 key = 1;
	int fd;

	assert_non_null(obj);
	assert_non_null(vals);
	assert_int_equal(bpf_object__load(obj), 0);
	fd = bpf_object__find_map_fd_by_name(obj, "fx_narrow_percpu");
	for (int c = 0; c < ncpus; c++)
		vals[c].a = -1;
	assert_int_equal(bpf_map_update_elem(fd, &key, vals, BPF_ANY), 0);
	r = new_reader(fd, false);
	read_ok(r, &s);
	assert_int_equal(s.count, 1);
	memcpy(&sum, s.values, sizeof(sum));
	assert_int_equal(sum.b, ncpus - 1);
	ktel_map_reader__free(r);

	assert_int_equal(ktel_metric_pull__new(&md, obj, true, &mp, &err), -EINVAL);
	assert_null(mp);
	assert_non_null(strstr(err.msg, "member a of 4 bytes"));
	free(vals);
	bpf_object__close(obj);
}

/* A pull's records, window by window (ktel_pull_records_fn): how many, and
 * a copy of the last. */
struct got_records {
	size_t n;
	struct ktel_record last;
};

static void got_records(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct got_records *g = ctx;

	g->n += n;
	if (n)
		g->last = recs[n - 1];
}

/* A gauge on a real map: every pull emits every key's level, unchanged or
 * falling, with the real reader (batch) in between. */
static void test_pull_gauge_levels(void **state)
{
	static const __s64 levels[] = {5, 5, -2};
	struct bpf_object *obj = bpf_object__open_file(PULL_OBJ, NULL);
	struct ktel_metric_desc md = KTEL_METRIC(.name = "fx_gauge", .map_name = "fx_gauges",
						 .model = KTEL_MODEL_ACCUMULATOR,
						 .value_kind = KTEL_VALUE_GAUGE);
	struct ktel_delta *d = ktel_delta__new(ktel_boot_id());
	struct ktel_metric_pull *mp = NULL;
	struct ktel_pull_info info;
	struct ktel_err err = {0};
	__u32 key = 3;
	int fd;

	assert_non_null(obj);
	assert_non_null(d);
	assert_int_equal(bpf_object__load(obj), 0);
	fd = bpf_object__find_map_fd_by_name(obj, "fx_gauges");
	if (ktel_metric_pull__new(&md, obj, true, &mp, &err))
		fail_msg("%s", err.msg);
	for (size_t p = 0; p < sizeof(levels) / sizeof(levels[0]); p++) {
		struct got_records g = {0};

		assert_int_equal(bpf_map_update_elem(fd, &key, &levels[p], BPF_ANY), 0);
		if (ktel_metric_pull__run(mp, d, ktel_boot_id(), got_records, &g, &info, &err))
			fail_msg("%s", err.msg);
		assert_string_equal(info.method, "batch");
		assert_int_equal(g.n, 1);
		assert_int_equal(info.records, 1);
		assert_int_equal(g.last.type, KTEL_RECORD_GAUGE);
		assert_int_equal(g.last.gauge, levels[p]);
	}
	ktel_metric_pull__free(mp);
	ktel_delta__free(d);
	bpf_object__close(obj);
}

/* ---- independent syscall count: strace over a helper run ---- */

static int helper_read(int fd, const char *method)
{
	struct ktel_map_reader *r = NULL;
	struct ktel_map_snapshot s;
	struct ktel_err err = {0};
	struct ktel_map_reader_opts opts = {.force_fallback = !strcmp(method, "iterate")};

	if (ktel_map_reader__new(fd, &opts, &r, &err) || ktel_map_reader__read(r, &s, &err)) {
		fprintf(stderr, "helper: %s\n", err.msg);
		return 1;
	}
	printf("syscalls=%u count=%zu method=%s\n", s.stats.syscalls, s.count, s.stats.method);
	ktel_map_reader__free(r);
	return 0;
}

static unsigned int count_lines(const char *path, const char *needle)
{
	char line[512];
	unsigned int n = 0;
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static void strace_case(int fd, const char *method, unsigned int *ret_syscalls)
{
	char trace[512], cmd[1200], exe[512], out[256];
	unsigned int reader_calls = 0, by_strace;
	size_t count = 0;
	ssize_t len;
	FILE *p;

	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(len > 0);
	exe[len] = '\0';
	snprintf(trace, sizeof(trace), "%s/map-reader-strace-%d-%s.txt", KTEL_BINARY_DIR,
		 (int)getpid(), method);
	/* LeakSanitizer cannot run under ptrace: off for the traced helper. */
	snprintf(cmd, sizeof(cmd),
		 "ASAN_OPTIONS=detect_leaks=0 strace -qq -f -e trace=bpf -o '%s' '%s' --read-fd %d %s",
		 trace, exe, fd, method);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (!fgets(out, sizeof(out), p))
		out[0] = '\0';
	assert_int_equal(pclose(p), 0);
	assert_int_equal(sscanf(out, "syscalls=%u count=%zu", &reader_calls, &count), 2);
	assert_int_equal(count, BIG_KEYS);
	if (!strcmp(method, "batch"))
		by_strace = count_lines(trace, "BPF_MAP_LOOKUP_BATCH");
	else
		by_strace = count_lines(trace, "BPF_MAP_GET_NEXT_KEY") +
			    count_lines(trace, "BPF_MAP_LOOKUP_ELEM");
	/* Nothing else but the one map-info call may touch bpf(). */
	assert_int_equal(count_lines(trace, "bpf("), by_strace + 1);
	assert_int_equal(reader_calls, by_strace);
	unlink(trace);
	*ret_syscalls = by_strace;
}

static void test_syscalls_by_strace(void **state)
{
	int fd = create_map(BPF_MAP_TYPE_HASH, 4, sizeof(struct hist_value), BIG_KEYS, 0);
	unsigned int batch, iterate;
	int inherit;

	if (system("command -v strace >/dev/null 2>&1") != 0) {
		close(fd);
		skip();
	}
	fill_plain(fd, BIG_KEYS, 0, false);
	/* F_DUPFD clears close-on-exec, so the helper inherits the map. */
	inherit = fcntl(fd, F_DUPFD, 100);
	assert_true(inherit >= 0);
	strace_case(inherit, "batch", &batch);
	strace_case(inherit, "iterate", &iterate);
	printf("# strace: batch %u bpf() calls, iterate %u bpf() calls for %d keys\n", batch,
	       iterate, BIG_KEYS);
	assert_true(batch <= 10);
	assert_true(iterate >= BIG_KEYS);
	close(inherit);
	close(fd);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_10k),
		cmocka_unit_test(test_percpu_hash),
		cmocka_unit_test(test_lru_percpu_hash),
		cmocka_unit_test(test_percpu_array),
		cmocka_unit_test(test_array),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_delete_refill_reuse),
		cmocka_unit_test(test_small_keys),
		cmocka_unit_test(test_auto_fallback),
		cmocka_unit_test(test_skip_holes),
		cmocka_unit_test(test_refuse_odd_percpu_value),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_pull_refuses_narrow_percpu),
		cmocka_unit_test(test_pull_gauge_levels),
		cmocka_unit_test(test_syscalls_by_strace),
	};

	if (argc == 4 && !strcmp(argv[1], "--read-fd"))
		return helper_read(atoi(argv[2]), argv[3]);
	ktel_test_require_root("map_reader");
	ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0) {
		fprintf(stderr, "cannot count possible CPUs\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
