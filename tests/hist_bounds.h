/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a log2 histogram's counts say about its sum (docs/architecture.md,
 * "Histogram convention"), written from the convention, not from the
 * decoder: bucket 0 holds v <= 1, bucket k (1..30) holds 2^(k-1) < v <= 2^k,
 * bucket 31 holds v > 2^30. For integer values (the built-in plugins sum
 * whole microseconds, or bytes) the smallest value bucket k can hold is
 * 2^(k-1) + 1 (0 for bucket 0), the largest 2^k (1 for bucket 0; none for
 * bucket 31). So a consistent sum lies within
 *	sum_k count_k * (2^(k-1) + 1)  <=  sum  <=  sum_k count_k * 2^k
 * the upper bound unbounded once bucket 31 holds anything. The bounds are
 * exact integers: u64 is wide enough for any count a test produces.
 */
#ifndef KTEL_TEST_HIST_BOUNDS_H
#define KTEL_TEST_HIST_BOUNDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define HIST_BOUNDS_BUCKETS 32

struct hist_bounds {
	uint64_t count;
	uint64_t min_sum, max_sum;
	bool unbounded; /* bucket 31 holds values: no upper bound */
};

/* Smallest and largest integer bucket k holds (largest unused for 31). */
static inline uint64_t hist_bucket_min(uint32_t k)
{
	return k == 0 ? 0 : (1ULL << (k - 1)) + 1;
}

static inline uint64_t hist_bucket_max(uint32_t k)
{
	return k == 0 ? 1 : 1ULL << k;
}

/* The bounds n log2 bucket counts put on their sum. */
static inline struct hist_bounds hist_bounds_of(const uint64_t *counts, uint32_t n)
{
	struct hist_bounds b = {0};

	for (uint32_t k = 0; k < n && k < HIST_BOUNDS_BUCKETS; k++) {
		b.count += counts[k];
		b.min_sum += counts[k] * hist_bucket_min(k);
		if (k == HIST_BOUNDS_BUCKETS - 1)
			b.unbounded |= counts[k] > 0;
		else
			b.max_sum += counts[k] * hist_bucket_max(k);
	}
	return b;
}

/*
 * Whether sum is consistent with the counts; on false, why in buf. A sum of
 * 0 with counts above bucket 0 fails the lower bound: a histogram that
 * counted values of 2 or more cannot sum to nothing.
 */
static inline bool hist_sum_consistent(const uint64_t *counts, uint32_t n, uint64_t sum, char *buf,
				       size_t len)
{
	struct hist_bounds b = hist_bounds_of(counts, n);

	if (sum >= b.min_sum && (b.unbounded || sum <= b.max_sum))
		return true;
	if (b.unbounded)
		snprintf(buf, len, "sum %llu of %llu values below the buckets' least %llu",
			 (unsigned long long)sum, (unsigned long long)b.count,
			 (unsigned long long)b.min_sum);
	else
		snprintf(buf, len, "sum %llu of %llu values outside the buckets' [%llu, %llu]",
			 (unsigned long long)sum, (unsigned long long)b.count,
			 (unsigned long long)b.min_sum, (unsigned long long)b.max_sum);
	return false;
}

#endif /* KTEL_TEST_HIST_BOUNDS_H */
