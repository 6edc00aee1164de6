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
 * - The scheduler's own stamp (runq_switch_si, runq_migrate). With
 *   CONFIG_SCHED_INFO the kernel stamps p->sched_info.last_queued with its
 *   run queue's clock whenever it queues a task (at wakeup, and at the
 *   switch-out of a preempted task), and at the switch-in adds the wait to
 *   sched_info.run_delay (/proc/<tid>/schedstat) in sched_info_arrive, which
 *   runs after the sched_switch tracepoint. So the switch alone reads the
 *   whole wait, this run queue's clock less the stamp, with no start of its
 *   own to write: one program per switch and none per wakeup. A queued task
 *   moved to another CPU (deactivate_task) has the part it waited so far
 *   added to run_delay and its stamp cleared, and is stamped again on the
 *   new CPU; runq_migrate keeps the wait whole across such moves.
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
#include <bpf/bpf_tracing.h>
#include <bpf_telemetry.h>
#include <ktel_attr.h>

/* Enough for the CPUs of large servers; CPUs beyond are not recorded. */
#define RUNQ_MAX_CPUS 1024

/* Waits under way across a move to another CPU, and the hash starts. */
#define RUNQ_MAX_TASKS 16384

/* p->on_rq of a task being moved between run queues (kernel/sched/sched.h). */
#define RUNQ_ON_RQ_MIGRATING 2

/* The scheduler's accounting of a task (CONFIG_SCHED_INFO). */
struct sched_info___runq {
	unsigned long pcount; /* switch-ins so far */
	__u64 run_delay;      /* ns waited on a run queue, added at each switch-in or move */
	__u64 last_queued;    /* rq clock when queued; 0 when not waiting */
} __ktel_core;

struct task_struct___runq {
	struct sched_info___runq sched_info;
} __ktel_core;

struct rq {
	__u64 clock; /* rq_clock(): what sched_info's stamps are taken from */
} __ktel_core;

/* The per-CPU run queues. Weak: a kernel whose BTF lacks them refuses only
 * the program that reads them, and the next form is taken. */
extern struct rq runqueues __ksym __weak;

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
 * A wait that a move to another CPU split: run_delay as it was before the
 * first part was added (plus one, so that 0 means none), and pcount then,
 * which tells a carry of the wait under way from one its switch-in never
 * took (a switch the program missed).
 */
struct runq_carry {
	__u64 base;
	__u64 pcount;
};

/* Thread id -> its wait's carry; written only at a move, taken at the
 * switch-in. LRU: a carry whose switch-in was missed must not hold a slot
 * forever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RUNQ_MAX_TASKS);
	__type(key, __u32);
	__type(value, struct runq_carry);
} runq_carry_map SEC(".maps");

/* Carries made and not yet taken: the switch looks in runq_carry_map only
 * while there are any, so a switch costs no map lookup when no wait was
 * moved. A carry lost to the LRU leaves this high: lookups, never a wrong
 * wait. */
__u64 runq_carries = 0;

/* Waits moved to another CPU while queued (carries made), for the benchmark. */
__u64 runq_moved_waits = 0;

/* sched_switch(bool preempt, struct task_struct *prev,
 *              struct task_struct *next[, unsigned int prev_state]):
 * only next is read, so the 3-argument prototype before 5.18 serves too. */
SEC("tp_btf/sched_switch")
int runq_switch_si(__u64 *ctx)
{
	struct task_struct___runq *n = (struct task_struct___runq *)ctx[2];
	struct task_struct *next = (struct task_struct *)ctx[2];
	struct rq *rq = bpf_this_cpu_ptr(&runqueues);
	struct runq_carry *c;
	__u64 queued, begin, end, run_delay;
	__u32 tid;

	queued = n->sched_info.last_queued;
	if (!queued) /* not queued as waiting: the idle task, or a stamp missed */
		return 0;
	end = rq->clock;
	begin = queued;
	if (*(volatile __u64 *)&runq_carries) {
		tid = (__u32)next->pid;
		c = bpf_map_lookup_elem(&runq_carry_map, &tid);
		if (c) {
			/* run_delay holds the parts before the moves; begin is
			 * moved back by them. */
			run_delay = n->sched_info.run_delay;
			if (c->pcount == n->sched_info.pcount && c->base &&
			    run_delay >= c->base - 1)
				begin -= run_delay - (c->base - 1);
			bpf_map_delete_elem(&runq_carry_map, &tid);
			__sync_fetch_and_add(&runq_carries, -1);
		}
	}
	record_wait(next, ktel_duration_us(begin, end));
	return 0;
}

/*
 * deactivate_task(struct rq *rq, struct task_struct *p, int flags): p leaves
 * rq to be queued on another. A task waiting there (last_queued set) is
 * being moved; the kernel adds the part waited so far to run_delay next.
 * The first move of a wait notes run_delay before it, so that the switch-in
 * can take the whole wait. A task switched out to sleep (the kernel's call
 * before 6.12) is not waiting and is left alone.
 */
SEC("fentry/deactivate_task")
int BPF_PROG(runq_migrate, struct rq *rq, struct task_struct *p, int flags)
{
	struct task_struct___runq *t = (struct task_struct___runq *)p;
	struct runq_carry carry, *c;
	__u32 tid;

	if (!bpf_core_field_exists(t->sched_info) || !t->sched_info.last_queued)
		return 0;
	tid = (__u32)p->pid;
	carry.pcount = t->sched_info.pcount;
	c = bpf_map_lookup_elem(&runq_carry_map, &tid);
	if (c && c->pcount == carry.pcount)
		return 0; /* a later move of the same wait: the first noted it */
	carry.base = t->sched_info.run_delay + 1;
	if (bpf_map_update_elem(&runq_carry_map, &tid, &carry, BPF_ANY)) {
		/* The wait will be counted short, by the part before this move. */
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
		return 0;
	}
	__sync_fetch_and_add(&runq_moved_waits, 1);
	if (!c)
		__sync_fetch_and_add(&runq_carries, 1);
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
