// SPDX-License-Identifier: GPL-2.0
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

/* Enough for the CPUs of large servers; CPUs beyond are not recorded. */
#define RUNQ_MAX_CPUS 1024
#define RUNQ_MAX_TASKS 16384

struct runq_key {
	__u32 cpu;
};

/*
 * Task id -> time it became runnable (ns). LRU: a task that exits while
 * runnable never switches in, and its entry must not hold a slot forever.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RUNQ_MAX_TASKS);
	__type(key, __u32);
	__type(value, __u64);
} runq_start_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RUNQ_MAX_CPUS);
	__type(key, struct runq_key);
	__type(value, struct accumulator_value);
} runq_latency_map SEC(".maps");

static __always_inline void runq_enqueue(__u32 tid)
{
	__u64 now = bpf_ktime_get_ns();

	if (!tid) /* the idle task never waits */
		return;
	/* The latest wakeup counts: a later one restarts the wait. */
	bpf_map_update_elem(&runq_start_map, &tid, &now, BPF_ANY);
}

/* sched_wakeup(struct task_struct *p) */
SEC("tp_btf/sched_wakeup")
int runq_wakeup(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];

	runq_enqueue((__u32)BPF_CORE_READ(p, pid));
	return 0;
}

/* sched_wakeup_new(struct task_struct *p) */
SEC("tp_btf/sched_wakeup_new")
int runq_wakeup_new(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];

	runq_enqueue((__u32)BPF_CORE_READ(p, pid));
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
	__u32 tid, bucket;

	if (prev_state == KTEL_TASK_RUNNING)
		runq_enqueue((__u32)BPF_CORE_READ(prev, pid));
	tid = (__u32)BPF_CORE_READ(next, pid);
	if (!tid)
		return 0;
	bucket = GET_LATENCY_BUCKET(runq_start_map, &tid);
	if (bucket == BPF_TELEMETRY_INVALID_BUCKET)
		return 0;
	INCREMENT_ACCUMULATOR(runq_latency_map, &key, bucket);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
