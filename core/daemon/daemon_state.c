// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The delta state's save, ordered after the durable sinks (docs/sinks.md,
 * "Delivery guarantees"). A pull that changed the state takes a snapshot of
 * it (memory only) and a router mark; the snapshot is written once every
 * durable sink has made everything up to that mark durable. So the saved
 * state never covers a window a durable sink could still lose, and a
 * window written but not covered by the saved state is cut out of the
 * file at the next start (daemon.c, recover_sinks) and reported again.
 * Without a durable sink the level follows the mark at once: the state is
 * saved right after the pull, as the other sinks have always had it.
 * The pulls of one loop turn ask for one save (daemon_saver__save_later);
 * the file is written on the writer thread (worker.h), so the loop never
 * waits on the disk's fsyncs (53-63 ms for a 100k-key state,
 * docs/benchmarks.md). The write's completion does not wake the loop: it
 * is collected when the loop wakes next (its next pull), unless the daemon
 * is shutting down. With a durable sink whose ack came the same way, the
 * saved state so follows the written lines by up to one round: a crash in
 * between cuts that round out of the file and reports it again, as above.
 *
 * All of it is the saver's (struct daemon_saver); it reads the daemon's
 * delta, router and shutting_down, and is told when the sinks are closed.
 */
#include "daemon_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "log.h"

static void save_durable(struct daemon_saver *s, uint64_t level);

static void drop_worker(struct daemon_saver *s)
{
	ktel_worker__put(s->worker);
	s->worker = NULL;
}

/* On the writer thread: only the snapshot and the path are touched. A
 * failure waits for the next pull, which writes again. */
static bool save_work(struct ktel_job *job)
{
	struct daemon_saver *s = job->data;

	s->rc = ktel_delta_snapshot__write(&s->snap, s->path, &s->err);
	if (!s->rc)
		ktel_fault__point("saved");
	return false;
}

static void save_done(struct ktel_job *job)
{
	struct daemon_saver *s = job->data;

	s->in_flight = false;
	ktel_delta_snapshot__clear(&s->snap);
	if (s->rc) {
		s->retry = true;
		ktel_complain(&s->complaint, KTEL_LOG_ERROR, "state: %s", s->err.msg);
	} else {
		s->retry = false;
		ktel_complain_clear(&s->complaint, "state: %s written again", s->path);
	}
	/* Waits that became durable while this one was written. */
	save_durable(s, ktel_router__durable_level(s->d->router));
	if (s->released && !s->in_flight)
		drop_worker(s);
}

/* Hand the snapshot (owned from here on) to the writer thread; at
 * shutdown its completion is waited for, so it wakes the loop. */
static void write_snapshot(struct daemon_saver *s, struct ktel_delta_snapshot *snap)
{
	s->snap = *snap;
	*snap = (struct ktel_delta_snapshot){0};
	s->job.data = s;
	s->in_flight = true;
	ktel_worker__queue(s->worker, &s->job, save_work, save_done,
			   s->d->shutting_down || s->released);
}

/* Drop the first k waits. */
static void waits_drop(struct daemon_saver *s, size_t k)
{
	for (size_t i = 0; i < k; i++)
		ktel_delta_snapshot__clear(&s->wait[i].snap);
	memmove(s->wait, s->wait + k, (s->n_wait - k) * sizeof(s->wait[0]));
	s->n_wait -= k;
}

/* Write the newest snapshot that level covers; drop it and older ones.
 * While a write is in flight the waits stay: its completion comes back. */
static void save_durable(struct daemon_saver *s, uint64_t level)
{
	struct ktel_delta_snapshot snap;
	size_t k = s->n_wait;

	if (s->in_flight)
		return;
	while (k > 0 && s->wait[k - 1].mark > level)
		k--;
	if (!k)
		return;
	/* The worker is released only once the sinks are closed and no save
	 * is in flight: no ack or completion comes after that. */
	if (!s->worker)
		return;
	snap = s->wait[k - 1].snap;
	s->wait[k - 1].snap = (struct ktel_delta_snapshot){0};
	waits_drop(s, k);
	write_snapshot(s, &snap);
}

void daemon_saver__on_durable(void *ctx, uint64_t level)
{
	save_durable(ctx, level);
}

/* A full wait list: the newest replaces the one in between, the oldest
 * stays, so a durable sink that always lags a pull still gets saves. */
static void waits_push(struct daemon_saver *s, struct ktel_delta_snapshot *snap, uint64_t mark)
{
	size_t slot = s->n_wait;

	if (slot == KTEL_ARRAY_SIZE(s->wait)) {
		slot--;
		ktel_delta_snapshot__clear(&s->wait[slot].snap);
	} else {
		s->n_wait++;
	}
	s->wait[slot].snap = *snap;
	s->wait[slot].mark = mark;
}

void daemon_saver__save(struct daemon_saver *s)
{
	struct ktel_delta *delta = s->d->delta;
	struct ktel_delta_snapshot snap;
	struct ktel_err err;

	if (!ktel_delta__dirty(delta) && !s->retry)
		return;
	if (ktel_delta__snapshot(delta, &snap, &err)) {
		ktel_complain(&s->complaint, KTEL_LOG_ERROR, "state: %s: %s", s->path, err.msg);
		return;
	}
	ktel_delta__mark_saved(delta);
	s->retry = false;
	waits_push(s, &snap, ktel_router__mark(s->d->router));
	save_durable(s, ktel_router__durable_level(s->d->router));
}

static void on_prepare(uv_prepare_t *h)
{
	struct daemon_saver *s = h->data;

	uv_prepare_stop(h);
	s->pending = false;
	daemon_saver__save(s);
}

void daemon_saver__save_later(struct daemon_saver *s)
{
	if (!s->prepare_init) {
		daemon_saver__save(s);
		return;
	}
	if (s->pending)
		return;
	s->pending = true;
	uv_prepare_start(&s->prepare, on_prepare);
}

/* state_file is the same for the daemon's life (a reload that changes it
 * is refused) and shorter than PATH_MAX (config.c): copied once. */
int daemon_saver__init(struct daemon_saver *s, struct ktel_daemon *d, struct ktel_err *err)
{
	s->d = d;
	snprintf(s->path, sizeof(s->path), "%s", d->cfg->state_file);
	s->worker = ktel_worker__get(d->loop, KTEL_LANE_STATE);
	if (!s->worker)
		return ktel_err_set(err, errno, "state: cannot start the thread that writes %s: %s",
				    s->path, strerror(errno));
	uv_prepare_init(d->loop, &s->prepare);
	s->prepare.data = s;
	s->prepare_init = true;
	return 0;
}

/* At shutdown, after its final daemon_saver__save(): a save asked for
 * later (during the sinks' close) is made at once. */
void daemon_saver__close(struct daemon_saver *s)
{
	if (!s->prepare_init)
		return;
	uv_close((uv_handle_t *)&s->prepare, NULL);
	s->prepare_init = false;
	s->pending = false;
}

/* Once the sinks are closed no ack can ask for a save any more: the
 * writer thread stops after the saves in flight and the one it may still
 * start (save_done), which are waited for now. */
void daemon_saver__release(struct daemon_saver *s)
{
	s->released = true;
	if (!s->in_flight) {
		drop_worker(s);
		return;
	}
	ktel_worker__hurry(s->worker, &s->job);
}

void daemon_saver__free(struct daemon_saver *s)
{
	if (!s)
		return;
	daemon_saver__release(s);
	waits_drop(s, s->n_wait);
}
