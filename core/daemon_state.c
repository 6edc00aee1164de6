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
 * the file is written on libuv's pool, so the loop never waits on the
 * disk's fsyncs (53-63 ms for a 100k-key state, docs/benchmarks.md).
 */
#include "daemon_internal.h"

#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "log.h"

static void save_durable(struct ktel_daemon *d, uint64_t level);

/* On a pool thread: only the snapshot and the path are touched. */
static void save_work(uv_work_t *w)
{
	struct ktel_daemon *d = w->data;

	d->save_rc = ktel_delta_snapshot__write(&d->save_snap, d->save_path, &d->save_err);
	if (!d->save_rc)
		ktel_fault__point("saved");
}

static void save_done(uv_work_t *w, int status)
{
	struct ktel_daemon *d = w->data;

	d->save_in_flight = false;
	ktel_delta_snapshot__clear(&d->save_snap);
	if (status || d->save_rc) {
		d->state_retry = true;
		ktel_complain(&d->state_complaint, KTEL_LOG_ERROR, "state: %s",
			      status ? uv_strerror(status) : d->save_err.msg);
	} else {
		d->state_retry = false;
		ktel_complain_clear(&d->state_complaint, "state: %s written again",
				    d->cfg->state_file);
	}
	/* Waits that became durable while this one was written. */
	save_durable(d, ktel_router__durable_level(d->router));
}

/* Hand the snapshot (owned from here on) to the pool. */
static void write_snapshot(struct ktel_daemon *d, struct ktel_delta_snapshot *snap)
{
	d->save_snap = *snap;
	*snap = (struct ktel_delta_snapshot){0};
	d->save_work.data = d;
	d->save_in_flight = true;
	if (uv_queue_work(d->loop, &d->save_work, save_work, save_done) == 0)
		return;
	/* No pool (cannot happen on Linux's libuv): write it here. */
	save_work(&d->save_work);
	save_done(&d->save_work, 0);
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
	size_t k = d->n_state_wait;

	if (d->save_in_flight)
		return;
	while (k > 0 && d->state_wait[k - 1].mark > level)
		k--;
	if (!k)
		return;
	write_snapshot(d, &d->state_wait[k - 1].snap);
	waits_drop(d, k);
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
void daemon_state_init(struct ktel_daemon *d)
{
	snprintf(d->save_path, sizeof(d->save_path), "%s", d->cfg->state_file);
	uv_prepare_init(d->loop, &d->save_prepare);
	d->save_prepare.data = d;
	d->save_prepare_init = true;
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
