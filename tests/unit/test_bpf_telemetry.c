// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpf_telemetry.h logic, compiled for the host: GET_BUCKET against the
 * project's histogram convention (an independent oracle written from the
 * definition, not from the implementation) and get_process_state for every
 * Android ProcessList value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
		{-1000, STATE_NATIVE},     /* NATIVE_ADJ */
		{-901, STATE_NATIVE},
		{-900, STATE_SYSTEM},      /* SYSTEM_ADJ */
		{-800, STATE_PERSISTENT},  /* PERSISTENT_PROC_ADJ */
		{-700, STATE_PERSISTENT},  /* PERSISTENT_SERVICE_ADJ */
		{-1, STATE_PERSISTENT},
		{0, STATE_FOREGROUND},     /* FOREGROUND_APP_ADJ */
		{100, STATE_VISIBLE},      /* VISIBLE_APP_ADJ */
		{200, STATE_PERCEPTIBLE},  /* PERCEPTIBLE_APP_ADJ */
		{250, STATE_PERCEPTIBLE},  /* PERCEPTIBLE_LOW_APP_ADJ */
		{300, STATE_SERVICE_BACKGROUND}, /* BACKUP_APP_ADJ */
		{400, STATE_SERVICE_BACKGROUND}, /* HEAVY_WEIGHT_APP_ADJ */
		{500, STATE_SERVICE_BACKGROUND}, /* SERVICE_ADJ */
		{600, STATE_SERVICE_BACKGROUND}, /* HOME_APP_ADJ */
		{700, STATE_SERVICE_BACKGROUND}, /* PREVIOUS_APP_ADJ */
		{800, STATE_SERVICE_BACKGROUND}, /* SERVICE_B_ADJ */
		{899, STATE_SERVICE_BACKGROUND},
		{900, STATE_CACHED},       /* CACHED_APP_MIN_ADJ */
		{999, STATE_CACHED},       /* CACHED_APP_MAX_ADJ */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_edges),
		cmocka_unit_test(test_bucket_every_power),
		cmocka_unit_test(test_bucket_upper_inclusive),
		cmocka_unit_test(test_process_state),
		cmocka_unit_test(test_process_state_numbering),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
