// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "record.h"

#include <math.h>

double ktel_hist_upper_bound(const struct ktel_histogram *h, uint32_t k, bool *ret_inf)
{
	bool last = k + 1 >= h->n_buckets;

	*ret_inf = last;
	if (last)
		return INFINITY;
	switch (h->scheme) {
	case KTEL_HIST_LOG2_FLOOR:
		/* slot k holds [2^k, 2^(k+1)): integers up to 2^(k+1) - 1. */
		return ldexp(1.0, (int)k + 1) - 1.0;
	case KTEL_HIST_LINEAR:
		/* bucket k holds [min + k*step, min + (k+1)*step). In double:
		 * a plugin's min and step are any int64, and the sum in int64
		 * can overflow (exact below 2^53 either way). */
		return (double)h->linear_min + (double)(k + 1) * (double)h->linear_step - 1.0;
	case KTEL_HIST_LOG2:
	case KTEL_HIST_NONE:
	default:
		/* bucket 0: v <= 1; bucket k: 2^(k-1) < v <= 2^k. */
		return k == 0 ? 1.0 : ldexp(1.0, (int)k);
	}
}

uint64_t ktel_hist_count(const struct ktel_histogram *h)
{
	uint64_t n = 0;

	for (uint32_t k = 0; k < h->n_buckets; k++)
		n += h->counts[k];
	return n;
}

const char *ktel_hist_scheme_name(enum ktel_hist_scheme scheme)
{
	static const char *const names[] = {
		[KTEL_HIST_NONE] = "none",
		[KTEL_HIST_LOG2] = "log2",
		[KTEL_HIST_LOG2_FLOOR] = "log2_floor",
		[KTEL_HIST_LINEAR] = "linear",
	};

	return (unsigned)scheme < KTEL_ARRAY_SIZE(names) && names[scheme] ? names[scheme]
									  : "unknown";
}
