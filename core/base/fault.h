/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Fault injection for crash tests (docs/sinks.md, "Testing the guarantees").
 * Honoured only from the environment variable KTEL_TEST_FAULT, read once;
 * without it every point is a no-op costing one branch. Its value is
 *
 *	<point>:<n>:kill          raise(SIGKILL) the n-th time point is reached
 *	<point>:<n>:delay=<ms>    sleep ms (blocking the loop) the n-th time
 *
 * Points (named where they are reached):
 *	routed   a pull's records were handed to the sinks (daemon)
 *	written  a JSON sink's write completed, before its fsync
 *	synced   a JSON sink's fsync completed, before it reports them durable
 *	saved    the delta state was written (daemon)
 * The daemon logs a warning at start when the variable is set, so a
 * production log shows it at once; an unknown point or action is refused
 * (logged, ignored).
 */
#ifndef KTEL_FAULT_H
#define KTEL_FAULT_H

#include <stdbool.h>

#define KTEL_FAULT_ENV "KTEL_TEST_FAULT"

/* Parse KTEL_TEST_FAULT (once) and log loudly when it is set. True when a
 * valid fault is armed. */
bool ktel_fault__init(void);

/* Reached point name: kill or delay when the armed fault says so. */
void ktel_fault__point(const char *name);

#endif /* KTEL_FAULT_H */
