/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * worker - threads of the daemon's own for blocking file work (the JSON
 * sinks' writes, fsyncs, cuts and renames; the delta state's save), whose
 * completions do not wake the loop (docs/architecture.md
 * "Threads and wakeups").
 *
 * libuv's pool ends every job with an eventfd write that wakes the loop: an
 * idle 10 s round was three loop wakeups (the timers, the JSON write's
 * completion, the save's completion) where one would do. Here a finished job
 * waits on a list until the loop wakes anyway - its next timer, a socket, a
 * ring buffer - and its done callback runs then, after the poll and before
 * that turn's timers. So the work is done at once; only the bookkeeping that
 * follows it (an ack, a buffer given back, the next write) waits.
 *
 * A completion wakes the loop at once when
 *  - the job is urgent: someone waits for it (a backlog behind a write, a
 *    close, the shutdown) - ktel_worker__queue(..., urgent) or hurry();
 *  - its work says so: it failed, and its owner retries on a timer;
 *  - the loop would otherwise sleep with no timer at all, so nothing else
 *    would ever collect it.
 *
 * One worker per loop and lane, shared by reference (get/put); its thread
 * starts with the first reference and stops with the last once nothing is
 * in flight, so a config that writes no file has no such thread. Jobs of a
 * lane run one at a time, in the order they were queued. Two lanes: the
 * state file's save, and the sinks' files; so a save that hangs on a slow
 * disk (seconds per fsync) never holds the telemetry's lines back, as one
 * thread for both would. Loop-thread API, except where noted.
 */
#ifndef KTEL_WORKER_H
#define KTEL_WORKER_H

#include <stdbool.h>

#include <uv.h>

struct ktel_worker;
struct ktel_job;

/* On the worker thread. True when the loop must see the outcome at once
 * (a failure the owner retries after a short backoff). */
typedef bool (*ktel_work_fn)(struct ktel_job *job);
/* On the loop, after work. */
typedef void (*ktel_job_fn)(struct ktel_job *job);

/* Embedded in its owner, which outlives it until done has run. */
struct ktel_job {
	struct ktel_job *next;
	ktel_work_fn work;
	ktel_job_fn done;
	void *data;  /* the owner's */
	bool urgent; /* guarded by the worker's lock while queued */
};

/* Lanes: one thread each. */
enum ktel_lane {
	KTEL_LANE_STATE, /* the delta state's save */
	KTEL_LANE_FILES, /* the sinks' files */
	KTEL_LANES,
};

/* The worker of loop's lane, made (thread started) on the first reference.
 * NULL with errno set when the thread cannot be started. */
struct ktel_worker *ktel_worker__get(uv_loop_t *loop, enum ktel_lane lane);

/* Drop a reference. The last one stops the thread and closes its handles
 * once no job is in flight (the loop must run to finish the close). */
void ktel_worker__put(struct ktel_worker *w);

/* Run work(job) on the thread, then done(job) on the loop: when the loop
 * wakes next, or at once when urgent. */
void ktel_worker__queue(struct ktel_worker *w, struct ktel_job *job, ktel_work_fn work,
			ktel_job_fn done, bool urgent);

/* Someone now waits for job (queued, running or finished): its done runs
 * as soon as it can. No-op for a job whose done has run. */
void ktel_worker__hurry(struct ktel_worker *w, struct ktel_job *job);

/* Jobs queued and not yet done (for tests and stats). */
unsigned ktel_worker__in_flight(const struct ktel_worker *w);

#endif
