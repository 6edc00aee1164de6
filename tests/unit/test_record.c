// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The record model's helpers (core/base/record.c). Bucket bounds of a linear
 * histogram come from the plugin's descriptor (linear_min, linear_step: any
 * int64 the loader accepts, step > 0), so computing them must not overflow:
 * found by tests/fuzz/fuzz_statsd_line (signed overflow in
 * ktel_hist_upper_bound, UBSan), replayed by its corpus file
 * crash-linear-overflow.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "record.h"

static void test_linear_bounds_exact(void **state)
{
	struct ktel_histogram h = {.scheme = KTEL_HIST_LINEAR,
				   .linear_min = 0,
				   .linear_step = 10,
				   .n_buckets = 4};
	bool inf;

	(void)state;
	assert_true(ktel_hist_upper_bound(&h, 0, &inf) == 9.0);
	assert_false(inf);
	assert_true(ktel_hist_upper_bound(&h, 2, &inf) == 29.0);
	ktel_hist_upper_bound(&h, 3, &inf);
	assert_true(inf);
	h.linear_min = -100;
	assert_true(ktel_hist_upper_bound(&h, 1, &inf) == -81.0);
}

/* A descriptor's extreme min and step: the bounds keep growing, no wrap. */
static void test_linear_bounds_no_overflow(void **state)
{
	struct ktel_histogram h = {.scheme = KTEL_HIST_LINEAR,
				   .linear_min = INT64_MAX - 10,
				   .linear_step = INT64_MAX / 2,
				   .n_buckets = KTEL_HIST_BUCKETS};
	double prev = -INFINITY;
	bool inf;

	(void)state;
	for (uint32_t k = 0; k + 1 < h.n_buckets; k++) {
		double b = ktel_hist_upper_bound(&h, k, &inf);
		double want = (double)INT64_MAX + (double)(k + 1) * (double)(INT64_MAX / 2);

		assert_false(inf);
		assert_true(b > prev);
		assert_true(fabs(b - want) <= want * 1e-12);
		prev = b;
	}
	h.linear_min = INT64_MIN;
	h.linear_step = INT64_MAX;
	assert_true(ktel_hist_upper_bound(&h, 30, &inf) > 0.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_linear_bounds_exact),
		cmocka_unit_test(test_linear_bounds_no_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
