/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Fault injection for crash tests (docs/sinks.md, "Testing the guarantees").
 * Compiled in only when the build sets the CMake option KTEL_FAULT_INJECTION
 * (the test trees of tools/test; never the release build). Honoured only
 * from the environment variable KTEL_TEST_FAULT, read once; without it
 * every point is a no-op costing one branch. Its value is
 *
 *	<point>:<n>:kill          raise(SIGKILL) the n-th time point is reached
 *	<point>:<n>:delay=<ms>    sleep ms (blocking its thread) the n-th time
 *
 * with n in 1..KTEL_FAULT_MAX_HITS and ms in 1..KTEL_FAULT_MAX_DELAY_MS,
 * both plain decimal (no sign, no junk after them). Points (named where
 * they are reached):
 *	routed   a pull's records were handed to the sinks (daemon)
 *	written  a JSON sink's write completed, before its fsync
 *	synced   a JSON sink's fsync completed, before it reports them durable
 *	saved    the delta state was written (daemon)
 * In a build without the option the variable is ignored; the daemon logs
 * that once. In a build with it, a malformed value is refused (the daemon
 * does not start, --check-config fails) and an armed fault is logged at
 * start and shown by `status` and --check-config.
 */
#ifndef KTEL_FAULT_H
#define KTEL_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KTEL_FAULT_ENV "KTEL_TEST_FAULT"
#define KTEL_FAULT_MAX_HITS 1000000
#define KTEL_FAULT_MAX_DELAY_MS 60000

struct ktel_fault_spec {
	char point[16];
	uint64_t n;        /* the hit that fires, 1..KTEL_FAULT_MAX_HITS */
	bool kill;         /* else delay */
	uint64_t delay_ms; /* 1..KTEL_FAULT_MAX_DELAY_MS */
};

/*
 * Parse one KTEL_TEST_FAULT value strictly. 0 with *ret_spec filled, or
 * -EINVAL with err naming the part that is wrong and the expected form.
 * Compiled in every build (the value is checked the same way everywhere).
 */
int ktel_fault_parse(const char *text, struct ktel_fault_spec *ret_spec, struct ktel_err *err);

/* Is fault injection compiled into this build (KTEL_FAULT_INJECTION)? */
bool ktel_fault_compiled(void);

enum ktel_fault_state {
	KTEL_FAULT_NONE,      /* KTEL_TEST_FAULT is not set */
	KTEL_FAULT_ARMED,     /* set, valid, compiled in: it will fire */
	KTEL_FAULT_IGNORED,   /* set, but this build has no fault injection */
	KTEL_FAULT_MALFORMED, /* set and refused; nothing is armed */
};

/*
 * Read KTEL_TEST_FAULT (once; later calls give the first answer) and arm
 * the fault it names when this build has fault injection. Returns the
 * state; err (may be NULL) says why a value is malformed. Never logs: the
 * daemon reports the state (and refuses to start on a malformed value).
 */
enum ktel_fault_state ktel_fault__init(struct ktel_err *err);

/*
 * The state, and in buf (when not NULL) one line describing it: the armed
 * fault with its hits so far ("saved:1:kill, hit 0 of 1"), the ignored or
 * refused value. "" for KTEL_FAULT_NONE.
 */
enum ktel_fault_state ktel_fault__describe(char *buf, size_t size);

/* Reached point name: kill or delay when the armed fault says so. */
void ktel_fault__point(const char *name);

#endif /* KTEL_FAULT_H */
