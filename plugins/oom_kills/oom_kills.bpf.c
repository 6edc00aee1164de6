// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * OOM kills: a counter of OOM victims, by the process state the victim's
 * oom_score_adj maps to (enum process_state). Counted when the kernel marks
 * a task as OOM victim (mark_oom_victim(), tracepoint oom:mark_victim), for
 * the global and the memory cgroup OOM killer alike.
 *
 * Variants (group oom_victim, first match wins, see oom_kills.c):
 *   tp_btf/mark_victim(struct task_struct *task, uid_t uid)   6.8 and later
 *   fentry/mark_oom_victim(struct task_struct *tsk)           when traceable
 *   kprobe/mark_oom_victim                                    kprobe fallback
 *   tp_btf/mark_victim(int pid)                               older kernels
 * The task-passing tracepoint is 6.8 upstream and was backported to stable
 * trees (Debian's 6.1.192 has it: docs/kernels.md); the loader picks by the
 * tracepoint's argument count, not by version.
 * The last has only the pid. The memcg OOM killer often picks the task that
 * is allocating, which is the current task: then its oom_score_adj is read;
 * otherwise the victim is counted as PROCESS_STATE_UNSPECIFIED.
 *
 * Attribution (ktel_attr.h): the subject is the victim, never current (the
 * task whose allocation triggered the kill); with only a pid that is not
 * current, "unknown".
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_attr.h>

struct oom_kill_key {
	__u32 process_state; /* enum process_state */
	__u32 pad;           /* explicit: a key's bytes must all be written */
	__u64 attr;          /* the victim (KTEL_DIM_ATTRIBUTION), 0 when off */
};

/* A counter, not a histogram: the daemon emits deltas of count. */
struct oom_kill_value {
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct oom_kill_key);
	__type(value, struct oom_kill_value);
} oom_kills_map SEC(".maps");

KTEL_ATTR_SETTINGS(oom_kills_map);

static __always_inline void oom_count(__u32 state, __u64 attr)
{
	struct oom_kill_key key = {.process_state = state, .attr = attr};
	struct oom_kill_value *v;

	v = KTEL_ATTR_GET_OR_CREATE(oom_kills_map, &key, struct oom_kill_value);
	if (v)
		__sync_fetch_and_add(&v->count, 1);
}

static __always_inline void oom_count_task(struct task_struct *task)
{
	if (!task) {
		oom_count(PROCESS_STATE_UNSPECIFIED, ktel_attr_unknown(oom_kills_map));
		return;
	}
	oom_count(get_process_state(BPF_CORE_READ(task, signal, oom_score_adj)),
		  ktel_attr_of(oom_kills_map, task));
}

/* mark_victim(struct task_struct *task, uid_t uid), 6.8 and later. */
SEC("tp_btf/mark_victim")
int oom_mark_victim_task(__u64 *ctx)
{
	oom_count_task((struct task_struct *)ctx[0]);
	return 0;
}

/* static void mark_oom_victim(struct task_struct *tsk) */
SEC("fentry/mark_oom_victim")
int oom_mark_victim_fentry(__u64 *ctx)
{
	oom_count_task((struct task_struct *)ctx[0]);
	return 0;
}

#ifndef KTEL_KPROBE_UNSUPPORTED_ARCH
SEC("kprobe/mark_oom_victim")
int oom_mark_victim_kprobe(struct pt_regs *ctx)
{
	oom_count_task((struct task_struct *)KTEL_KPROBE_ARG1(ctx));
	return 0;
}
#endif

/* mark_victim(int pid), 6.1 .. 6.7. */
SEC("tp_btf/mark_victim")
int oom_mark_victim_pid(__u64 *ctx)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	int pid = (int)ctx[0];

	if (BPF_CORE_READ(cur, pid) == pid)
		oom_count_task(cur);
	else
		oom_count(PROCESS_STATE_UNSPECIFIED, ktel_attr_unknown(oom_kills_map));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
