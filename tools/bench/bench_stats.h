/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The statistics the benchmarks print their figures with (ktel-bench-overhead,
 * ktel-bench-attr-cost): medians with their order-statistic interval, means
 * with their Student t interval. One copy, so that two benchmarks that print
 * the same kind of figure compute it the same way.
 *
 * Each function takes at most BENCH_STATS_MAX values and leaves them as they
 * are (a sorted copy lives on the stack).
 */
#ifndef KTEL_BENCH_STATS_H
#define KTEL_BENCH_STATS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_STATS_MAX 1024

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* v's n values, sorted, into s. */
static inline void sorted_copy(const double *v, int n, double *s)
{
	memcpy(s, v, sizeof(*v) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
}

static inline double median_of_sorted(const double *s, int n)
{
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static inline double median(const double *v, int n)
{
	double s[BENCH_STATS_MAX];

	sorted_copy(v, n, s);
	return median_of_sorted(s, n);
}

/* Median, min and max of n values (n >= 1). */
static inline void median_range(const double *v, int n, double *ret_med, double *ret_lo,
				double *ret_hi)
{
	double s[BENCH_STATS_MAX];

	sorted_copy(v, n, s);
	*ret_med = median_of_sorted(s, n);
	*ret_lo = s[0];
	*ret_hi = s[n - 1];
}

/*
 * Median of v with a distribution-free 95% confidence interval: the order
 * statistics at ranks n/2 -+ 0.98 sqrt(n) (the binomial's normal
 * approximation), so a repetition hit by a stall (the hypervisor taking the
 * CPU in the middle of a program) moves it by one rank, not by its size.
 */
static inline void median_ci(const double *v, int n, double *ret_med, double *ret_lo,
			     double *ret_hi)
{
	double s[BENCH_STATS_MAX];
	int k = (int)floor(0.98 * sqrt((double)n));

	sorted_copy(v, n, s);
	*ret_med = median_of_sorted(s, n);
	*ret_lo = s[n / 2 - k < 0 ? 0 : n / 2 - k];
	*ret_hi = s[(n - 1) / 2 + k >= n ? n - 1 : (n - 1) / 2 + k];
}

/* Two-sided 95% quantile of Student's t with df degrees of freedom: the
 * table up to 30, then its values at 60 and 120 and the normal limit. */
static inline double t95(int df)
{
	static const double t[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
				   2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
				   2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
				   2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};

	if (df < 1)
		return NAN;
	if (df <= 30)
		return t[df];
	return df <= 60 ? 2.000 : df <= 120 ? 1.980 : 1.960;
}

/* Mean of n values and the half-width of its 95% confidence interval (0
 * for a single value, which has none). */
static inline void mean_ci(const double *v, int n, double *ret_mean, double *ret_half)
{
	double sum = 0, ss = 0, mean;

	for (int i = 0; i < n; i++)
		sum += v[i];
	mean = sum / n;
	for (int i = 0; i < n; i++)
		ss += (v[i] - mean) * (v[i] - mean);
	*ret_mean = mean;
	*ret_half = n > 1 ? t95(n - 1) * sqrt(ss / (n - 1)) / sqrt(n) : 0;
}

#endif /* KTEL_BENCH_STATS_H */
