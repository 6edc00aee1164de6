// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The kernel bound of ktel_attr.h (KTEL_ATTR_INCREMENT_SUM and the
 * admission under it) under concurrency, on the real kernel: a BPF program
 * (tests/bpf/attr_admit_stress.bpf.c) run through BPF_PROG_TEST_RUN by two
 * threads, each pinned to its own CPU, released together at each round, so
 * both CPUs insert new keys into one nearly full map at once, the same new
 * keys among them. Between the rounds the test does what the daemon's
 * ageing does: reads the attributed keys, deletes them and gives their
 * slots back through the mapped count. The oracle is the test's own
 * arithmetic: the map's counts, with those of the deleted keys, add up to
 * the events issued, bucket by bucket, and the map never holds more
 * attributed keys than the limit nor a count that disagrees with them.
 *
 *  - nearly full: the map sized as the daemon sizes it (the other
 *    dimension's combinations plus the limit), many more ids than the
 *    limit in every round;
 *  - tight: a map too small for the limit and its overflow keys, so
 *    inserts that the count admitted fail (-E2BIG), as a preallocated map
 *    can refuse one whose free elements are in flight between CPUs: every
 *    such event must still be counted under the overflow key;
 *  - concurrent ageing: the deletion and give-back of one round's keys run
 *    while the next round inserts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "ktel_test.h"
#include "bpf_rodata.h"

#define NUM_BUCKETS 32
#define OVERFLOW_ID UINT64_MAX
#define BATCH 2048

struct key {
	uint32_t rest, pad;
	uint64_t attr;
};

struct acc {
	uint64_t buckets[NUM_BUCKETS];
	uint64_t sum;
};

struct stress {
	struct bpf_object *obj;
	int prog_fd, map_fd;
	uint64_t *used; /* the admitted-key count, mapped */
	uint64_t limit, rests;
	/* What was counted, in the map and in keys deleted since. */
	struct acc issued, deleted;
	uint64_t n_issued;
};

/* ---- the object ----------------------------------------------------------- */

/* Load the object with stress_map of entries entries and the given limit,
 * attribution by cgroup (any value but none: the ids are the test's). */
static void stress_open(struct stress *s, uint32_t entries, uint64_t limit, uint64_t rests)
{
	struct bpf_map *map, *used;
	struct bpf_program *prog;

	memset(s, 0, sizeof(*s));
	s->limit = limit;
	s->rests = rests;
	s->obj = bpf_object__open_file(KTEL_ATTR_STRESS_OBJ, NULL);
	assert_non_null(s->obj);
	map = bpf_object__find_map_by_name(s->obj, "stress_map");
	used = bpf_object__find_map_by_name(s->obj, "stress_map_attr_used");
	assert_non_null(map);
	assert_non_null(used);
	assert_int_equal(bpf_map__set_max_entries(map, entries), 0);
	assert_int_equal(bpf_map__set_map_flags(used, bpf_map__map_flags(used) | BPF_F_MMAPABLE),
			 0);
	ktel_test_set_rodata(s->obj, "stress_map_attr_by", 1);
	ktel_test_set_rodata(s->obj, "stress_map_attr_limit", limit);
	assert_int_equal(bpf_object__load(s->obj), 0);
	prog = bpf_object__find_program_by_name(s->obj, "stress_events");
	assert_non_null(prog);
	s->prog_fd = bpf_program__fd(prog);
	s->map_fd = bpf_map__fd(map);
	assert_int_equal(bpf_map__value_size(map), sizeof(struct acc));
	assert_int_equal(bpf_map__key_size(map), sizeof(struct key));
	s->used = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED,
		       bpf_map__fd(used), 0);
	assert_true(s->used != MAP_FAILED);
}

static void stress_close(struct stress *s)
{
	if (s->used && s->used != MAP_FAILED)
		munmap(s->used, (size_t)sysconf(_SC_PAGESIZE));
	bpf_object__close(s->obj);
	memset(s, 0, sizeof(*s));
}

/* The bucket of v, as ktel_log2_bucket (bpf_telemetry.h) gives it. */
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

/* One run of the program on this thread's CPU: n events over ids ids from
 * first (event i: attr first + i % ids, rest i % rests, value i % 1024). */
static int run_batch(struct stress *s, uint64_t first, uint64_t ids, uint64_t n)
{
	uint64_t args[4] = {first, ids, s->rests, n};
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = args, .ctx_size_in = sizeof(args));

	return bpf_prog_test_run_opts(s->prog_fd, &o);
}

/* What run_batch(n) adds to the unattributed total. */
static void expect_batch(struct stress *s, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		s->issued.buckets[bucket_of(i & 1023)]++;
		s->issued.sum += i & 1023;
	}
	s->n_issued += n;
}

/* ---- reading and ageing ----------------------------------------------------- */

struct census {
	struct acc all;      /* every key's counts, overflow included */
	uint64_t attributed; /* keys with an admitted id */
	uint64_t overflow;   /* overflow keys */
	uint64_t overflowed; /* events counted under them */
};

static void census_of(struct stress *s, struct census *c)
{
	struct key k, next;
	struct acc v;
	int rc;

	memset(c, 0, sizeof(*c));
	for (rc = bpf_map_get_next_key(s->map_fd, NULL, &next); !rc;
	     rc = bpf_map_get_next_key(s->map_fd, &k, &next)) {
		k = next;
		if (bpf_map_lookup_elem(s->map_fd, &k, &v))
			continue;
		for (int b = 0; b < NUM_BUCKETS; b++) {
			c->all.buckets[b] += v.buckets[b];
			if (k.attr == OVERFLOW_ID)
				c->overflowed += v.buckets[b];
		}
		c->all.sum += v.sum;
		if (k.attr == OVERFLOW_ID)
			c->overflow++;
		else
			c->attributed++;
	}
}

/*
 * The daemon's ageing: delete the attributed keys whose ids are in
 * [from, to) (all but the overflow keys when to is 0), keeping their
 * counts, and give their slots back with a compare-and-swap on the mapped
 * count, as metric_pull.c does.
 */
static void age_keys(struct stress *s, uint64_t from, uint64_t to)
{
	struct key keys[4096], k, next;
	uint64_t n = 0, gone = 0, cur, want;
	struct acc v;
	int rc;

	for (rc = bpf_map_get_next_key(s->map_fd, NULL, &next); !rc && n < 4096;
	     rc = bpf_map_get_next_key(s->map_fd, &k, &next)) {
		k = next;
		if (k.attr != OVERFLOW_ID && (to == 0 || (k.attr >= from && k.attr < to)))
			keys[n++] = k;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (bpf_map_lookup_elem(s->map_fd, &keys[i], &v))
			continue;
		if (bpf_map_delete_elem(s->map_fd, &keys[i]))
			continue;
		for (int b = 0; b < NUM_BUCKETS; b++)
			s->deleted.buckets[b] += v.buckets[b];
		s->deleted.sum += v.sum;
		gone++;
	}
	cur = __atomic_load_n(s->used, __ATOMIC_RELAXED);
	do {
		want = cur > gone ? cur - gone : 0;
	} while (!__atomic_compare_exchange_n(s->used, &cur, want, false, __ATOMIC_SEQ_CST,
					      __ATOMIC_RELAXED));
}

/* Every event issued is in the map or in a deleted key, bucket by bucket;
 * the count of admitted keys is the number of attributed keys held. */
static void check_exact(struct stress *s, const char *what)
{
	struct census c;
	uint64_t counted = 0;

	census_of(s, &c);
	for (int b = 0; b < NUM_BUCKETS; b++)
		counted += c.all.buckets[b] + s->deleted.buckets[b];
	printf("  %s: %llu events issued, %llu counted (%llu under overflow keys), %llu "
	       "attributed keys held, count %llu, limit %llu\n",
	       what, (unsigned long long)s->n_issued, (unsigned long long)counted,
	       (unsigned long long)c.overflowed, (unsigned long long)c.attributed,
	       (unsigned long long)*s->used, (unsigned long long)s->limit);
	for (int b = 0; b < NUM_BUCKETS; b++)
		if (c.all.buckets[b] + s->deleted.buckets[b] != s->issued.buckets[b])
			fail_msg("%s: bucket %d holds %llu, %llu were issued", what, b,
				 (unsigned long long)(c.all.buckets[b] + s->deleted.buckets[b]),
				 (unsigned long long)s->issued.buckets[b]);
	assert_int_equal(c.all.sum + s->deleted.sum, s->issued.sum);
	assert_true(c.attributed <= s->limit);
	assert_int_equal(*s->used, c.attributed);
	assert_true(c.overflow <= s->rests);
}

/* ---- two CPUs at once --------------------------------------------------------- */

struct runner {
	struct stress *s;
	pthread_t th;
	int cpu, index;
	pthread_barrier_t *start, *done;
	uint64_t rounds, ids, overlap;
	int failed; /* errno of a failed run */
};

/* Round r: ids [r * 1000 + index * (ids - overlap), + ids): the two runners
 * share overlap of them, so both insert those same new keys at once. */
static void *runner_main(void *arg)
{
	struct runner *r = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		r->failed = errno;
	for (uint64_t round = 0; round < r->rounds; round++) {
		uint64_t first = round * 1000 + (uint64_t)r->index * (r->ids - r->overlap);

		pthread_barrier_wait(r->start);
		if (!r->failed && run_batch(r->s, first, r->ids, BATCH))
			r->failed = errno;
		pthread_barrier_wait(r->done);
	}
	return NULL;
}

/*
 * rounds rounds of both CPUs counting BATCH events each. ageing: 0 none,
 * 1 between the rounds (each round starts with an empty count), 2 while
 * the next round runs (the keys of the round before it, quiet by then).
 */
static void run_rounds(struct stress *s, uint64_t rounds, uint64_t ids, uint64_t overlap,
		       int ageing)
{
	pthread_barrier_t start, done;
	struct runner r[2];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	assert_true(ncpu >= 1);
	assert_int_equal(pthread_barrier_init(&start, NULL, 3), 0);
	assert_int_equal(pthread_barrier_init(&done, NULL, 3), 0);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct runner){.s = s,
				       .cpu = (int)(i % ncpu),
				       .index = i,
				       .start = &start,
				       .done = &done,
				       .rounds = rounds,
				       .ids = ids,
				       .overlap = overlap};
		assert_int_equal(pthread_create(&r[i].th, NULL, runner_main, &r[i]), 0);
	}
	for (uint64_t round = 0; round < rounds; round++) {
		pthread_barrier_wait(&start);
		expect_batch(s, BATCH);
		expect_batch(s, BATCH);
		if (ageing == 2 && round > 0)
			age_keys(s, (round - 1) * 1000, round * 1000);
		pthread_barrier_wait(&done);
		if (ageing == 1)
			age_keys(s, 0, 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(r[i].th, NULL);
		if (r[i].failed)
			fail_msg("BPF_PROG_TEST_RUN on CPU %d: %s", r[i].cpu,
				 strerror(r[i].failed));
	}
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&done);
}

/* ---- the tests ------------------------------------------------------------------ */

enum {
	RESTS = 4,
	LIMIT = 64,
	ROUNDS = 400,
};

/* The map as the daemon sizes it; 120 ids a round for 64 places, 40 of
 * them inserted by both CPUs; the count emptied between the rounds, so
 * every round races for the last places. */
static void test_nearly_full(void **state)
{
	struct stress s;

	(void)state;
	stress_open(&s, RESTS + LIMIT, LIMIT, RESTS);
	run_rounds(&s, ROUNDS, 80, 40, 1);
	check_exact(&s, "nearly full");
	stress_close(&s);
}

/* A map with room for fewer keys than the limit and its overflow keys: the
 * count admits keys whose insert then fails. */
static void test_tight_map(void **state)
{
	struct stress s;

	(void)state;
	stress_open(&s, LIMIT / 2, LIMIT, RESTS);
	run_rounds(&s, ROUNDS, 80, 40, 1);
	check_exact(&s, "tight");
	stress_close(&s);
}

/* Ageing of the last round's keys while both CPUs admit the next round's. */
static void test_concurrent_ageing(void **state)
{
	struct stress s;

	(void)state;
	stress_open(&s, RESTS + LIMIT, LIMIT, RESTS);
	run_rounds(&s, ROUNDS, 80, 40, 2);
	age_keys(&s, (ROUNDS - 1) * 1000, ROUNDS * 1000);
	check_exact(&s, "concurrent ageing");
	stress_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nearly_full),
		cmocka_unit_test(test_tight_map),
		cmocka_unit_test(test_concurrent_ageing),
	};

	ktel_test_require_root("test_attr_admit");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
