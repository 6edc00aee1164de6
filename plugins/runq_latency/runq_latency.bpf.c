// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Run-queue latency: time a task waits runnable before it runs, in
 * microseconds, per CPU (the CPU it then runs on). The method of runqlat:
 * a task becomes runnable at sched_wakeup / sched_wakeup_new, or at
 * sched_switch when it is switched out still runnable (preempted); it stops
 * waiting at the sched_switch that switches it in.
 *
 * Per CPU rather than system-wide: an imbalance (one CPU's queue backed up
 * while others idle) is the usual question, and the key costs one u32. Sum
 * the CPUs for the system-wide view.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_attr.h>

/* Enough for the CPUs of large servers; CPUs beyond are not recorded. */
#define RUNQ_MAX_CPUS 1024

struct runq_key {
	__u32 cpu;
	__u32 pad;  /* explicit: a key's bytes must all be written */
	__u64 attr; /* the task that waited (KTEL_DIM_ATTRIBUTION), 0 when off */
};

/*
 * Time each task became runnable (ns), in task local storage: this runs on
 * every wakeup and context switch, and a start kept in the task costs no
 * hash insert and delete per event (docs/benchmarks.md, "Per-event
 * overhead"). A task that exits while runnable takes its start with it.
 */
KTEL_DEFINE_TASK_START_MAP(runq_start_map);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RUNQ_MAX_CPUS);
	__type(key, struct runq_key);
	__type(value, struct accumulator_value_sum);
} runq_latency_map SEC(".maps");

KTEL_ATTR_SETTINGS(runq_latency_map);

static __always_inline void runq_enqueue(struct task_struct *p)
{
	if (!BPF_CORE_READ(p, pid)) /* the idle task never waits */
		return;
	/* The latest wakeup counts: a later one restarts the wait. */
	KTEL_TASK_SAVE_START(runq_start_map, p);
}

/* sched_wakeup(struct task_struct *p) */
SEC("tp_btf/sched_wakeup")
int runq_wakeup(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];

	runq_enqueue(p);
	return 0;
}

/* sched_wakeup_new(struct task_struct *p) */
SEC("tp_btf/sched_wakeup_new")
int runq_wakeup_new(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];

	runq_enqueue(p);
	return 0;
}

/* sched_switch(bool preempt, struct task_struct *prev,
 *              struct task_struct *next, unsigned int prev_state) */
SEC("tp_btf/sched_switch")
int runq_switch(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = (unsigned int)ctx[3];
	struct runq_key key = {.cpu = bpf_get_smp_processor_id()};
	__u64 us;

	if (prev_state == KTEL_TASK_RUNNING)
		runq_enqueue(prev);
	if (!BPF_CORE_READ(next, pid))
		return 0;
	us = KTEL_TASK_LATENCY_US(runq_start_map, next);
	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return 0;
	key.attr = ktel_attr_of_btf(runq_latency_map, next);
	KTEL_ATTR_INCREMENT_SUM(runq_latency_map, &key, us);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
