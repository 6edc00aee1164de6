// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpf_telemetry.h logic, compiled for the host: GET_BUCKET against the
 * project's histogram convention (an independent oracle written from the
 * definition, not from the implementation), get_process_state for every
 * Android ProcessList value, the task-storage start macros against a fake
 * bpf_task_storage_get and clock, the Android start macros on a hash start map
 * (the start kept in place: inserted once per key, never deleted) and on a
 * task map (the current task's slot), and the durations the latency macros
 * hand to INCREMENT_ACCUMULATOR_SUM (whole microseconds, the bucket's own
 * value).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

/* The BPF headers compile in user space: the helpers are only declared. */
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/types.h>
#define KTEL_KERNEL_TYPES_H /* host build: types come from the UAPI headers */
#include <bpf_telemetry.h>

/*
 * The KTEL_TASK_* macros expand where they are used, so these names, defined
 * after the header, route their helper calls to the fakes below. A fake task
 * is one u64 slot that exists once created, like a task storage element.
 */
struct fake_task {
	bool has_slot;
	__u64 slot;
};

static __u64 fake_now;
static __u64 last_get_flags;
static bool storage_unavailable; /* bpf_task_storage_get returns NULL */

static void *fake_task_storage_get(void *map, struct task_struct *task, void *value, __u64 flags)
{
	struct fake_task *t = (struct fake_task *)task;

	(void)map;
	(void)value;
	last_get_flags = flags;
	if (storage_unavailable)
		return NULL;
	if (!t->has_slot && (flags & BPF_LOCAL_STORAGE_GET_F_CREATE))
		t->has_slot = true;
	return t->has_slot ? &t->slot : NULL;
}

/* Unused unless a macro deletes: then it fails the test. */
__attribute__((unused)) static long fake_task_storage_delete(void *map, struct task_struct *task)
{
	(void)map;
	(void)task;
	fail_msg("the task start macros must clear the slot, never delete it");
	return 0;
}

static __u64 fake_ktime_get_ns(void)
{
	return fake_now;
}

/* One histogram "map" holding at most one key's value. */
static struct accumulator_value_sum fake_hist;
static bool fake_hist_exists;
static int fake_hist_map;

/* An LRU hash start map (its type is what the start macros branch on: kept
 * in place) holding at most one tid's start. */
static struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
} hash_start;

/* A plain hash start map (the end deletes) holding at most one tid's start. */
static struct {
	__uint(type, BPF_MAP_TYPE_HASH);
} plain_start;
static bool plain_start_exists;
static __u32 plain_start_key;
static __u64 plain_start_value;
static int plain_start_inserts, plain_start_deletes;
static bool hash_start_exists;
static __u32 hash_start_key;
static __u64 hash_start_value;
static int hash_start_inserts;
static long hash_start_insert_rc; /* what an insert returns: 0, or -E2BIG when "full" */

/* The current task of the task-map tests. */
static struct fake_task current_task;

static void *fake_map_lookup_elem(void *map, const void *key)
{
	if (map == &plain_start)
		return plain_start_exists && plain_start_key == *(const __u32 *)key
			       ? &plain_start_value
			       : NULL;
	if (map == &hash_start)
		return hash_start_exists && hash_start_key == *(const __u32 *)key
			       ? &hash_start_value
			       : NULL;
	assert_ptr_equal(map, &fake_hist_map);
	return fake_hist_exists ? &fake_hist : NULL;
}

static long fake_map_update_elem(void *map, const void *key, const void *value, __u64 flags)
{
	if (map == &plain_start) {
		if (plain_start_exists && plain_start_key == *(const __u32 *)key &&
		    flags == BPF_NOEXIST)
			return -17; /* -EEXIST */
		if (plain_start_exists && plain_start_key != *(const __u32 *)key)
			return -7; /* -E2BIG: the fake holds one tid */
		if (!plain_start_exists)
			plain_start_inserts++;
		plain_start_exists = true;
		plain_start_key = *(const __u32 *)key;
		memcpy(&plain_start_value, value, sizeof(plain_start_value));
		return 0;
	}
	if (map == &hash_start) {
		/* The macros look up first: an insert is for a key not there. */
		assert_false(hash_start_exists && hash_start_key == *(const __u32 *)key);
		if (hash_start_insert_rc)
			return hash_start_insert_rc;
		hash_start_exists = true;
		hash_start_key = *(const __u32 *)key;
		memcpy(&hash_start_value, value, sizeof(hash_start_value));
		hash_start_inserts++;
		return 0;
	}
	assert_ptr_equal(map, &fake_hist_map);
	assert_int_equal(flags, BPF_NOEXIST);
	memcpy(&fake_hist, value, sizeof(fake_hist));
	fake_hist_exists = true;
	return 0;
}

/* Only a plain hash start is deleted; any other delete fails the test. */
static long fake_map_delete_elem(void *map, const void *key)
{
	if (map != &plain_start)
		fail_msg("the start macros must clear the start in place, never delete it");
	if (!plain_start_exists || plain_start_key != *(const __u32 *)key)
		return -2; /* -ENOENT */
	plain_start_exists = false;
	plain_start_deletes++;
	return 0;
}

static struct task_struct *fake_get_current_task_btf(void)
{
	return (struct task_struct *)&current_task;
}

#define bpf_map_lookup_elem fake_map_lookup_elem
#define bpf_map_update_elem fake_map_update_elem
#define bpf_map_delete_elem fake_map_delete_elem
#define bpf_get_current_task_btf fake_get_current_task_btf
#define bpf_task_storage_get fake_task_storage_get
#define bpf_task_storage_delete fake_task_storage_delete
#define bpf_ktime_get_ns fake_ktime_get_ns

KTEL_DEFINE_TASK_START_MAP(task_start);

#define TASK(t) ((struct task_struct *)(t))

static int reset_fakes(void **state)
{
	(void)state;
	fake_now = 1000000;
	last_get_flags = ~0ULL;
	storage_unavailable = false;
	ktel_invalid_durations = 0;
	memset(&fake_hist, 0xa5, sizeof(fake_hist)); /* a created value must be zeroed */
	fake_hist_exists = false;
	hash_start_exists = false;
	hash_start_value = 0;
	hash_start_inserts = 0;
	hash_start_insert_rc = 0;
	plain_start_exists = false;
	plain_start_value = 0;
	plain_start_inserts = 0;
	plain_start_deletes = 0;
	memset(&current_task, 0, sizeof(current_task));
	return 0;
}

/* Bucket by the definition: 0 for v <= 1; k for 2^(k-1) < v <= 2^k; 31 above 2^30. */
static uint32_t oracle_bucket(uint64_t v)
{
	if (v <= 1)
		return 0;
	for (uint32_t k = 1; k <= 30; k++)
		if (v <= (1ULL << k))
			return k;
	return 31;
}

static void test_bucket_edges(void **state)
{
	assert_int_equal(GET_BUCKET(0), 0);
	assert_int_equal(GET_BUCKET(1), 0);
	assert_int_equal(GET_BUCKET(2), 1);
	assert_int_equal(GET_BUCKET(3), 2);
	assert_int_equal(GET_BUCKET(4), 2);
	assert_int_equal(GET_BUCKET(5), 3);
	assert_int_equal(GET_BUCKET(1ULL << 30), 30);
	assert_int_equal(GET_BUCKET((1ULL << 30) + 1), 31);
	assert_int_equal(GET_BUCKET(UINT64_MAX), 31);
}

static void test_bucket_every_power(void **state)
{
	for (int k = 1; k <= 31; k++) {
		uint64_t p = 1ULL << k;
		uint64_t probes[] = {p - 1, p, p + 1};

		for (size_t i = 0; i < 3; i++) {
			uint32_t got = GET_BUCKET(probes[i]);

			if (got != oracle_bucket(probes[i]))
				fail_msg("GET_BUCKET(%llu) = %u, convention says %u",
					 (unsigned long long)probes[i], got,
					 oracle_bucket(probes[i]));
		}
	}
}

static void test_bucket_upper_inclusive(void **state)
{
	/* Each bucket's upper bound is le = 2^k: the bound itself is inside. */
	for (int k = 1; k <= 30; k++) {
		assert_int_equal(GET_BUCKET(1ULL << k), k);
		assert_int_equal(GET_BUCKET((1ULL << k) + 1), k + 1);
	}
}

static void test_process_state(void **state)
{
	static const struct {
		int adj;
		enum process_state want;
	} cases[] = {
		{-1000, STATE_NATIVE}, /* NATIVE_ADJ */
		{-901, STATE_NATIVE},
		{-900, STATE_SYSTEM},     /* SYSTEM_ADJ */
		{-800, STATE_PERSISTENT}, /* PERSISTENT_PROC_ADJ */
		{-700, STATE_PERSISTENT}, /* PERSISTENT_SERVICE_ADJ */
		{-1, STATE_PERSISTENT},
		{0, STATE_FOREGROUND},           /* FOREGROUND_APP_ADJ */
		{100, STATE_VISIBLE},            /* VISIBLE_APP_ADJ */
		{200, STATE_PERCEPTIBLE},        /* PERCEPTIBLE_APP_ADJ */
		{250, STATE_PERCEPTIBLE},        /* PERCEPTIBLE_LOW_APP_ADJ */
		{300, STATE_SERVICE_BACKGROUND}, /* BACKUP_APP_ADJ */
		{400, STATE_SERVICE_BACKGROUND}, /* HEAVY_WEIGHT_APP_ADJ */
		{500, STATE_SERVICE_BACKGROUND}, /* SERVICE_ADJ */
		{600, STATE_SERVICE_BACKGROUND}, /* HOME_APP_ADJ */
		{700, STATE_SERVICE_BACKGROUND}, /* PREVIOUS_APP_ADJ */
		{800, STATE_SERVICE_BACKGROUND}, /* SERVICE_B_ADJ */
		{899, STATE_SERVICE_BACKGROUND},
		{900, STATE_CACHED}, /* CACHED_APP_MIN_ADJ */
		{999, STATE_CACHED}, /* CACHED_APP_MAX_ADJ */
		{1000, STATE_CACHED},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (get_process_state(cases[i].adj) != cases[i].want)
			fail_msg("oom_score_adj %d -> %d, want %d", cases[i].adj,
				 get_process_state(cases[i].adj), cases[i].want);
}

static void test_process_state_numbering(void **state)
{
	/* Numbered exactly like the DirectReclaimLatency atom's ProcessState. */
	assert_int_equal(PROCESS_STATE_UNSPECIFIED, 0);
	assert_int_equal(STATE_NATIVE, 1);
	assert_int_equal(STATE_SYSTEM, 2);
	assert_int_equal(STATE_PERSISTENT, 3);
	assert_int_equal(STATE_FOREGROUND, 4);
	assert_int_equal(STATE_VISIBLE, 5);
	assert_int_equal(STATE_PERCEPTIBLE, 6);
	assert_int_equal(STATE_SERVICE_BACKGROUND, 7);
	assert_int_equal(STATE_CACHED, 8);
}

static void test_task_start_map_shape(void **state)
{
	/* bpf_helpers.h encodes __uint(name, v) as a pointer to an array of v. */
	assert_int_equal(sizeof(*task_start.type), BPF_MAP_TYPE_TASK_STORAGE * sizeof(int));
	assert_int_equal(sizeof(*task_start.map_flags), BPF_F_NO_PREALLOC * sizeof(int));
	assert_int_equal(sizeof(*task_start.value), sizeof(__u64));
}

static void test_task_latency_bucket(void **state)
{
	struct fake_task t = {};

	assert_int_equal(KTEL_TASK_SAVE_START(task_start, TASK(&t)), 0);
	assert_true(last_get_flags & BPF_LOCAL_STORAGE_GET_F_CREATE);
	assert_int_equal(t.slot, 1000000);
	fake_now += 5000; /* 5 us: (4, 8] is bucket 3 */
	assert_int_equal(KTEL_TASK_LATENCY_BUCKET(task_start, TASK(&t)), 3);
	/* Cleared in place, the slot kept for the next start. */
	assert_true(t.has_slot);
	assert_int_equal(t.slot, 0);
	assert_int_equal(ktel_invalid_durations, 0);
	/* The start was consumed: a second end has nothing to measure. */
	fake_now += 5000;
	assert_int_equal(KTEL_TASK_LATENCY_BUCKET(task_start, TASK(&t)),
			 BPF_TELEMETRY_INVALID_BUCKET);
}

static void test_task_latency_no_start(void **state)
{
	struct fake_task t = {};

	assert_int_equal(KTEL_TASK_LATENCY_BUCKET(task_start, TASK(&t)),
			 BPF_TELEMETRY_INVALID_BUCKET);
	/* The end never creates a slot for a task that has none. */
	assert_int_equal(last_get_flags, 0);
	assert_false(t.has_slot);
	assert_int_equal(ktel_invalid_durations, 0);
}

static void test_task_latency_backwards(void **state)
{
	struct fake_task t = {};

	KTEL_TASK_SAVE_START(task_start, TASK(&t));
	fake_now -= 1;
	assert_int_equal(KTEL_TASK_LATENCY_BUCKET(task_start, TASK(&t)),
			 BPF_TELEMETRY_INVALID_BUCKET);
	assert_int_equal(ktel_invalid_durations, 1);
	assert_int_equal(t.slot, 0);
}

static void test_task_save_rules(void **state)
{
	struct fake_task t = {};

	/* SAVE_START: the latest start wins. */
	KTEL_TASK_SAVE_START(task_start, TASK(&t));
	fake_now += 7000;
	KTEL_TASK_SAVE_START(task_start, TASK(&t));
	assert_int_equal(t.slot, 1007000);
	/* SAVE_FIRST_START: an existing start is kept... */
	fake_now += 7000;
	assert_int_equal(KTEL_TASK_SAVE_FIRST_START(task_start, TASK(&t)), 0);
	assert_int_equal(t.slot, 1007000);
	/* ...and a cleared one (0) is replaced. */
	t.slot = 0;
	KTEL_TASK_SAVE_FIRST_START(task_start, TASK(&t));
	assert_int_equal(t.slot, 1014000);
}

static void test_task_storage_unavailable(void **state)
{
	struct fake_task t = {};

	storage_unavailable = true;
	assert_int_equal(KTEL_TASK_SAVE_START(task_start, TASK(&t)), -1);
	assert_int_equal(KTEL_TASK_SAVE_FIRST_START(task_start, TASK(&t)), -1);
	assert_int_equal(KTEL_TASK_LATENCY_BUCKET(task_start, TASK(&t)),
			 BPF_TELEMETRY_INVALID_BUCKET);
}

static void test_duration_us(void **state)
{
	/* Whole microseconds, rounded down: what the bucket is computed from. */
	assert_int_equal(ktel_duration_us(1000, 1000), 0);
	assert_int_equal(ktel_duration_us(1000, 1999), 0);
	assert_int_equal(ktel_duration_us(1000, 2000), 1);
	assert_int_equal(ktel_duration_us(0, 5999), 5);
	assert_true(ktel_duration_us(0, UINT64_MAX) == UINT64_MAX / 1000);
	assert_true(UINT64_MAX / 1000 < BPF_TELEMETRY_INVALID_DURATION);
	assert_int_equal(ktel_invalid_durations, 0);
	assert_true(ktel_duration_us(2, 1) == BPF_TELEMETRY_INVALID_DURATION);
	assert_int_equal(ktel_invalid_durations, 1);
	/* The bucket of a duration is GET_BUCKET of the same microseconds. */
	for (uint64_t ns = 0; ns < 70000; ns += 333)
		assert_int_equal(ktel_duration_bucket(0, ns), GET_BUCKET(ns / 1000));
	assert_int_equal(ktel_duration_bucket(2, 1), BPF_TELEMETRY_INVALID_BUCKET);
	assert_int_equal(ktel_duration_bucket_of(BPF_TELEMETRY_INVALID_DURATION),
			 BPF_TELEMETRY_INVALID_BUCKET);
}

static void test_task_latency_us(void **state)
{
	struct fake_task t = {};

	KTEL_TASK_SAVE_START(task_start, TASK(&t));
	fake_now += 5999; /* 5.999 us counts as 5, in bucket 3 like its bucket macro */
	assert_true(KTEL_TASK_LATENCY_US(task_start, TASK(&t)) == 5);
	assert_int_equal(t.slot, 0);
	/* Consumed, and no start again: no duration. */
	assert_true(KTEL_TASK_LATENCY_US(task_start, TASK(&t)) == BPF_TELEMETRY_INVALID_DURATION);
	assert_int_equal(last_get_flags, 0);
	/* Backwards: no duration, counted. */
	KTEL_TASK_SAVE_START(task_start, TASK(&t));
	fake_now -= 1;
	assert_true(KTEL_TASK_LATENCY_US(task_start, TASK(&t)) == BPF_TELEMETRY_INVALID_DURATION);
	assert_int_equal(ktel_invalid_durations, 1);
}

static void test_increment_sum(void **state)
{
	__u32 key = 0;

	/* The first value creates a zeroed histogram, then adds to it. */
	INCREMENT_ACCUMULATOR_SUM(fake_hist_map, &key, 5);
	INCREMENT_ACCUMULATOR_SUM(fake_hist_map, &key, 0);
	INCREMENT_ACCUMULATOR_SUM(fake_hist_map, &key, 1ULL << 40);
	/* "No duration" from a latency macro is neither counted nor summed. */
	INCREMENT_ACCUMULATOR_SUM(fake_hist_map, &key, BPF_TELEMETRY_INVALID_DURATION);
	assert_true(fake_hist_exists);
	for (int k = 0; k < BPF_TELEMETRY_NUM_BUCKETS; k++)
		assert_int_equal(fake_hist.buckets[k], k == 0 || k == 3 || k == 31 ? 1 : 0);
	assert_true(fake_hist.sum == 5 + (1ULL << 40));
}

/*
 * Android's macros on a plain hash start map: the start is inserted and the
 * end deletes it, so the map holds only the starts in flight however many
 * tids come and go; SAVE_FIRST_START_TIME keeps a saved start and still
 * answers 0.
 */
static void test_plain_hash_start_deleted(void **state)
{
	__u32 tid = 42, other = 43;

	assert_int_equal(SAVE_FIRST_START_TIME(plain_start, &tid), 0);
	fake_now += 3000;
	assert_int_equal(SAVE_FIRST_START_TIME(plain_start, &tid), 0);
	assert_int_equal(plain_start_value, 1000000);
	fake_now += 2000;
	assert_true(GET_LATENCY_US(plain_start, &tid) == 5);
	assert_false(plain_start_exists);
	assert_int_equal(plain_start_deletes, 1);
	assert_true(GET_LATENCY_US(plain_start, &tid) == BPF_TELEMETRY_INVALID_DURATION);
	/* Another tid takes the (one-entry) map now that the first left it. */
	assert_int_equal(SAVE_START_TIME(plain_start, &other), 0);
	fake_now += 9000; /* 9 us: (8, 16] is bucket 4 */
	assert_int_equal(GET_LATENCY_BUCKET(plain_start, &other), 4);
	assert_int_equal(plain_start_inserts, 2);
	assert_int_equal(plain_start_deletes, 2);
	assert_false(plain_start_exists);
	/* SAVE_START_TIME replaces a saved start. */
	assert_int_equal(SAVE_FIRST_START_TIME(plain_start, &tid), 0);
	fake_now += 7000;
	assert_int_equal(SAVE_START_TIME(plain_start, &tid), 0);
	assert_int_equal(plain_start_value, fake_now);
	assert_int_equal(ktel_invalid_durations, 0);
}

/*
 * Android's macros on an LRU hash start map: the first start of a tid inserts its
 * entry; the end reads and zeroes it in place (the fake fails on any
 * delete); later starts of that tid write the entry without inserting.
 */
static void test_hash_start_in_place(void **state)
{
	__u32 tid = 42, other = 43;

	assert_int_equal(SAVE_FIRST_START_TIME(hash_start, &tid), 0);
	assert_int_equal(hash_start_inserts, 1);
	fake_now += 3000;
	/* SAVE_FIRST_START_TIME keeps a saved start. */
	assert_int_equal(SAVE_FIRST_START_TIME(hash_start, &tid), 0);
	assert_int_equal(hash_start_value, 1000000);
	fake_now += 2000;
	assert_true(GET_LATENCY_US(hash_start, &tid) == 5);
	assert_true(hash_start_exists);
	assert_int_equal(hash_start_value, 0);
	/* No start now: no duration, nothing inserted. */
	assert_true(GET_LATENCY_US(hash_start, &tid) == BPF_TELEMETRY_INVALID_DURATION);
	assert_int_equal(GET_LATENCY_BUCKET(hash_start, &tid), BPF_TELEMETRY_INVALID_BUCKET);
	assert_int_equal(hash_start_inserts, 1);
	/* The next start reuses the entry. */
	assert_int_equal(SAVE_FIRST_START_TIME(hash_start, &tid), 0);
	assert_int_equal(hash_start_inserts, 1);
	assert_int_equal(hash_start_value, fake_now);
	/* SAVE_START_TIME replaces a saved start. */
	fake_now += 7000;
	assert_int_equal(SAVE_START_TIME(hash_start, &tid), 0);
	assert_int_equal(hash_start_value, fake_now);
	fake_now += 9000; /* 9 us: (8, 16] is bucket 4 */
	assert_int_equal(GET_LATENCY_BUCKET(hash_start, &tid), 4);
	/* A key without an entry has no start. */
	assert_true(GET_LATENCY_US(hash_start, &other) == BPF_TELEMETRY_INVALID_DURATION);
	assert_int_equal(ktel_invalid_durations, 0);
}

/* A full hash start map: the insert's error comes back, and no start is saved. */
static void test_hash_start_full(void **state)
{
	__u32 tid = 42;

	hash_start_insert_rc = -7; /* -E2BIG */
	assert_int_equal(SAVE_FIRST_START_TIME(hash_start, &tid), -7);
	assert_int_equal(SAVE_START_TIME(hash_start, &tid), -7);
	assert_true(GET_LATENCY_US(hash_start, &tid) == BPF_TELEMETRY_INVALID_DURATION);
}

/* Android's macros on a task map: the key is ignored, the slot is the
 * current task's, created at the start and cleared at the end. */
static void test_task_map_android_macros(void **state)
{
	__u32 tid = 42;

	assert_true(GET_LATENCY_US(task_start, &tid) == BPF_TELEMETRY_INVALID_DURATION);
	assert_false(current_task.has_slot); /* the end never creates a slot */
	assert_int_equal(SAVE_FIRST_START_TIME(task_start, &tid), 0);
	assert_true(current_task.has_slot);
	assert_int_equal(current_task.slot, 1000000);
	fake_now += 1000;
	assert_int_equal(SAVE_FIRST_START_TIME(task_start, &tid), 0);
	assert_int_equal(current_task.slot, 1000000);
	assert_int_equal(SAVE_START_TIME(task_start, &tid), 0);
	assert_int_equal(current_task.slot, 1001000);
	fake_now += 4000; /* 4 us: (2, 4] is bucket 2 */
	assert_int_equal(GET_LATENCY_BUCKET(task_start, &tid), 2);
	assert_int_equal(current_task.slot, 0);
	assert_false(hash_start_exists);
	storage_unavailable = true;
	assert_int_equal(SAVE_FIRST_START_TIME(task_start, &tid), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_edges),
		cmocka_unit_test(test_bucket_every_power),
		cmocka_unit_test(test_bucket_upper_inclusive),
		cmocka_unit_test(test_process_state),
		cmocka_unit_test(test_process_state_numbering),
		cmocka_unit_test(test_task_start_map_shape),
		cmocka_unit_test_setup(test_task_latency_bucket, reset_fakes),
		cmocka_unit_test_setup(test_task_latency_no_start, reset_fakes),
		cmocka_unit_test_setup(test_task_latency_backwards, reset_fakes),
		cmocka_unit_test_setup(test_task_save_rules, reset_fakes),
		cmocka_unit_test_setup(test_task_storage_unavailable, reset_fakes),
		cmocka_unit_test_setup(test_duration_us, reset_fakes),
		cmocka_unit_test_setup(test_task_latency_us, reset_fakes),
		cmocka_unit_test_setup(test_increment_sum, reset_fakes),
		cmocka_unit_test_setup(test_hash_start_in_place, reset_fakes),
		cmocka_unit_test_setup(test_hash_start_full, reset_fakes),
		cmocka_unit_test_setup(test_plain_hash_start_deleted, reset_fakes),
		cmocka_unit_test_setup(test_task_map_android_macros, reset_fakes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
