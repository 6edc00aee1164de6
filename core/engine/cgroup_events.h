/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The kernel's own cgroup events, for naming attribution ids: the daemon's
 * BPF object cgroup_events.bpf.c (embedded in the daemon, not a plugin) on
 * the tp_btf tracepoints cgroup_mkdir, cgroup_rmdir and cgroup_release,
 * keeping the cgroups of the default (v2) hierarchy, into a ring buffer.
 * The daemon drains it (ktel_cgroup_events__drain) before each pull names
 * ids and whenever its fd is readable, and hands each event to attr_names
 * (ktel_attr_names__event).
 *
 * Events the ring had no room for are counted by the program (lost): a
 * loss means a name, a removal or a release may be missing, and the names
 * fall back to a walk of cgroupfs.
 *
 * Opening fails where the kernel cannot run it (no BTF, no tp_btf, a
 * kernel before the tracepoints' BTF): the walk is then the names' only
 * source.
 */
#ifndef KTEL_CGROUP_EVENTS_H
#define KTEL_CGROUP_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum ktel_cgroup_event_kind {
	KTEL_CGROUP_MKDIR = 1,
	KTEL_CGROUP_RMDIR = 2,
	KTEL_CGROUP_RELEASE = 3,
};

/*
 * One event as handed on: path (mkdir only, else NULL) is the kernel's
 * path of the cgroup relative to the hierarchy's root ("/a/b"),
 * NUL-terminated and at most KTEL_CGROUP_PATH_MAX bytes, otherwise
 * unchecked (anyone may mkdir any name). path_cut: the path filled the
 * kernel's buffer and may be only the start of the cgroup's path (the
 * record said so, or the path is KTEL_CGROUP_PATH_MAX bytes long): it is
 * no name.
 */
struct ktel_cgroup_ev {
	enum ktel_cgroup_event_kind kind;
	uint64_t id;
	int level;
	const char *path;
	bool path_cut;
};

#define KTEL_CGROUP_PATH_MAX 1023

typedef void (*ktel_cgroup_ev_fn)(void *ctx, const struct ktel_cgroup_ev *ev);

struct ktel_cgroup_events_stats {
	uint64_t events;    /* handed on */
	uint64_t lost;      /* no room in the ring (the kernel's count) */
	uint64_t malformed; /* records too short for their kind, dropped */
};

struct ktel_cgroup_events;

/* Load and attach the object; events go to fn(ctx, ...) at each drain. */
int ktel_cgroup_events__open(ktel_cgroup_ev_fn fn, void *ctx, struct ktel_cgroup_events **ret,
			     struct ktel_err *err);
void ktel_cgroup_events__free(struct ktel_cgroup_events *ev);

/* An fd that is readable when events wait (for the loop's poll). */
int ktel_cgroup_events__fd(const struct ktel_cgroup_events *ev);

/*
 * Hand on every waiting event, without blocking. Returns how many, or
 * -errno. *ret_lost (may be NULL) is set to the events lost since the
 * previous drain.
 */
int ktel_cgroup_events__drain(struct ktel_cgroup_events *ev, uint64_t *ret_lost);

void ktel_cgroup_events__stats(const struct ktel_cgroup_events *ev,
			       struct ktel_cgroup_events_stats *ret);

#endif /* KTEL_CGROUP_EVENTS_H */
