/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A run-queue wait read from the scheduler's own stamp at the sched_switch
 * that ends it, for the plugins that measure run-queue waits
 * (runq_latency, runq_stall_events): one computation, so that a wait has
 * the same length in each.
 *
 * With CONFIG_SCHED_INFO the kernel stamps p->sched_info.last_queued with
 * its run queue's clock whenever it queues a task (at wakeup, and at the
 * switch-out of a preempted task), and at the switch-in adds the wait to
 * sched_info.run_delay (/proc/<tid>/schedstat) in sched_info_arrive, which
 * runs after the sched_switch tracepoint. So the switch alone reads the
 * wait, this run queue's clock less the stamp, with no start to save at the
 * wakeup: one program per switch and none per wakeup. A queued task moved
 * to another CPU has the part it waited so far added to run_delay and is
 * stamped again there; the plugin's delay map keeps such a wait whole.
 *
 * Include after ktel_kernel_types.h and bpf_telemetry.h.
 */
#ifndef KTEL_RUNQ_WAIT_H
#define KTEL_RUNQ_WAIT_H

/* The scheduler's accounting of a task (CONFIG_SCHED_INFO). */
struct sched_info___runq {
	__u64 run_delay;   /* ns waited on a run queue, added at each switch-in or move */
	__u64 last_queued; /* rq clock when queued; 0 when not waiting */
} __ktel_core;

struct rq {
	__u64 clock; /* rq_clock(): what sched_info's stamps are taken from */
} __ktel_core;

/* A task's CFS run queue, whose rq is the CPU's run queue the task is on
 * (CONFIG_FAIR_GROUP_SCHED; set for a task of any class when it is given a
 * CPU). The per-CPU variable runqueues would be the direct way, but a
 * kernel without CONFIG_KALLSYMS_ALL has no address for it. */
struct cfs_rq___runq {
	struct rq *rq;
} __ktel_core;

struct sched_entity___runq {
	struct cfs_rq___runq *cfs_rq;
} __ktel_core;

struct task_struct___runq {
	struct sched_info___runq sched_info;
	struct sched_entity___runq se;
} __ktel_core;

/*
 * Each task's run_delay as the kernel leaves it at its last switch-in, plus
 * one (0: not seen yet), in task local storage. run_delay grows only by the
 * parts of a wait (at a move and at the switch-in), so at the next switch-in
 * run_delay less this is what the wait's moves added: a wait moved while
 * queued stays whole (few waits move, but they are the long ones the load
 * balancer moves: docs/benchmarks.md, "Run-queue forms"). A task's first
 * switch-in seen has no earlier value: its wait is taken from its last
 * stamp, which is all of it unless it moved. A switch-in the program did
 * not see (a recursion miss) leaves its wait in run_delay for the next one
 * to take: the sum stays whole, the count is one short.
 */
#define KTEL_DEFINE_RUNQ_DELAY_MAP(name) KTEL_DEFINE_TASK_START_MAP(name)

/*
 * The wait of next (sched_switch's next task) that this switch-in ends, in
 * whole microseconds as ktel_duration_us gives them, with delay_map the
 * plugin's KTEL_DEFINE_RUNQ_DELAY_MAP. BPF_TELEMETRY_INVALID_DURATION when
 * next was not queued as waiting (the idle task, or a stamp missed) or the
 * clock is behind the stamp (counted in ktel_invalid_durations). A task the
 * kernel gives no slot in delay_map (no memory, or another task storage
 * call under way on this CPU) has its wait taken from its last stamp only:
 * counted in ktel_map_write_failures. Pass the map itself (not its
 * address): KTEL_RUNQ_WAIT_US(map, next).
 */
static __always_inline __u64 ktel_runq_wait_us(void *delay_map, struct task_struct *next)
{
	struct task_struct___runq *n = (struct task_struct___runq *)next;
	__u64 queued, begin, end, run_delay, *seen;

	queued = n->sched_info.last_queued;
	if (!queued)
		return BPF_TELEMETRY_INVALID_DURATION;
	/* next is queued on this CPU's run queue, whose clock the scheduler
	 * updated for this switch and reads again in sched_info_arrive. */
	end = n->se.cfs_rq->rq->clock;
	run_delay = n->sched_info.run_delay;
	begin = queued;
	seen = bpf_task_storage_get(delay_map, next, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (seen) {
		/* The parts before the moves go back before the last stamp. */
		if (*seen && run_delay >= *seen - 1)
			begin -= run_delay - (*seen - 1);
		if (end >= queued)
			*seen = run_delay + (end - queued) + 1;
	} else {
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
	}
	return ktel_duration_us(begin, end);
}

#define KTEL_RUNQ_WAIT_US(delay_map, next) ktel_runq_wait_us(&(delay_map), (next))

#endif /* KTEL_RUNQ_WAIT_H */
