/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Names of attribution ids (attr_fold.h resolves through these):
 *   - cgroup: a v2 cgroup id is its directory's inode number in the cgroup2
 *     mount (found in /proc/self/mountinfo: /sys/fs/cgroup on a pure v2
 *     system, /sys/fs/cgroup/unified on a hybrid one); named by its path
 *     below the mount, the root "/". Two sources fill the cache:
 *       - the kernel's own events (cgroup_events.h), when the daemon could
 *         load them (ktel_attr_names__use_events): a cgroup is named at its
 *         mkdir, marked removed at its rmdir and released at its release,
 *         however briefly it lived between two pulls;
 *       - a walk of the mount: the cgroups made before the events started,
 *         and the only source without them. A miss walks again at most
 *         once per pull (begin_pull), and an id the walk did not find stays
 *         unresolved until the next pull (the negative cache). Events the
 *         kernel lost (ktel_attr_names__events_lost) make the next pull
 *         walk, and a whole walk that no longer finds a cgroup marks it
 *         removed.
 *   - release: a cgroup's release event releases it; the daemon hands the
 *     release on once every metric attributed by cgroup has pulled since
 *     (ktel_attr_names__settle), so each names the cgroup's last events.
 *     Besides, the grace rule: a cgroup removed (or, without events, no
 *     longer found by walks) that had no events (no pull asked for its
 *     name) for the grace period is taken as released; an id no walk or
 *     event ever named (made and removed between two walks, without
 *     events) is kept without a name from its first lookup so that it is
 *     too. Released entries leave the cache for the released list, which
 *     the daemon takes after a pull (ktel_attr_names__released) to delete
 *     the id's kernel keys and, unless another id carries the same name,
 *     end its series. Without events, walks happen on a miss (at most once
 *     per pull) and, to see removals, at a pull at least grace / 4 after
 *     the last one.
 *   - user: a uid, named by getpwuid_r, else by its number.
 *   - app: Android's app id (uid % 100000) for apps, the class otherwise;
 *     app_class: the class alone, "app" for every app.
 *   - process: the tgid (high half of the id), as a number.
 * Names are hostile input (a cgroup's name is anyone's mkdir, whether it
 * comes from a walk or an event): they are bounded, cut to ASCII letters,
 * digits and ._+-/@:=, every other byte becoming '_', and the run-*.scope
 * and session-*.scope components that systemd makes per command and login
 * are collapsed into one name each. An event's path, relative to the
 * hierarchy's root, is made relative to the mount first (they differ when
 * the mount shows a subtree), so both sources give one cgroup one name.
 */
#ifndef KTEL_ATTR_NAMES_H
#define KTEL_ATTR_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup_events.h"
#include "error.h"

/* Longest name given, NUL excluded. */
#define KTEL_ATTR_NAME_MAX 200
/* A longer cgroup name ends in '~' and 16 hex digits (ktel_attr_cgroup_name). */
#define KTEL_ATTR_LONG_SUFFIX 17

struct ktel_attr_names_opts {
	const char *cgroup_root; /* NULL: the cgroup2 mount of mountinfo */
	const char *mountinfo;   /* NULL: /proc/self/mountinfo */
	uint64_t grace_ns;       /* 0: 10 minutes */
	size_t max_cgroups;      /* 0: 65536; the walk stops there */
};

struct ktel_attr_names_stats {
	uint64_t walks;          /* cgroup walks */
	uint64_t misses;         /* ids no walk found */
	size_t cgroups;          /* ids cached */
	uint64_t truncated;      /* walks stopped at max_cgroups */
	uint64_t released;       /* cgroups released */
	uint64_t released_event; /* of which by their release event */
	uint64_t events;         /* the kernel's cgroup events taken */
	uint64_t event_losses;   /* drains that found events lost */
	/* mkdir events whose path the kernel may have cut: named by a read
	 * of the cgroup's path by its id, else by the next walk */
	uint64_t event_paths_cut;
};

/* A released cgroup. */
struct ktel_attr_released {
	uint64_t id;
	char *name;   /* its name, or NULL */
	bool carried; /* another id in the cache has the same name */
};

struct ktel_attr_names;

/*
 * Fails (-ENOENT, err set) only when no cgroup2 mount is found; a daemon
 * attributing by user or app alone does not need one (cgroup_root "" skips
 * the lookup and resolves no cgroup).
 */
int ktel_attr_names__new(const struct ktel_attr_names_opts *opts, struct ktel_attr_names **ret,
			 struct ktel_err *err);
void ktel_attr_names__free(struct ktel_attr_names *n);

/* A pull starts at now_ns (a monotonic clock): a miss may walk again. */
void ktel_attr_names__begin_pull(struct ktel_attr_names *n, uint64_t now_ns);

/* The kernel's cgroup events keep the cache current (on), or no longer
 * do (their object failed): the walk is then the only source. */
void ktel_attr_names__use_events(struct ktel_attr_names *n, bool on);
bool ktel_attr_names__events(const struct ktel_attr_names *n);
/* One of the kernel's events, taken at now_ns (the clock of begin_pull). */
void ktel_attr_names__cgroup_event(struct ktel_attr_names *n, const struct ktel_cgroup_ev *ev,
				   uint64_t now_ns);
/*
 * A name miss with events on calls refill(ctx) first, which should take the
 * events waiting (ktel_attr_names__cgroup_event): a cgroup made after the
 * pull's drain whose events the pull read has its mkdir in the ring.
 */
void ktel_attr_names__set_refill(struct ktel_attr_names *n, void (*refill)(void *ctx), void *ctx);
/* The kernel lost events: the next pull walks. */
void ktel_attr_names__events_lost(struct ktel_attr_names *n);
/* Every metric attributed by cgroup has begun a pull at or after
 * settled_ns: the cgroups released by events until then are released. */
void ktel_attr_names__settle(struct ktel_attr_names *n, uint64_t settled_ns);

/* Names of id into buf (len bytes, at least KTEL_ATTR_NAME_MAX + 1):
 * buf, or NULL when it has none. */
const char *ktel_attr_names__cgroup(struct ktel_attr_names *n, uint64_t id, char *buf, size_t len);
/*
 * What ktel_attr_names__cgroup(n, id, ...) does for a named id besides
 * copying its name, and nothing else: id had events now (its used time,
 * which the grace rule reads). False, with nothing done, when id has no
 * name in the cache (call ktel_attr_names__cgroup, which may look further).
 * *hint is the caller's, 0 at first and kept between calls for the same
 * id: it makes the next call a direct access.
 */
bool ktel_attr_names__cgroup_used(struct ktel_attr_names *n, uint64_t id, uint64_t *hint);
/* Fetch ahead what ktel_attr_names__cgroup_used will touch for a *hint it
 * set (a caller about to make many such calls overlaps their waits for
 * memory); nothing for any other value. */
void ktel_attr_names__cgroup_prefetch(const struct ktel_attr_names *n, uint64_t hint);
/*
 * A number that moves on whenever the name ktel_attr_names__cgroup gives
 * any id may have changed (a walk, a cgroup event naming or releasing one,
 * a prune, a new id looked up): while it has not, an id named before has
 * the same name, and ktel_attr_names__cgroup_used is all a new lookup of
 * it would do besides the copy.
 */
uint64_t ktel_attr_names__generation(const struct ktel_attr_names *n);
const char *ktel_attr_names__user(struct ktel_attr_names *n, uint64_t uid, char *buf, size_t len);
const char *ktel_attr_app_name(uint64_t uid, char *buf, size_t len);
/* The class alone: "app" for an app, else as ktel_attr_app_name. */
const char *ktel_attr_app_class_name(uint64_t uid, char *buf, size_t len);
const char *ktel_attr_process_name(uint64_t id, char *buf, size_t len);

/* The cgroups released since the last clear (n entries at *ret, valid
 * until the next pull or clear). */
size_t ktel_attr_names__released(const struct ktel_attr_names *n,
				 const struct ktel_attr_released **ret);
void ktel_attr_names__clear_released(struct ktel_attr_names *n);

void ktel_attr_names__stats(const struct ktel_attr_names *n, struct ktel_attr_names_stats *ret);

/*
 * The ids one metric attributed by user, app or process has seen, each with
 * when it last had events, for their ageing (the daemon's): a user or app
 * is released after the grace period without events, a process once its
 * tgid with that start time no longer exists (ktel_attr_process_alive).
 */
struct ktel_attr_ids;

int ktel_attr_ids__new(struct ktel_attr_ids **ret);
void ktel_attr_ids__free(struct ktel_attr_ids *t);
/* id had events at now_ns. -ENOMEM leaves it untracked (never released). */
int ktel_attr_ids__used(struct ktel_attr_ids *t, uint64_t id, uint64_t now_ns);
size_t ktel_attr_ids__count(const struct ktel_attr_ids *t);
/* Drop every id for which gone(ctx, id, used_ns) is true; their ids are at
 * *ret (n of them, valid until the next sweep or free). */
size_t ktel_attr_ids__sweep(struct ktel_attr_ids *t,
			    bool (*gone)(void *ctx, uint64_t id, uint64_t used_ns), void *ctx,
			    const uint64_t **ret);
/* Calls fn(ctx, id) for every tracked id; stops when fn returns true
 * (and returns true). */
bool ktel_attr_ids__any(const struct ktel_attr_ids *t, bool (*fn)(void *ctx, uint64_t id),
			void *ctx);

/*
 * Does the process of a KTEL_ATTR_BY_PROCESS id (tgid << 32 | the low 32
 * bits of a thread's start time in seconds of the monotonic clock) still
 * exist: /proc/<tgid> is there and its leader started no later than that
 * thread (the leader's start in /proc is of the boot-time clock: the time
 * suspended so far is allowed for). proc: the proc mount (NULL: /proc).
 */
bool ktel_attr_process_alive(const char *proc, uint64_t id);

/*
 * A cgroup path below the mount as its name, into buf (len > 0): the
 * collapsing and character rules above. A name longer than
 * KTEL_ATTR_NAME_MAX is its first bytes, '~' and the 16 hex digits of a
 * 64-bit FNV-1a hash of the whole name, KTEL_ATTR_NAME_MAX bytes in all: no
 * other name has a '~', so a long name never looks like a shorter cgroup's,
 * and one path always gives the same name. A smaller buffer takes the same
 * form at its own size, or (below KTEL_ATTR_LONG_SUFFIX + 2 bytes) just
 * the start. Returns the length written.
 */
size_t ktel_attr_cgroup_name(const char *path, char *buf, size_t len);

/* The cgroup2 mount point of a mountinfo file, into buf. 0 or -ENOENT. */
int ktel_attr_cgroup2_mount(const char *mountinfo, char *buf, size_t len);

/*
 * Is the io controller on the cgroup v2 hierarchy and enabled for the
 * cgroups below its mount: is "io" in the cgroup.subtree_control of the
 * cgroup2 mount of mountinfo (NULL: /proc/self/mountinfo)? Only then is the
 * cgroup the kernel records in a bio (bi_blkg) a v2 cgroup below the root,
 * the id attribution by cgroup names. On a hybrid host the io controller is
 * bound to a v1 hierarchy and its cgroups' ids mean nothing there; on a v2
 * host that does not enable io below the root every bio names the root, and
 * the submitter's own cgroup says more. Returns 0 and *ret_on (false without
 * a cgroup2 mount), or -errno with err naming the file.
 */
int ktel_attr_io_on_v2(const char *mountinfo, bool *ret_on, struct ktel_err *err);

/*
 * Is the io controller on the cgroup v2 hierarchy at all: is "io" in the
 * cgroup.controllers of the cgroup2 mount of mountinfo (NULL:
 * /proc/self/mountinfo)? Then the cgroup the kernel records in a bio is a
 * v2 cgroup (the root, where io is enabled for none below it); otherwise
 * (a hybrid host, io bound to a v1 hierarchy) its id names a v1 cgroup.
 * Returns 0 and *ret_on (false without a cgroup2 mount), or -errno with err
 * naming the file.
 */
int ktel_attr_io_v2_available(const char *mountinfo, bool *ret_on, struct ktel_err *err);

/* Where the cgroup the kernel charges block I/O to is coarser than asked. */
struct ktel_attr_io_gaps {
	size_t n;         /* cgroups with a child but no io in their subtree_control */
	char first[4096]; /* the first found, its path below the mount ("/": the root) */
	bool truncated;   /* the walk stopped at its bound: there may be more */
};

/*
 * The cgroups of the cgroup2 mount of mountinfo (NULL: /proc/self/mountinfo)
 * at levels 0 (the root) to depth - 1 (every level, to the walk's bound,
 * for depth 0: the task's own cgroup) that have a child cgroup but no "io"
 * in their cgroup.subtree_control. Their children have no io controller of
 * their own: I/O in them is charged to the gap or above, so by cgroup at
 * this depth the charged cgroup is coarser than the one asked for. Read
 * now; the host may change it later. 0 and *ret, or -ENOENT (no cgroup2
 * mount) / -ENOMEM with err.
 */
int ktel_attr_io_gaps(const char *mountinfo, uint32_t depth, struct ktel_attr_io_gaps *ret,
		      struct ktel_err *err);

#endif /* KTEL_ATTR_NAMES_H */
