/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Dropping capabilities once the daemon has started (docs/privileges.md).
 *
 * ktelemetryd starts as root: it may mount bpffs, create the pin root, load
 * and attach programs, open sinks and the control socket. After that it only
 * needs what run-time work needs: attaching and detaching loaded programs
 * (enable/disable), loading plugins dropped in or enabled by a reload, and
 * giving new pins their group. The process stays uid 0 (every file it owns
 * - pins, state, plugins - is root's, and the plugin loader insists on root
 * ownership); only the capability sets shrink.
 *
 * Capabilities are per thread on Linux and the daemon has other threads by
 * then (ktel-state, ktel-files, libmicrohttpd's for a Prometheus sink), so the drop
 * is applied to every thread of the process and then verified from
 * /proc/self/task: either every thread holds at most the kept set, or the
 * call fails.
 */
#ifndef KTEL_PRIVILEGES_H
#define KTEL_PRIVILEGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define KTEL_CAP_BIT(cap) (1ULL << (cap))

/* Threads handled by one drop; more is refused rather than half-dropped. */
#define KTEL_PRIVILEGES_MAX_THREADS 256

struct ktel_privileges_opts {
	bool drop;     /* the config's drop_privileges; false: do nothing */
	gid_t pin_gid; /* group of new pins (CAP_CHOWN is kept whatever it is) */
	/* Keep exactly `keep` instead of the computed set (tests, odd setups);
	 * without exact, `keep` is added to the computed set. */
	bool exact;
	uint64_t keep;
};

/*
 * The capabilities kept on a kernel whose highest capability number is
 * cap_last_cap (/proc/sys/kernel/cap_last_cap): CAP_BPF and CAP_PERFMON
 * (CAP_SYS_ADMIN on kernels older than 5.8, which lack both), CAP_CHOWN (new
 * pins, and sockets a reload opens, may get a group other than root) and
 * CAP_NET_BIND_SERVICE (a reload may open a port below 1024), plus o->keep
 * (or exactly o->keep). The drop keeps of it what the process holds.
 */
uint64_t ktel_privileges_keep_set(const struct ktel_privileges_opts *o, int cap_last_cap);

/*
 * Drop every thread of the process to the kept set (intersected with what
 * the process holds): effective = permitted = kept, inheritable and ambient
 * cleared, and, when CAP_SETPCAP is held, the bounding set reduced too. On
 * kernels that charge BPF memory to RLIMIT_MEMLOCK (< 5.11) the limit is
 * raised to infinity first, while CAP_SYS_RESOURCE is still held. No-op when
 * !o->drop. Returns 0, or -errno with err naming the thread or the step;
 * after a failure the process may be partly dropped and should exit. On
 * success it logs what every thread kept.
 */
int ktel_privileges_drop(const struct ktel_privileges_opts *o, struct ktel_err *err);

/* The calling thread's effective and permitted sets. Returns 0 or -errno. */
int ktel_privileges_current(uint64_t *ret_effective, uint64_t *ret_permitted);

/* Highest capability this kernel knows (cap_last_cap), or CAP_LAST_CAP of the
 * headers when /proc does not say. */
int ktel_privileges_cap_last_cap(void);

/* Does a kernel of this release (uname -r) charge BPF maps and programs to
 * RLIMIT_MEMLOCK rather than the memory cgroup? Unparsable: true. */
bool ktel_privileges_memlock_charged(const char *release);

/* "CAP_CHOWN,CAP_BPF" (ascending), or "none"; truncated to fit len. */
void ktel_privileges_format(uint64_t set, char *buf, size_t len);

#endif /* KTEL_PRIVILEGES_H */
