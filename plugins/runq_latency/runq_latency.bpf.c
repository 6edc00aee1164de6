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
 * - The scheduler's own stamp (runq_switch_si). With CONFIG_SCHED_INFO the
 *   kernel stamps p->sched_info.last_queued with its run queue's clock
 *   whenever it queues a task (at wakeup, and at the switch-out of a
 *   preempted task), and at the switch-in adds the wait to
 *   sched_info.run_delay (/proc/<tid>/schedstat) in sched_info_arrive, which
 *   runs after the sched_switch tracepoint. So the switch alone reads the
 *   wait, this run queue's clock less the stamp, with no start to save at
 *   the wakeup: one program per switch and none per wakeup. A queued task
 *   moved to another CPU has the part it waited so far added to run_delay
 *   and is stamped again there; runq_delay_map keeps such a wait whole.
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

/* Enough for the CPUs of large servers; CPUs beyond are not recorded. */
#define RUNQ_MAX_CPUS 1024

/* Starts in the hash form. */
#define RUNQ_MAX_TASKS 16384

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
KTEL_DEFINE_TASK_START_MAP(runq_delay_map);

/* sched_switch(bool preempt, struct task_struct *prev,
 *              struct task_struct *next[, unsigned int prev_state]):
 * only next is read, so the 3-argument prototype before 5.18 serves too. */
SEC("tp_btf/sched_switch")
int runq_switch_si(__u64 *ctx)
{
	struct task_struct___runq *n = (struct task_struct___runq *)ctx[2];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u64 queued, begin, end, run_delay, *seen;

	queued = n->sched_info.last_queued;
	if (!queued) /* not queued as waiting: the idle task, or a stamp missed */
		return 0;
	/* next is queued on this CPU's run queue, whose clock the scheduler
	 * updated for this switch and reads again in sched_info_arrive. */
	end = n->se.cfs_rq->rq->clock;
	run_delay = n->sched_info.run_delay;
	begin = queued;
	seen = ktel_task_start_slot(runq_delay_map, next);
	if (seen) {
		/* The parts before the moves go back before the last stamp. */
		if (*seen && run_delay >= *seen - 1)
			begin -= run_delay - (*seen - 1);
		if (end >= queued)
			*seen = run_delay + (end - queued) + 1;
	} else {
		/* No slot (no memory, or another task storage call under way
		 * on this CPU): the wait is taken from its last stamp only. */
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
	}
	record_wait(next, ktel_duration_us(begin, end));
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
