/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * bpf_stats off for a benchmark's run (ktel-bench-overhead,
 * ktel-bench-attr-cost): kernel.bpf_stats_enabled set to 0 and put back as
 * it was at exit or on SIGINT/SIGTERM. With bpf_stats on, every program run
 * pays two clock reads, which a benchmark of what programs cost the
 * workload must not count. Another process holding BPF_ENABLE_STATS keeps
 * the kernel's switch on whatever the sysctl says; the sysctl then still
 * reads 1, which the caller reports.
 */
#ifndef KTEL_BENCH_BPF_STATS_OFF_H
#define KTEL_BENCH_BPF_STATS_OFF_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#define BENCH_STATS_SYSCTL "/proc/sys/kernel/bpf_stats_enabled"

static int bench_stats_was = -1; /* put back at exit when 1 */

/* The sysctl's value, or -1. */
static inline int bench_stats_read(void)
{
	FILE *f = fopen(BENCH_STATS_SYSCTL, "r");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static inline int bench_stats_write(int v)
{
	FILE *f = fopen(BENCH_STATS_SYSCTL, "w");
	int rc;

	if (!f)
		return -errno;
	rc = fprintf(f, "%d\n", v) < 0 ? -EIO : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

static inline void bench_stats_restore(void)
{
	if (bench_stats_was > 0)
		bench_stats_write(bench_stats_was);
	bench_stats_was = -1;
}

static inline void bench_stats_on_signal(int sig)
{
	bench_stats_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Turn bpf_stats off until exit; the sysctl's value before (-1 if it could
 * not be read). 0 when it is off now, -errno when it could not be turned
 * off, -EBUSY when the sysctl still reads 1 after the write.
 */
static inline int bench_stats_off(int *ret_was)
{
	int was = bench_stats_read(), rc = 0;

	*ret_was = was;
	if (was == 1) {
		bench_stats_was = 1;
		signal(SIGINT, bench_stats_on_signal);
		signal(SIGTERM, bench_stats_on_signal);
		atexit(bench_stats_restore);
		rc = bench_stats_write(0);
	}
	if (!rc && bench_stats_read() != 0)
		rc = -EBUSY;
	return rc;
}

#endif /* KTEL_BENCH_BPF_STATS_OFF_H */
