// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Run-queue stalls: one event per wait of a runnable task for a CPU that
 * lasted at least threshold_us. The waits are measured as in runq_latency
 * (runnable at sched_wakeup / sched_wakeup_new, or when preempted at
 * sched_switch; running at the sched_switch that switches it in), but only
 * the long ones leave the kernel, so the stream stays small while the
 * histogram path keeps the full distribution.
 *
 * Three forms of the same measure, as in runq_latency; the loader takes the
 * first the kernel runs (runq_stall_events.c lists them):
 *
 * - The scheduler's own stamp (runq_stall_switch_si): the switch alone
 *   reads the wait from next's sched_info, with no start to save at the
 *   wakeup (ktel_runq_wait.h). runq_latency computes its waits with the
 *   same code, so a wait has the same length in both.
 * - The start in the waiting task's local storage (runq_stall_wakeup,
 *   _wakeup_new, _switch), for kernels without sched_info: a start kept in
 *   the task costs no hash update per wakeup and no lookup and delete per
 *   switch (docs/benchmarks.md, "Start forms under real events").
 * - The start in a hash by thread id (the _hash programs), for kernels
 *   without task storage either.
 *
 * The task arguments of tp_btf programs are BTF pointers: every form reads
 * their members with plain loads.
 *
 * threshold_us is a .rodata param: the daemon sets it from the config
 * (metrics.runq_stall_events.params.threshold_us, default 100 ms; the
 * descriptor in runq_stall_events.c says why) before load, and the
 * verifier then sees a constant. 0 emits every wait: a flood.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_runq_wait.h>

#define RUNQ_STALL_MAX_TASKS 16384

const volatile __u64 threshold_us = 100000;

/* One stall (the daemon decodes it from this BTF type). */
struct runq_stall_event {
	__u64 ts_ns;   /* when the task got the CPU (bpf_ktime_get_ns) */
	__u64 wait_us; /* how long it was runnable without running */
	__s32 pid;     /* process (thread group) id of the task */
	__s32 tid;
	__u32 cpu;      /* the CPU it then ran on */
	__s32 prev_tid; /* the task switched out for it */
	char comm[16];
	char prev_comm[16];
};
KTEL_EXPORT_TYPE(struct runq_stall_event, runq_stall_event);

/* The stamp form's run_delay carry, per task (ktel_runq_wait.h). */
KTEL_DEFINE_RUNQ_DELAY_MAP(runq_stall_delay);

/* Time each task became runnable (ns), in the task; 0 when it is not waiting.
 * A task that exits while runnable takes its start with it. */
KTEL_DEFINE_TASK_START_MAP(runq_stall_task_start);

/* The fallback's starts, task id -> time it became runnable (ns). LRU: a task
 * that exits while runnable never switches in, and its entry must not hold a
 * slot forever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RUNQ_STALL_MAX_TASKS);
	__type(key, __u32);
	__type(value, __u64);
} runq_stall_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} runq_stall_rb SEC(".maps");

/* Failed reservations (ring full), per CPU; the daemon sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} runq_stall_lost SEC(".maps");

/* The latest wakeup counts: a later one restarts the wait. A task the
 * kernel gave no slot (no memory, or another task storage call under way on
 * this CPU) has its wait dropped: counted (ktel_map_write_failures). */
static __always_inline void enqueue_task(struct task_struct *p)
{
	if (!p->pid) /* the idle task never waits */
		return;
	if (KTEL_TASK_SAVE_START(runq_stall_task_start, p))
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
}

/* enqueue_task for the fallback: the start in the LRU hash, by thread id. */
static __always_inline void enqueue_hash(struct task_struct *p)
{
	__u32 tid = (__u32)p->pid;
	__u64 now;

	if (!tid) /* the idle task never waits */
		return;
	now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&runq_stall_start, &tid, &now, BPF_ANY))
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
}

static __always_inline void emit(struct task_struct *prev, struct task_struct *next, __u32 tid,
				 __u64 now, __u64 wait_us)
{
	struct runq_stall_event *e = bpf_ringbuf_reserve(&runq_stall_rb, sizeof(*e), 0);
	__u32 key = 0;
	__u64 *lost;

	if (!e) {
		lost = bpf_map_lookup_elem(&runq_stall_lost, &key);
		if (lost)
			__sync_fetch_and_add(lost, 1);
		return;
	}
	e->ts_ns = now;
	e->wait_us = wait_us;
	e->tid = (__s32)tid;
	e->pid = next->tgid;
	e->cpu = bpf_get_smp_processor_id();
	e->prev_tid = prev->pid;
	BPF_CORE_READ_STR_INTO(&e->comm, next, comm);
	BPF_CORE_READ_STR_INTO(&e->prev_comm, prev, comm);
	bpf_ringbuf_submit(e, 0);
}

/* A switch-in of next that waited since start (ns): an event when the wait
 * reaches the threshold. */
static __always_inline void switched_in(struct task_struct *prev, struct task_struct *next,
					__u32 tid, __u64 start)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 wait_us = now >= start ? (now - start) / 1000 : 0;

	if (wait_us < threshold_us)
		return;
	emit(prev, next, tid, now, wait_us);
}

/* sched_switch(bool preempt, struct task_struct *prev,
 *              struct task_struct *next[, unsigned int prev_state]):
 * prev_state is not read, so the 3-argument prototype before 5.18 serves
 * too. */
SEC("tp_btf/sched_switch")
int runq_stall_switch_si(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u64 wait_us = KTEL_RUNQ_WAIT_US(runq_stall_delay, next);

	if (wait_us == BPF_TELEMETRY_INVALID_DURATION || wait_us < threshold_us)
		return 0;
	emit(prev, next, (__u32)next->pid, bpf_ktime_get_ns(), wait_us);
	return 0;
}

/* sched_wakeup(struct task_struct *p) */
SEC("tp_btf/sched_wakeup")
int runq_stall_wakeup(__u64 *ctx)
{
	enqueue_task((struct task_struct *)ctx[0]);
	return 0;
}

/* sched_wakeup_new(struct task_struct *p) */
SEC("tp_btf/sched_wakeup_new")
int runq_stall_wakeup_new(__u64 *ctx)
{
	enqueue_task((struct task_struct *)ctx[0]);
	return 0;
}

/* sched_switch(bool preempt, struct task_struct *prev,
 *              struct task_struct *next, unsigned int prev_state) */
SEC("tp_btf/sched_switch")
int runq_stall_switch(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = (unsigned int)ctx[3];
	__u64 *slot, start;
	__u32 tid;

	if (prev_state == KTEL_TASK_RUNNING)
		enqueue_task(prev);
	tid = (__u32)next->pid;
	if (!tid)
		return 0;
	/* Never creates a slot: a task with none was not seen waiting. */
	slot = bpf_task_storage_get(&runq_stall_task_start, next, NULL, 0);
	if (!slot || !*slot)
		return 0;
	start = *slot;
	*slot = 0;
	switched_in(prev, next, tid, start);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int runq_stall_wakeup_hash(__u64 *ctx)
{
	enqueue_hash((struct task_struct *)ctx[0]);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int runq_stall_wakeup_new_hash(__u64 *ctx)
{
	enqueue_hash((struct task_struct *)ctx[0]);
	return 0;
}

SEC("tp_btf/sched_switch")
int runq_stall_switch_hash(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = (unsigned int)ctx[3];
	__u64 *slot, start;
	__u32 tid;

	if (prev_state == KTEL_TASK_RUNNING)
		enqueue_hash(prev);
	tid = (__u32)next->pid;
	if (!tid)
		return 0;
	slot = bpf_map_lookup_elem(&runq_stall_start, &tid);
	if (!slot)
		return 0;
	start = *slot;
	bpf_map_delete_elem(&runq_stall_start, &tid);
	switched_in(prev, next, tid, start);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
