// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The kernel's cgroup events (cgroup_events.h): the embedded BPF object,
 * loaded and attached, and its ring buffer, drained into a callback.
 */
#include "cgroup_events.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf_globals.h"
#include "bpf_lifecycle.h"
#include "cgroup_events_abi.h"
/* ktel_cgroup_events_object: cgroup_events.bpf.c, compiled (generated). */
#include "cgroup_events.bpf.h"

_Static_assert(KTEL_CGROUP_EVENT_PATH_MAX == KTEL_CGROUP_PATH_MAX + 1,
	       "a path and its NUL fill the event's buffer");
_Static_assert((int)KTEL_CGROUP_EVENT_MKDIR == (int)KTEL_CGROUP_MKDIR &&
		       (int)KTEL_CGROUP_EVENT_RMDIR == (int)KTEL_CGROUP_RMDIR &&
		       (int)KTEL_CGROUP_EVENT_RELEASE == (int)KTEL_CGROUP_RELEASE,
	       "one numbering of the kinds");

struct ktel_cgroup_events {
	struct bpf_object *obj;
	struct bpf_link *links[3];
	struct ring_buffer *rb;
	ktel_cgroup_ev_fn fn;
	void *ctx;
	uint64_t lost_seen; /* the kernel's lost count at the last drain */
	struct ktel_cgroup_events_stats st;
};

/* One ring record. Everything in it is checked: its size against its kind,
 * the path's termination within the record. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct ktel_cgroup_events *ev = ctx;
	const struct ktel_cgroup_event *rec = data;
	struct ktel_cgroup_ev out;

	if (size < sizeof(*rec) || rec->kind < KTEL_CGROUP_MKDIR ||
	    rec->kind > KTEL_CGROUP_RELEASE) {
		ev->st.malformed++;
		return 0;
	}
	out = (struct ktel_cgroup_ev){.kind = (enum ktel_cgroup_event_kind)rec->kind,
				      .id = rec->id,
				      .level = rec->level};
	if (rec->kind == KTEL_CGROUP_MKDIR) {
		size_t room = size - sizeof(*rec);

		if (room < KTEL_CGROUP_EVENT_PATH_MAX ||
		    !memchr(rec->path, '\0', KTEL_CGROUP_EVENT_PATH_MAX)) {
			ev->st.malformed++;
			return 0;
		}
		out.path = rec->path;
		/* The program's flag, and the length as well: either way the
		 * path is no name. */
		out.path_cut = (rec->flags & KTEL_CGROUP_EVENT_PATH_CUT) ||
			       strnlen(rec->path, KTEL_CGROUP_EVENT_PATH_MAX) ==
				       KTEL_CGROUP_PATH_MAX;
	}
	ev->st.events++;
	ev->fn(ev->ctx, &out);
	return 0;
}

static const char *const progs[] = {"cgroup_mkdir", "cgroup_rmdir", "cgroup_release"};

int ktel_cgroup_events__open(ktel_cgroup_ev_fn fn, void *ctx, struct ktel_cgroup_events **ret,
			     struct ktel_err *err)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "ktel_cgroup_events");
	struct ktel_cgroup_events *ev = calloc(1, sizeof(*ev));
	const char *step = "open";
	char msg[128];
	int rc;

	if (!ev)
		return ktel_err_set(err, ENOMEM, "cgroup events: out of memory");
	ev->fn = fn;
	ev->ctx = ctx;
	ktel_libbpf_log__reset();
	ev->obj = bpf_object__open_mem(ktel_cgroup_events_object, sizeof(ktel_cgroup_events_object),
				       &opts);
	if (!ev->obj) {
		rc = -(errno ? errno : EINVAL);
		ev->obj = NULL;
		goto fail;
	}
	step = "load";
	rc = bpf_object__load(ev->obj);
	if (rc)
		goto fail;
	step = "attach";
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		struct bpf_program *prog = bpf_object__find_program_by_name(ev->obj, progs[i]);

		ev->links[i] = prog ? bpf_program__attach(prog) : NULL;
		if (!ev->links[i]) {
			rc = -(errno ? errno : ENOENT);
			goto fail;
		}
	}
	step = "ring buffer";
	ev->rb = ring_buffer__new(bpf_map__fd(
					  bpf_object__find_map_by_name(ev->obj, "cgroup_events")),
				  on_record, ev, NULL);
	if (!ev->rb) {
		rc = -(errno ? errno : ENOMEM);
		goto fail;
	}
	*ret = ev;
	return 0;
fail:
	ktel_libbpf_strerror(rc, msg, sizeof(msg));
	ktel_err_set(err, -rc > 0 ? -rc : EINVAL, "cgroup events: %s: %s%s%s", step, msg,
		     ktel_libbpf_log__last()[0] ? ": " : "", ktel_libbpf_log__last());
	ktel_cgroup_events__free(ev);
	return rc < 0 ? rc : -EINVAL;
}

void ktel_cgroup_events__free(struct ktel_cgroup_events *ev)
{
	if (!ev)
		return;
	ring_buffer__free(ev->rb);
	for (size_t i = 0; i < sizeof(ev->links) / sizeof(ev->links[0]); i++)
		bpf_link__destroy(ev->links[i]);
	bpf_object__close(ev->obj);
	free(ev);
}

int ktel_cgroup_events__fd(const struct ktel_cgroup_events *ev)
{
	return ring_buffer__epoll_fd(ev->rb);
}

int ktel_cgroup_events__drain(struct ktel_cgroup_events *ev, uint64_t *ret_lost)
{
	uint64_t lost = 0, delta = 0;
	int n = ring_buffer__consume(ev->rb);

	if (n < 0)
		return n;
	/* Read after the ring: a loss counted now is of an event the next
	 * drain cannot see either, so the walk it asks for comes after it. */
	if (ktel_bpf_global_u64(ev->obj, "cgroup_events_lost", &lost) == 0 &&
	    lost > ev->lost_seen) {
		delta = lost - ev->lost_seen;
		ev->lost_seen = lost;
		ev->st.lost = lost;
	}
	if (ret_lost)
		*ret_lost = delta;
	return n;
}

void ktel_cgroup_events__stats(const struct ktel_cgroup_events *ev,
			       struct ktel_cgroup_events_stats *ret)
{
	*ret = ev->st;
}
