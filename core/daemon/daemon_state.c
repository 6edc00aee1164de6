// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The delta state's save, ordered after the durable sinks (docs/sinks.md,
 * "Delivery guarantees"). A pull that changed the state takes a snapshot of
 * it (memory only) and a router mark; the snapshot is written once every
 * durable sink has made everything up to that mark durable. So the saved
 * state never covers a window a durable sink could still lose, and a
 * window written but not covered by the saved state is cut out of the
 * file at the next start (daemon_recover_sinks) and reported again.
 * Without a durable sink the level follows the mark at once: the state is
 * saved right after the pull, as the other sinks have always had it.
 * The pulls of one loop turn ask for one save (daemon_save_state_later);
 * the file is written on the writer thread (worker.h), so the loop never
 * waits on the disk's fsyncs (53-63 ms for a 100k-key state,
 * docs/benchmarks.md). The write's completion does not wake the loop: it
 * is collected when the loop wakes next (its next pull), unless the daemon
 * is shutting down. With a durable sink whose ack came the same way, the
 * saved state so follows the written lines by up to one round: a crash in
 * between cuts that round out of the file and reports it again, as above.
 */
#include "daemon_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "log.h"

static void save_durable(struct ktel_daemon *d, uint64_t level);

static void drop_worker(struct ktel_daemon *d)
{
	ktel_worker__put(d->worker);
	d->worker = NULL;
}

/* On the writer thread: only the snapshot and the path are touched. A
 * failure waits for the next pull, which writes again. */
static bool save_work(struct ktel_job *job)
{
	struct ktel_daemon *d = job->data;

	d->save_rc = ktel_delta_snapshot__write(&d->save_snap, d->save_path, &d->save_err);
	if (!d->save_rc)
		ktel_fault__point("saved");
	return false;
}

static void save_done(struct ktel_job *job)
{
	struct ktel_daemon *d = job->data;

	d->save_in_flight = false;
	ktel_delta_snapshot__clear(&d->save_snap);
	if (d->save_rc) {
		d->state_retry = true;
		ktel_complain(&d->state_complaint, KTEL_LOG_ERROR, "state: %s", d->save_err.msg);
	} else {
		d->state_retry = false;
		ktel_complain_clear(&d->state_complaint, "state: %s written again",
				    d->cfg->state_file);
	}
	/* Waits that became durable while this one was written. */
	save_durable(d, ktel_router__durable_level(d->router));
	if (d->state_released && !d->save_in_flight)
		drop_worker(d);
}

/* Hand the snapshot (owned from here on) to the writer thread; at
 * shutdown its completion is waited for, so it wakes the loop. */
static void write_snapshot(struct ktel_daemon *d, struct ktel_delta_snapshot *snap)
{
	d->save_snap = *snap;
	*snap = (struct ktel_delta_snapshot){0};
	d->save_job.data = d;
	d->save_in_flight = true;
	ktel_worker__queue(d->worker, &d->save_job, save_work, save_done,
			   d->shutting_down || d->state_released);
}

/* Drop the first k waits. */
static void waits_drop(struct ktel_daemon *d, size_t k)
{
	for (size_t i = 0; i < k; i++)
		ktel_delta_snapshot__clear(&d->state_wait[i].snap);
	memmove(d->state_wait, d->state_wait + k, (d->n_state_wait - k) * sizeof(d->state_wait[0]));
	d->n_state_wait -= k;
}

/* Write the newest snapshot that level covers; drop it and older ones.
 * While a write is in flight the waits stay: its completion comes back. */
static void save_durable(struct ktel_daemon *d, uint64_t level)
{
	struct ktel_delta_snapshot snap;
	size_t k = d->n_state_wait;

	if (d->save_in_flight)
		return;
	while (k > 0 && d->state_wait[k - 1].mark > level)
		k--;
	if (!k)
		return;
		/* The worker is released only once the sinks are closed and no
	 * save is in flight: no ack or completion comes after that. */
	if (!d->worker)
		return;
	snap = d->state_wait[k - 1].snap;
	d->state_wait[k - 1].snap = (struct ktel_delta_snapshot){0};
	waits_drop(d, k);
	write_snapshot(d, &snap);
}

void daemon_on_durable(void *ctx, uint64_t level)
{
	save_durable(ctx, level);
}

/* A full wait list: the newest replaces the one in between, the oldest
 * stays, so a durable sink that always lags a pull still gets saves. */
static void waits_push(struct ktel_daemon *d, struct ktel_delta_snapshot *snap, uint64_t mark)
{
	size_t slot = d->n_state_wait;

	if (slot == KTEL_ARRAY_SIZE(d->state_wait)) {
		slot--;
		ktel_delta_snapshot__clear(&d->state_wait[slot].snap);
	} else {
		d->n_state_wait++;
	}
	d->state_wait[slot].snap = *snap;
	d->state_wait[slot].mark = mark;
}

void daemon_save_state(struct ktel_daemon *d)
{
	struct ktel_delta_snapshot snap;
	struct ktel_err err;

	if (!ktel_delta__dirty(d->delta) && !d->state_retry)
		return;
	if (ktel_delta__snapshot(d->delta, &snap, &err)) {
		ktel_complain(&d->state_complaint, KTEL_LOG_ERROR, "state: %s: %s",
			      d->cfg->state_file, err.msg);
		return;
	}
	ktel_delta__mark_saved(d->delta);
	d->state_retry = false;
	waits_push(d, &snap, ktel_router__mark(d->router));
	save_durable(d, ktel_router__durable_level(d->router));
}

static void on_save_prepare(uv_prepare_t *h)
{
	struct ktel_daemon *d = h->data;

	uv_prepare_stop(h);
	d->save_pending = false;
	daemon_save_state(d);
}

void daemon_save_state_later(struct ktel_daemon *d)
{
	if (!d->save_prepare_init) {
		daemon_save_state(d);
		return;
	}
	if (d->save_pending)
		return;
	d->save_pending = true;
	uv_prepare_start(&d->save_prepare, on_save_prepare);
}

/* state_file is the same for the daemon's life (a reload that changes it
 * is refused) and shorter than PATH_MAX (config.c): copied once. */
int daemon_state_init(struct ktel_daemon *d, struct ktel_err *err)
{
	snprintf(d->save_path, sizeof(d->save_path), "%s", d->cfg->state_file);
	d->worker = ktel_worker__get(d->loop, KTEL_LANE_STATE);
	if (!d->worker)
		return ktel_err_set(err, errno, "state: cannot start the thread that writes %s: %s",
				    d->cfg->state_file, strerror(errno));
	uv_prepare_init(d->loop, &d->save_prepare);
	d->save_prepare.data = d;
	d->save_prepare_init = true;
	return 0;
}

/* At shutdown, after its final daemon_save_state(): a save asked for later
 * (during the sinks' close) is made at once. */
void daemon_state_close(struct ktel_daemon *d)
{
	if (!d->save_prepare_init)
		return;
	uv_close((uv_handle_t *)&d->save_prepare, NULL);
	d->save_prepare_init = false;
	d->save_pending = false;
}

/* Once the sinks are closed no ack can ask for a save any more: the
 * writer thread stops after the saves in flight and the one it may still
 * start (save_done), which are waited for now. */
void daemon_state_release(struct ktel_daemon *d)
{
	d->state_released = true;
	if (!d->save_in_flight) {
		drop_worker(d);
		return;
	}
	ktel_worker__hurry(d->worker, &d->save_job);
}

static int window_of(void *ctx, const char *boot_id, const char *metric, uint32_t map_id,
		     uint64_t seq)
{
	struct ktel_daemon *d = ctx;

	return ktel_delta__window(d->delta, boot_id, metric, map_id, seq);
}

void daemon_recover_sinks(struct ktel_daemon *d)
{
	struct ktel_err err;

	/* A file that cannot be cut back keeps what it has: a window may then
	 * appear twice, which a consumer detects by its seq; refusing to start
	 * would lose every window instead. */
	if (ktel_router__recover(d->router, window_of, d, &err))
		ktel_log(KTEL_LOG_ERROR, "%s; windows written after the last saved state may "
			 "appear twice", err.msg);
}

void daemon_free_state_waits(struct ktel_daemon *d)
{
	waits_drop(d, d->n_state_wait);
}
