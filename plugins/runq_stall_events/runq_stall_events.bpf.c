// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Run-queue stalls: one event per wait of a runnable task for a CPU that
 * lasted at least threshold_us. The waits are measured as in runq_latency
 * (runnable at sched_wakeup / sched_wakeup_new, or when preempted at
 * sched_switch; running at the sched_switch that switches it in), but only
 * the long ones leave the kernel, so the stream stays small while the
 * histogram path keeps the full distribution.
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

/* Task id -> time it became runnable (ns). LRU: a task that exits while
 * runnable never switches in, and its entry must not hold a slot forever. */
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

static __always_inline void enqueue(__u32 tid)
{
	__u64 now = bpf_ktime_get_ns();

	if (!tid) /* the idle task never waits */
		return;
	/* The latest wakeup counts: a later one restarts the wait. */
	bpf_map_update_elem(&runq_stall_start, &tid, &now, BPF_ANY);
}

/* sched_wakeup(struct task_struct *p) */
SEC("tp_btf/sched_wakeup")
int runq_stall_wakeup(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];

	enqueue((__u32)BPF_CORE_READ(p, pid));
	return 0;
}

/* sched_wakeup_new(struct task_struct *p) */
SEC("tp_btf/sched_wakeup_new")
int runq_stall_wakeup_new(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];

	enqueue((__u32)BPF_CORE_READ(p, pid));
	return 0;
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
	e->pid = BPF_CORE_READ(next, tgid);
	e->cpu = bpf_get_smp_processor_id();
	e->prev_tid = BPF_CORE_READ(prev, pid);
	BPF_CORE_READ_STR_INTO(&e->comm, next, comm);
	BPF_CORE_READ_STR_INTO(&e->prev_comm, prev, comm);
	bpf_ringbuf_submit(e, 0);
}

/* sched_switch(bool preempt, struct task_struct *prev,
 *              struct task_struct *next, unsigned int prev_state) */
SEC("tp_btf/sched_switch")
int runq_stall_switch(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = (unsigned int)ctx[3];
	__u64 *start, now, wait_us;
	__u32 tid;

	if (prev_state == KTEL_TASK_RUNNING)
		enqueue((__u32)BPF_CORE_READ(prev, pid));
	tid = (__u32)BPF_CORE_READ(next, pid);
	if (!tid)
		return 0;
	start = bpf_map_lookup_elem(&runq_stall_start, &tid);
	if (!start)
		return 0;
	now = bpf_ktime_get_ns();
	wait_us = now >= *start ? (now - *start) / 1000 : 0;
	bpf_map_delete_elem(&runq_stall_start, &tid);
	if (wait_us < threshold_us)
		return 0;
	emit(prev, next, tid, now, wait_us);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
