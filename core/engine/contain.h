/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Containment: run a parse of outside bytes by a library we do not own
 * (libbpf 1.1 trusts much of the ELF it reads) in a forked child, so that a
 * crash or a hang there refuses the input instead of ending the daemon. The
 * child's answer, a result and a struct ktel_err, comes back through a pipe.
 * What the child allocated or learnt stays in the child: the caller repeats
 * the parse in process once the child has shown that it finishes.
 */
#ifndef KTEL_CONTAIN_H
#define KTEL_CONTAIN_H

#include "error.h"

/* How long a parse of a plugin may take before its child is killed. */
#define KTEL_CONTAIN_TIMEOUT_MS 10000

typedef int (*ktel_contain_fn)(void *ctx, struct ktel_err *err);

/*
 * Run fn(ctx, err) in a child process. Returns what fn returned (0 or
 * -errno) with its err; or -ECHILD when the child ended without answering
 * (a signal, an exit, timeout_ms passed and it was killed), with err saying
 * "<what> crashed (signal 11, Segmentation fault)" or the like; or -errno
 * when the child cannot be started. what names the job in messages.
 */
int ktel_contain__run(const char *what, ktel_contain_fn fn, void *ctx, int timeout_ms,
		      struct ktel_err *err);

/*
 * Kill every child ktel_contain__run() is waiting for now, on any thread:
 * each of those calls returns -ECHILD ("crashed (signal 9, Killed)") at
 * once. For a caller that stops and no longer wants the answers.
 */
void ktel_contain__kill_all(void);

#endif /* KTEL_CONTAIN_H */
