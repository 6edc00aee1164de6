// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Run-queue latency: time a task waits runnable before it runs, in
 * microseconds, per CPU (the CPU it then runs on). A task becomes runnable
 * when it is woken, or when it is switched out still runnable (preempted);
 * it stops waiting at the sched_switch that switches it in.
 *
 * Three forms of the same measure; the loader takes the first the kernel
 * runs (runq_latency.c lists them):
 *
 * - The scheduler's own stamp (runq_switch_si): the switch alone reads the
 *   wait from next's sched_info, with no start to save at the wakeup
 *   (ktel_runq_wait.h, shared with runq_stall_events, says how).
 * - The start in the waiting task's local storage (runq_wakeup,
 *   _wakeup_new, runq_switch), for kernels without sched_info.
 * - The start in a hash by thread id (the _hash programs), for kernels
 *   without task storage either.
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
#include <ktel_runq_wait.h>

/* Enough for the CPUs of large servers; CPUs beyond are not recorded. */
#define RUNQ_MAX_CPUS 1024

/* Starts in the hash form. */
#define RUNQ_MAX_TASKS 16384

struct runq_key {
	__u32 cpu;
	__u32 pad;  /* explicit: a key's bytes must all be written */
	__u64 attr; /* the task that waited (KTEL_DIM_ATTRIBUTION), 0 when off */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RUNQ_MAX_CPUS);
	__type(key, struct runq_key);
	__type(value, struct accumulator_value_sum);
} runq_latency_map SEC(".maps");

KTEL_ATTR_SETTINGS(runq_latency_map);

/* Record a wait of us (BPF_TELEMETRY_INVALID_DURATION: none) of next. */
static __always_inline void record_wait(struct task_struct *next, __u64 us)
{
	struct runq_key key = {.cpu = bpf_get_smp_processor_id()};

	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return;
	key.attr = ktel_attr_of_btf(runq_latency_map, next);
	KTEL_ATTR_INCREMENT_SUM(runq_latency_map, &key, us);
}

/* ---- the scheduler's own stamp ---------------------------------------- */

/* The wait's run_delay carry, per task (ktel_runq_wait.h). */
KTEL_DEFINE_RUNQ_DELAY_MAP(runq_delay_map);

/* sched_switch(bool preempt, struct task_struct *prev,
 *              struct task_struct *next[, unsigned int prev_state]):
 * only next is read, so the 3-argument prototype before 5.18 serves too. */
SEC("tp_btf/sched_switch")
int runq_switch_si(__u64 *ctx)
{
	struct task_struct *next = (struct task_struct *)ctx[2];

	record_wait(next, KTEL_RUNQ_WAIT_US(runq_delay_map, next));
	return 0;
}

/* ---- the start in task storage ------------------------------------------ */

/*
 * Time each task became runnable (ns), in task local storage: a start kept
 * in the task costs no hash insert and delete per event (docs/benchmarks.md,
 * "Per-event overhead"). A task that exits while runnable takes its start
 * with it.
 */
KTEL_DEFINE_TASK_START_MAP(runq_start_map);

static __always_inline void runq_enqueue(struct task_struct *p)
{
	if (!p->pid) /* the idle task never waits */
		return;
	/* The latest wakeup counts: a later one restarts the wait. A task the
	 * kernel gave no slot (no memory, or another task storage call under
	 * way on this CPU) has its wait dropped: counted. */
	if (KTEL_TASK_SAVE_START(runq_start_map, p))
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
}

/* sched_wakeup(struct task_struct *p) */
SEC("tp_btf/sched_wakeup")
int runq_wakeup(__u64 *ctx)
{
	runq_enqueue((struct task_struct *)ctx[0]);
	return 0;
}

/* sched_wakeup_new(struct task_struct *p) */
SEC("tp_btf/sched_wakeup_new")
int runq_wakeup_new(__u64 *ctx)
{
	runq_enqueue((struct task_struct *)ctx[0]);
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

	if (prev_state == KTEL_TASK_RUNNING)
		runq_enqueue(prev);
	if (!next->pid)
		return 0;
	record_wait(next, KTEL_TASK_LATENCY_US(runq_start_map, next));
	return 0;
}

/* ---- the start in a hash ---------------------------------------------------- */

/* Thread id -> time it became runnable (ns). LRU: a task that exits while
 * runnable never switches in, and its entry must not hold a slot forever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RUNQ_MAX_TASKS);
	__type(key, __u32);
	__type(value, __u64);
} runq_start_hash SEC(".maps");

static __always_inline void runq_enqueue_hash(struct task_struct *p)
{
	__u32 tid = (__u32)p->pid;
	__u64 now;

	if (!tid) /* the idle task never waits */
		return;
	now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&runq_start_hash, &tid, &now, BPF_ANY))
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
}

SEC("tp_btf/sched_wakeup")
int runq_wakeup_hash(__u64 *ctx)
{
	runq_enqueue_hash((struct task_struct *)ctx[0]);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int runq_wakeup_new_hash(__u64 *ctx)
{
	runq_enqueue_hash((struct task_struct *)ctx[0]);
	return 0;
}

SEC("tp_btf/sched_switch")
int runq_switch_hash(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = (unsigned int)ctx[3];
	__u32 tid;

	if (prev_state == KTEL_TASK_RUNNING)
		runq_enqueue_hash(prev);
	tid = (__u32)next->pid;
	if (!tid)
		return 0;
	record_wait(next, GET_LATENCY_US(runq_start_hash, &tid));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
