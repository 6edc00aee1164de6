// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The ageing's deletion of a released attribution id's keys, exact, on the
 * real kernel: the metric pull (metric_pull.h, ktel_metric_pull__attr_release)
 * over the map of tests/bpf/attr_admit_stress.bpf.c, whose program counts
 * events with KTEL_ATTR_INCREMENT_SUM as the plugins do. The test's bpf()
 * operations are the real ones, but the deletion of a key first runs the
 * program (BPF_PROG_TEST_RUN) for a batch of events of the released id,
 * which then land between the pull's read and the delete, as an I/O
 * completing after its issuer's cgroup was released does; after the delete
 * another batch makes the key again through the kernel's admission.
 *
 * The oracle is the test's own arithmetic: the deltas of every window add
 * up to the events the program was run for, bucket by bucket and in the
 * sum, and the kernel's count of admitted keys (<map>_attr_used) equals
 * the attributed keys left in the map. For a hash map and a per-CPU hash
 * map. With the kernel's lookup-and-delete withheld (a read followed by a
 * delete, as before 5.14 and as the ageing deleted before), the events of
 * each batch between the read and the delete are missing, exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "delta.h"
#include "ktel_test.h"
#include "bpf_rodata.h"
#include "map_reader.h"
#include "metric_pull.h"

#define NUM_BUCKETS 32
#define OVERFLOW_ID UINT64_MAX
#define GONE_ID 7001 /* the released id */
#define LIVE_ID 7002 /* an id that stays */
#define BEFORE 300   /* events between a pull's read and its delete */
#define AFTER 40     /* events after the delete, making the key again */
#define PULLS 12

struct key {
	uint32_t rest, pad;
	uint64_t attr;
};

struct acc {
	uint64_t buckets[NUM_BUCKETS];
	uint64_t sum;
};

struct take {
	struct bpf_object *obj;
	int prog_fd, map_fd;
	uint64_t *used;
	bool percpu;
	bool withhold; /* no lookup-and-delete: a read, then a delete */
	struct acc issued, counted;
	uint64_t n_issued, n_counted;
	uint64_t deletes; /* deletions the test saw */
};

static unsigned bucket_of(uint64_t v)
{
	unsigned k = 0;

	if (v <= 1)
		return 0;
	if (v > (1ULL << 30))
		return NUM_BUCKETS - 1;
	for (uint64_t x = v - 1; x; x >>= 1)
		k++;
	return k;
}

/* n events of id (event i: value i % 1024), counted as issued. */
static void events(struct take *t, uint64_t id, uint64_t n)
{
	uint64_t args[4] = {id, 1, 1, n};
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = args, .ctx_size_in = sizeof(args));

	assert_int_equal(bpf_prog_test_run_opts(t->prog_fd, &o), 0);
	for (uint64_t i = 0; i < n; i++) {
		t->issued.buckets[bucket_of(i & 1023)]++;
		t->issued.sum += i & 1023;
	}
	t->n_issued += n;
}

/* ---- the bpf() operations: the real ones, events around a delete ---- */

static int sys_get_info(void *ctx, int fd, struct bpf_map_info *info)
{
	__u32 len = sizeof(*info);

	(void)ctx;
	memset(info, 0, sizeof(*info));
	return bpf_obj_get_info_by_fd(fd, info, &len);
}

static int sys_num_possible_cpus(void *ctx)
{
	(void)ctx;
	return libbpf_num_possible_cpus();
}

static int sys_lookup_batch(void *ctx, int fd, void *in_batch, void *out_batch, void *keys,
			    void *values, __u32 *count)
{
	(void)ctx;
	return bpf_map_lookup_batch(fd, in_batch, out_batch, keys, values, count, NULL);
}

static int sys_get_next_key(void *ctx, int fd, const void *key, void *next_key)
{
	(void)ctx;
	return bpf_map_get_next_key(fd, key, next_key);
}

static int sys_lookup_elem(void *ctx, int fd, const void *key, void *value)
{
	(void)ctx;
	return bpf_map_lookup_elem(fd, key, value);
}

static int sys_delete_elem(void *ctx, int fd, const void *key)
{
	struct take *t = ctx;
	int r;

	events(t, ((const struct key *)key)->attr, BEFORE);
	r = bpf_map_delete_elem(fd, key);
	t->deletes += r == 0;
	events(t, ((const struct key *)key)->attr, AFTER);
	return r;
}

static int sys_lookup_and_delete_elem(void *ctx, int fd, const void *key, void *value)
{
	struct take *t = ctx;
	int r;

	events(t, ((const struct key *)key)->attr, BEFORE);
	r = bpf_map_lookup_and_delete_elem(fd, key, value);
	t->deletes += r == 0;
	events(t, ((const struct key *)key)->attr, AFTER);
	return r;
}

/* ---- the pull ---- */

static bool gone(void *ctx, uint64_t id)
{
	(void)ctx;
	return id == GONE_ID;
}

static void add_records(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct take *t = ctx;

	for (size_t i = 0; i < n; i++) {
		const struct ktel_histogram *h = &recs[i].hist.delta;

		assert_int_equal(recs[i].type, KTEL_RECORD_HISTOGRAM);
		for (uint32_t b = 0; b < h->n_buckets && b < NUM_BUCKETS; b++) {
			t->counted.buckets[b] += h->counts[b];
			t->n_counted += h->counts[b];
		}
		t->counted.sum += h->sum;
	}
}

/* Attributed keys in the map now (the kernel's overflow key aside). */
static uint64_t attributed_keys(const struct take *t)
{
	struct key k, next;
	uint64_t n = 0;
	bool first = true;

	while (!bpf_map_get_next_key(t->map_fd, first ? NULL : &k, &next)) {
		if (next.attr != OVERFLOW_ID)
			n++;
		k = next;
		first = false;
	}
	return n;
}

static void run(struct take *t)
{
	static const struct ktel_dimension_desc dims[] = {{.name = "rest"}, {.name = "attr"}};
	static const uint32_t dim_flags[] = {0, KTEL_DIM_ATTRIBUTION};
	const struct ktel_metric_desc md = KTEL_METRIC(.name = "take_test",
						       .map_name = "stress_map",
						       .model = KTEL_MODEL_ACCUMULATOR,
						       .unit = "us", .scheme = KTEL_HIST_LOG2,
						       .dims = dims,
						       .n_dims = KTEL_ARRAY_SIZE(dims),
						       .dim_flags = dim_flags);
	struct ktel_map_reader_sys sys = {
		.get_info = sys_get_info,
		.num_possible_cpus = sys_num_possible_cpus,
		.lookup_batch = sys_lookup_batch,
		.get_next_key = sys_get_next_key,
		.lookup_elem = sys_lookup_elem,
		.delete_elem = sys_delete_elem,
		.lookup_and_delete_elem = t->withhold ? NULL : sys_lookup_and_delete_elem,
	};
	struct ktel_map_reader_opts ropts = {.sys = &sys, .sys_ctx = t};
	struct ktel_metric_pull_opts opts = {.reader = &ropts, .attr_name = "cgroup"};
	struct ktel_delta *d = ktel_delta__new(ktel_boot_id());
	struct ktel_metric_pull *mp = NULL;
	struct bpf_map *map, *used;
	struct ktel_err err = {0};
	size_t deleted = 0;
	int rc;

	t->obj = bpf_object__open_file(KTEL_ATTR_STRESS_OBJ, NULL);
	assert_non_null(t->obj);
	assert_non_null(d);
	map = bpf_object__find_map_by_name(t->obj, "stress_map");
	used = bpf_object__find_map_by_name(t->obj, "stress_map_attr_used");
	assert_non_null(map);
	assert_non_null(used);
	if (t->percpu)
		assert_int_equal(bpf_map__set_type(map, BPF_MAP_TYPE_PERCPU_HASH), 0);
	assert_int_equal(bpf_map__set_max_entries(map, 16), 0);
	assert_int_equal(bpf_map__set_map_flags(used, bpf_map__map_flags(used) | BPF_F_MMAPABLE),
			 0);
	ktel_test_set_rodata(t->obj, "stress_map_attr_by", 1);
	ktel_test_set_rodata(t->obj, "stress_map_attr_limit", 8);
	assert_int_equal(bpf_object__load(t->obj), 0);
	t->prog_fd = bpf_program__fd(bpf_object__find_program_by_name(t->obj, "stress_events"));
	t->map_fd = bpf_map__fd(map);
	if (ktel_metric_pull__new_opts(&md, t->obj, true, &opts, &mp, &err))
		fail_msg("%s", err.msg);
	assert_true(ktel_metric_pull__attr_counted(mp));
	t->used = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED,
		       bpf_map__fd(used), 0);
	assert_true(t->used != MAP_FAILED);

	/* Every pull takes the released id's key, which the events after
	 * each delete made again; the live id's key stays. */
	for (int p = 0; p < PULLS; p++) {
		events(t, GONE_ID, 1000 + (uint64_t)p);
		events(t, LIVE_ID, 500);
		ktel_metric_pull__attr_release(mp, gone, NULL);
		if (ktel_metric_pull__run(mp, d, ktel_boot_id(), add_records, t, NULL, &err))
			fail_msg("%s", err.msg);
		deleted += ktel_metric_pull__attr_taken(mp, &rc);
		assert_int_equal(rc, 0);
		/* The slots: one per attributed key in the map, the taken key's
		 * given back once, the one made again holding its own. */
		assert_int_equal(*t->used, attributed_keys(t));
		assert_int_equal(*t->used, 2);
	}
	/* A last pull that takes nothing: the events after the last delete. */
	if (ktel_metric_pull__run(mp, d, ktel_boot_id(), add_records, t, NULL, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(ktel_metric_pull__attr_taken(mp, &rc), 0);
	assert_int_equal(deleted, PULLS);
	assert_int_equal(t->deletes, PULLS);

	print_message("%s%s: %llu events issued, %llu counted over %d pulls\n",
		      t->percpu ? "per-CPU hash" : "hash",
		      t->withhold ? ", read then delete" : ", lookup-and-delete",
		      (unsigned long long)t->n_issued, (unsigned long long)t->n_counted, PULLS + 1);
	if (t->withhold) {
		/* Each batch between a read and its delete went with the key. */
		assert_int_equal(t->n_counted, t->n_issued - (uint64_t)PULLS * BEFORE);
	} else {
		for (int b = 0; b < NUM_BUCKETS; b++)
			assert_int_equal(t->counted.buckets[b], t->issued.buckets[b]);
		assert_int_equal(t->counted.sum, t->issued.sum);
		assert_int_equal(t->n_counted, t->n_issued);
	}
	munmap(t->used, (size_t)sysconf(_SC_PAGESIZE));
	ktel_metric_pull__free(mp);
	ktel_delta__free(d);
	bpf_object__close(t->obj);
}

static void test_take_hash(void **state)
{
	struct take t = {0};

	(void)state;
	run(&t);
}

static void test_take_percpu_hash(void **state)
{
	struct take t = {.percpu = true};

	(void)state;
	run(&t);
}

static void test_read_then_delete_loses(void **state)
{
	struct take t = {.withhold = true};

	(void)state;
	run(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_take_hash),
		cmocka_unit_test(test_take_percpu_hash),
		cmocka_unit_test(test_read_then_delete_loses),
	};

	ktel_test_require_root("test_attr_take");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
