/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How long a thread waited for a CPU: the time it was runnable but on the
 * run queue, which is what a busy machine adds to a latency and what the
 * code under test cannot cause. A test that holds a wall-clock latency to a
 * budget takes these waits out of it, so that the budget measures the
 * work (or the blocking) of the code and not the machine's load.
 */
#ifndef KTEL_TEST_RUN_WAIT_H
#define KTEL_TEST_RUN_WAIT_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

/*
 * Nanoseconds thread tid of process pid has waited on a run queue since it
 * started: the second field of /proc/<pid>/task/<tid>/schedstat. pid 0
 * means the calling thread. 0 when the kernel keeps no such count
 * (CONFIG_SCHED_INFO off): a latency then keeps the machine's waits in it,
 * which can only make a budget harder to meet, never hide a stall.
 */
static inline uint64_t ktel_test_run_wait_ns(pid_t pid, pid_t tid)
{
	char path[96];
	uint64_t on_cpu, waited = 0;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/thread-self/schedstat");
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%" SCNu64 " %" SCNu64, &on_cpu, &waited) != 2)
		waited = 0;
	fclose(f);
	return waited;
}

/*
 * A latency measured from the calling thread: its wall time, and how much
 * of it the calling thread and one other (thread tid of process pid, none
 * when pid is 0) spent waiting on a run queue. The two waits are added:
 * where they overlap the sum takes out more than the machine added, so the
 * budget is then a little easier, by no more than that overlap.
 */
struct ktel_test_latency {
	pid_t pid, tid;
	struct timespec t0;
	uint64_t self0, other0;
};

static inline void ktel_test_latency_start(struct ktel_test_latency *l, pid_t pid, pid_t tid)
{
	l->pid = pid;
	l->tid = tid;
	l->other0 = pid ? ktel_test_run_wait_ns(pid, tid) : 0;
	l->self0 = ktel_test_run_wait_ns(0, 0);
	clock_gettime(CLOCK_MONOTONIC, &l->t0);
}

/* Milliseconds since start; the waits among them in *ret_waited_ms. */
static inline double ktel_test_latency_end(const struct ktel_test_latency *l, double *ret_waited_ms)
{
	struct timespec t1;
	uint64_t self, other;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	self = ktel_test_run_wait_ns(0, 0);
	other = l->pid ? ktel_test_run_wait_ns(l->pid, l->tid) : 0;
	*ret_waited_ms = ((self - l->self0) + (other >= l->other0 ? other - l->other0 : 0)) / 1e6;
	return (t1.tv_sec - l->t0.tv_sec) * 1e3 + (t1.tv_nsec - l->t0.tv_nsec) / 1e6;
}

#endif /* KTEL_TEST_RUN_WAIT_H */
