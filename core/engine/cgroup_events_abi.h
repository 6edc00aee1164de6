/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The record cgroup_events.bpf.c writes into its ring buffer and
 * cgroup_events.c reads: shared by the BPF program and the daemon, so it
 * uses the kernel's fixed-width types (the daemon side defines them from
 * <linux/types.h>).
 */
#ifndef KTEL_CGROUP_EVENTS_ABI_H
#define KTEL_CGROUP_EVENTS_ABI_H

/* The ring's size (a power of two, a multiple of the page size): about
 * a thousand mkdir events between two drains. */
#define KTEL_CGROUP_EVENTS_RING (1U << 20)
/* The kernel's own buffer of a tracepoint's cgroup path
 * (TRACE_CGROUP_PATH_LEN): a longer path arrives cut there, as a prefix
 * that may be another cgroup's path. */
#define KTEL_CGROUP_EVENT_PATH_MAX 1024

/* The path filled the kernel's buffer: it may have been cut (a path of
 * exactly KTEL_CGROUP_EVENT_PATH_MAX - 1 bytes is flagged too, as the two
 * cannot be told apart), so it names nothing. */
#define KTEL_CGROUP_EVENT_PATH_CUT (1U << 0)

enum {
	KTEL_CGROUP_EVENT_MKDIR = 1,
	KTEL_CGROUP_EVENT_RMDIR = 2,
	KTEL_CGROUP_EVENT_RELEASE = 3,
};

/* One event: mkdir carries the path (KTEL_CGROUP_EVENT_PATH_MAX bytes,
 * NUL-terminated by the kernel), rmdir and release only the header. */
struct ktel_cgroup_event {
	__u64 id;   /* the cgroup's kernfs id: its attribution id */
	__u32 kind; /* KTEL_CGROUP_EVENT_* */
	__s32 level;
	__u32 flags; /* KTEL_CGROUP_EVENT_PATH_CUT */
	__u32 pad;
	char path[];
};

#endif /* KTEL_CGROUP_EVENTS_ABI_H */
