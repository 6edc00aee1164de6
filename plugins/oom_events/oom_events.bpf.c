// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * OOM kill events: one ring buffer event per task the kernel marks as OOM
 * victim (mark_oom_victim(), tracepoint oom:mark_victim), from the global
 * and the memory cgroup OOM killer alike: the victim's pid, thread id,
 * command, uid, oom_score_adj (and the Android process state it maps to),
 * the inode number of its memory cgroup, and its memory size in pages.
 *
 * Variants (group oom_victim, first match wins, see oom_events.c):
 *   tp_btf/mark_victim(struct task_struct *task, uid_t uid)   6.8 and later
 *   fentry/mark_oom_victim(struct task_struct *tsk)           when traceable
 *   kprobe/mark_oom_victim                                    kprobe fallback
 *   tp_btf/mark_victim(int pid)                               older kernels
 * The task-passing tracepoint is 6.8 upstream and was backported to stable
 * trees (Debian's 6.1.192 has it: docs/kernels.md); the loader picks by the
 * tracepoint's argument count, not by version.
 * The last has only the thread id. The memcg OOM killer often picks the task
 * that is allocating, which is the current task: then everything is read
 * from it; otherwise only tid and pid (= tid) are known and the rest is 0,
 * "" and uid -1.
 *
 * mark_oom_victim() returns early for a task already marked, so a task
 * yields at most one event.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>

#define OOM_UID_UNKNOWN 0xffffffffU

/* Kernel members read here only, CO-RE relocated (flavors of the kernel's
 * types, matched without the ___oom suffix). */
enum cgroup_subsys_id {
	memory_cgrp_id = 4, /* the value is relocated against the kernel's */
};

struct kernfs_node___oom {
	__u64 id; /* the cgroup directory's inode number on 64-bit */
} __ktel_core;

struct cgroup___oom {
	struct kernfs_node___oom *kn;
} __ktel_core;

struct cgroup_subsys_state___oom {
	struct cgroup___oom *cgroup;
} __ktel_core;

struct css_set___oom {
	struct cgroup_subsys_state___oom *subsys[16];
} __ktel_core;

/* 6.2 and later: rss_stat is an array of percpu_counter; the kernel's own
 * get_mm_counter() reads .count, the same approximation. */
struct percpu_counter___oom {
	__s64 count;
} __ktel_core;

struct mm_struct___pcpu {
	struct percpu_counter___oom rss_stat[4];
} __ktel_core;

/* 6.1: struct mm_rss_stat { atomic_long_t count[NR_MM_COUNTERS]; }. */
struct atomic_long___oom {
	__s64 counter;
} __ktel_core;

struct mm_rss_stat___oom {
	struct atomic_long___oom count[4];
} __ktel_core;

struct mm_struct___atomic {
	struct mm_rss_stat___oom rss_stat;
} __ktel_core;

struct task_struct___oom {
	struct css_set___oom *cgroups;
} __ktel_core;

/* MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES: RSS leaves out swap. */
#define OOM_MM_FILEPAGES 0
#define OOM_MM_ANONPAGES 1
#define OOM_MM_SHMEMPAGES 3

/* One OOM victim (the daemon decodes it from this BTF type). */
struct oom_event {
	__u64 ts_ns; /* bpf_ktime_get_ns() */
	__s32 pid;   /* process (thread group) id */
	__s32 tid;   /* the marked thread */
	__u32 uid;   /* OOM_UID_UNKNOWN when not known */
	__s16 oom_score_adj;
	enum process_state process_state; /* oom_score_adj as Android buckets it */
	__u64 memcg_ino;                  /* inode of the victim's memory cgroup, 0 unknown */
	__u64 total_vm_pages;
	__u64 rss_pages; /* file + anon + shmem */
	char comm[16];
};
KTEL_EXPORT_TYPE(struct oom_event, oom_event);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024);
} oom_events_rb SEC(".maps");

/* Failed reservations (ring full), per CPU; the daemon sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} oom_events_lost SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 key = 0;
	__u64 *lost = bpf_map_lookup_elem(&oom_events_lost, &key);

	if (lost)
		__sync_fetch_and_add(lost, 1);
}

static __always_inline __u64 memcg_ino(struct task_struct *task)
{
	struct task_struct___oom *t = (void *)task;
	int id;

	if (!bpf_core_enum_value_exists(enum cgroup_subsys_id, memory_cgrp_id))
		return 0;
	id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	if (id < 0 || id >= 16)
		return 0;
	return BPF_CORE_READ(t, cgroups, subsys[id], cgroup, kn, id);
}

static __always_inline __u64 rss_pages(struct mm_struct *mm)
{
	__s64 file = 0, anon = 0, shmem = 0;

	if (!mm)
		return 0;
	if (bpf_core_field_exists(((struct mm_struct___atomic *)0)->rss_stat.count)) {
		struct mm_struct___atomic *m = (void *)mm;

		file = BPF_CORE_READ(m, rss_stat.count[OOM_MM_FILEPAGES].counter);
		anon = BPF_CORE_READ(m, rss_stat.count[OOM_MM_ANONPAGES].counter);
		shmem = BPF_CORE_READ(m, rss_stat.count[OOM_MM_SHMEMPAGES].counter);
	} else {
		struct mm_struct___pcpu *m = (void *)mm;

		file = BPF_CORE_READ(m, rss_stat[OOM_MM_FILEPAGES].count);
		anon = BPF_CORE_READ(m, rss_stat[OOM_MM_ANONPAGES].count);
		shmem = BPF_CORE_READ(m, rss_stat[OOM_MM_SHMEMPAGES].count);
	}
	/* Per-CPU deltas not yet folded in can leave a counter below zero. */
	return (__u64)((file > 0 ? file : 0) + (anon > 0 ? anon : 0) + (shmem > 0 ? shmem : 0));
}

/* task may be NULL (only tid known). */
static __always_inline void emit(struct task_struct *task, int tid, __u32 uid)
{
	struct oom_event *e = bpf_ringbuf_reserve(&oom_events_rb, sizeof(*e), 0);
	struct mm_struct *mm;

	if (!e) {
		count_lost();
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->tid = tid;
	e->pid = tid;
	e->uid = uid;
	e->process_state = PROCESS_STATE_UNSPECIFIED;
	if (task) {
		e->tid = BPF_CORE_READ(task, pid);
		e->pid = BPF_CORE_READ(task, tgid);
		e->oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
		e->process_state = get_process_state(e->oom_score_adj);
		e->memcg_ino = memcg_ino(task);
		mm = BPF_CORE_READ(task, mm);
		e->total_vm_pages = mm ? BPF_CORE_READ(mm, total_vm) : 0;
		e->rss_pages = rss_pages(mm);
		BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	}
	bpf_ringbuf_submit(e, 0);
}

/* mark_victim(struct task_struct *task, uid_t uid), 6.8 and later. */
SEC("tp_btf/mark_victim")
int oom_event_task(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];

	emit(task, 0, (__u32)ctx[1]);
	return 0;
}

/* static void mark_oom_victim(struct task_struct *tsk) */
SEC("fentry/mark_oom_victim")
int oom_event_fentry(__u64 *ctx)
{
	emit((struct task_struct *)ctx[0], 0, OOM_UID_UNKNOWN);
	return 0;
}

#ifndef KTEL_KPROBE_UNSUPPORTED_ARCH
SEC("kprobe/mark_oom_victim")
int oom_event_kprobe(struct pt_regs *ctx)
{
	emit((struct task_struct *)KTEL_KPROBE_ARG1(ctx), 0, OOM_UID_UNKNOWN);
	return 0;
}
#endif

/* mark_victim(int pid), 6.1 .. 6.7: only the thread id. */
SEC("tp_btf/mark_victim")
int oom_event_pid(__u64 *ctx)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	int tid = (int)ctx[0];

	emit(BPF_CORE_READ(cur, pid) == tid ? cur : 0, tid, OOM_UID_UNKNOWN);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
