// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The daemon's own BPF object (not a plugin): the kernel's cgroup mkdir,
 * rmdir and release events of the default (v2) hierarchy, into a ring
 * buffer that cgroup_events.c drains, so attribution learns a cgroup's
 * name when it is made, however briefly it lives (cgroup_events.h).
 *
 * The three tracepoints fire for every hierarchy; on a hybrid system the
 * v1 hierarchies' cgroups have ids of their own that no attribution id is
 * ever drawn from (the BPF helpers read the default hierarchy's cgroup), so
 * only cgroups whose root is the default root (hierarchy id 0, the "0::"
 * line of /proc/<pid>/cgroup) are sent.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "cgroup_events_abi.h"

struct kernfs_node___ktel_ev {
	__u64 id;
} __ktel_core;

struct cgroup_root___ktel_ev {
	int hierarchy_id;
} __ktel_core;

struct cgroup___ktel_ev {
	struct kernfs_node___ktel_ev *kn;
	int level;
	struct cgroup_root___ktel_ev *root;
} __ktel_core;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, KTEL_CGROUP_EVENTS_RING);
} cgroup_events SEC(".maps");

/* Events that did not fit in the ring (read by the daemon: a loss makes it
 * walk cgroupfs again, so no name is lost for good). */
__u64 cgroup_events_lost = 0;

static __always_inline int send(__u64 *ctx, __u32 kind, bool with_path)
{
	struct cgroup___ktel_ev *cg = (void *)ctx[0];
	struct ktel_cgroup_event *ev;

	if (BPF_CORE_READ(cg, root, hierarchy_id) != 0)
		return 0;
	if (with_path)
		ev = bpf_ringbuf_reserve(&cgroup_events, sizeof(*ev) + KTEL_CGROUP_EVENT_PATH_MAX,
					 0);
	else
		ev = bpf_ringbuf_reserve(&cgroup_events, sizeof(*ev), 0);
	if (!ev) {
		__sync_fetch_and_add(&cgroup_events_lost, 1);
		return 0;
	}
	ev->id = BPF_CORE_READ(cg, kn, id);
	ev->kind = kind;
	ev->level = BPF_CORE_READ(cg, level);
	ev->flags = 0;
	ev->pad = 0;
	if (with_path) {
		/* The tracepoint's path (the kernel's cgroup_path, relative to
		 * the hierarchy's root); an empty string when unreadable. The
		 * kernel's buffer is as large as this one: a path that fills
		 * it (its NUL in the last byte) may have been cut there, and
		 * a cut path is a prefix, which may be another cgroup's. */
		long len = bpf_probe_read_kernel_str(ev->path, KTEL_CGROUP_EVENT_PATH_MAX,
						     (const void *)ctx[1]);

		if (len < 0)
			ev->path[0] = '\0';
		else if (len >= KTEL_CGROUP_EVENT_PATH_MAX)
			ev->flags |= KTEL_CGROUP_EVENT_PATH_CUT;
	}
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* cgroup_mkdir(struct cgroup *cgrp, const char *path) */
SEC("tp_btf/cgroup_mkdir")
int cgroup_mkdir(__u64 *ctx)
{
	return send(ctx, KTEL_CGROUP_EVENT_MKDIR, true);
}

/* cgroup_rmdir(struct cgroup *cgrp, const char *path) */
SEC("tp_btf/cgroup_rmdir")
int cgroup_rmdir(__u64 *ctx)
{
	return send(ctx, KTEL_CGROUP_EVENT_RMDIR, false);
}

/* cgroup_release(struct cgroup *cgrp, const char *path): the cgroup is
 * freed; no task, and no other css, refers to it any more. */
SEC("tp_btf/cgroup_release")
int cgroup_release(__u64 *ctx)
{
	return send(ctx, KTEL_CGROUP_EVENT_RELEASE, false);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
