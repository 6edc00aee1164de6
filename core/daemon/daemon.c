// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The daemon's core: pulls and routing, enable and disable, the start-up
 * totals for the cumulative sinks, and the daemon's life (start, shutdown,
 * free), which brings up and takes down the parts (daemon_internal.h) in
 * order. The parts never call back in here except through the ops given
 * to them.
 */
#include "daemon_internal.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "fault.h"
#include "fsutil.h"
#include "control.h"
#include "label_check.h"
#include "delta.h"
#include "privileges.h"
#include "router.h"

/* ---- helpers ------------------------------------------------------------ */

static void libbpf_to_log(int level, const char *msg, void *ctx)
{
	/* The loader turns libbpf's failures into one line per plugin
	 * (unsupported: reason, or the error); the raw text is for debugging. */
	ktel_log(KTEL_LOG_DEBUG, "%s", msg);
}

/* Metric names must reach sinks' routing lists as configured. */
static void route(struct ktel_daemon *d, const struct ktel_metric *m,
		  const struct ktel_record *recs, size_t n)
{
	const struct ktel_metric_cfg *mc = ktel_config__metric(d->cfg, m->md->name);

	if (!n)
		return;
	ktel_router__route(d->router, recs, n, mc ? (const char *const *)mc->sinks : NULL,
			   mc ? mc->n_sinks : 0);
}

/* ---- pulling ------------------------------------------------------------ */

/* Records of a stream metric, as the reader decodes them: straight to the
 * metric's sinks. */
static void on_stream_records(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct ktel_metric *m = ctx;

	m->records += n;
	route(m->daemon, m, recs, n);
}

/*
 * A stream metric's "pull": its events flow as they come, so a pull only
 * emits the reader's counters as self-telemetry (delivered, lost in the
 * kernel, dropped by the daemon) and complains when events were lost.
 */
static int pull_stream(struct ktel_daemon *d, struct ktel_metric *m, struct ktel_err *err)
{
	struct ktel_record tmpl = {0}, recs[KTEL_STREAM_SELF_RECORDS];
	size_t n;
	int r;

	tmpl.end_boottime_ns = ktel_now_boottime_ns();
	tmpl.start_boottime_ns = tmpl.end_boottime_ns;
	tmpl.end_wall_ns = ktel_now_wall_ns();
	tmpl.start_wall_ns = m->last_pull_wall_ns ? (int64_t)m->last_pull_wall_ns
						  : tmpl.end_wall_ns;
	tmpl.boot_id = ktel_boot_id();
	tmpl.seq = ++m->pulls;
	r = ktel_stream_reader__self_records(m->sr, &tmpl, recs, KTEL_ARRAY_SIZE(recs), &n);
	if (r) {
		m->pull_errors++;
		return ktel_err_set(err, -r, "metric %s: self-telemetry: %s", m->md->name,
				    strerror(-r));
	}
	m->last_pull_wall_ns = (uint64_t)tmpl.end_wall_ns;
	if (recs[1].counter.delta)
		ktel_complain(&m->complaint, KTEL_LOG_WARN,
			      "metric %s: %llu events lost in the "
			      "kernel (ring buffer full) since the last pull",
			      m->md->name, (unsigned long long)recs[1].counter.delta);
	if (recs[2].counter.delta)
		ktel_complain(&m->complaint, KTEL_LOG_WARN,
			      "metric %s: %llu events dropped "
			      "(shorter than the event type)",
			      m->md->name, (unsigned long long)recs[2].counter.delta);
	/* Self-telemetry: it follows self_telemetry's switch and sinks. */
	if (d->cfg->self_enabled)
		ktel_router__route(d->router, recs, n, (const char *const *)d->cfg->self_sinks,
				   d->cfg->n_self_sinks);
	return 0;
}

/* A pull's window of records: to the metric's sinks, as one batch. */
static void route_window(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct ktel_metric *m = ctx;

	m->records += n;
	ktel_router__batch_add(m->daemon->router, recs, n);
}

/* An attributed metric's pull hands its windows to the fold; what is routed
 * (and counted in m->records) is what the fold makes of them at the end. */
static int run_attributed(struct ktel_daemon *d, struct ktel_metric *m,
			  struct ktel_pull_info *ret_info, struct ktel_err *err)
{
	struct ktel_err ferr;
	long folded;
	int r;

	daemon_plugins__attr_begin_pull(&d->plugins, m);
	daemon_plugins__attr_arm(m);
	ktel_attr_fold__begin(m->fold);
	r = ktel_metric_pull__run_keys(m->mp, d->delta, ktel_boot_id(), ktel_attr_fold__add_keys,
				       ktel_attr_fold__add, m->fold, ret_info, err);
	/* The map's history (a pinned map reused, or the keys before this
	 * daemon's first pull) starts the names' running totals. */
	if (ktel_attr_fold__first_window(m->fold))
		ktel_metric_pull__totals(m->mp, ktel_attr_fold__add_history, m->fold);
	daemon_plugins__attr_take_released(&d->plugins);
	/* Also after a failed delta round: the records of the keys before the
	 * failure moved their state on and must be delivered (see below). */
	folded = ktel_attr_fold__end(m->fold, ktel_now_boottime_ns(), route_window, m, &ferr);
	/* The keys of the ids released at the pull before left the map as
	 * this pull read them, with their last events in its window. */
	daemon_plugins__attr_taken(m, !r);
	if (!r && folded < 0) {
		*err = ferr;
		r = (int)folded;
	} else if (!r && ret_info)
		ret_info->records = (size_t)folded;
	return r;
}

/*
 * Read, decode, delta and route m's accumulator. The records are routed
 * window by window as the pull makes them (metric_pull.h), as one batch
 * to the metric's sinks (router.h), so no buffer of the whole pull is
 * written. A pull that failed in its delta round may have routed the
 * records of the keys before the failure (their state moved on with them):
 * they are counted and saved like any.
 */
static int pull_accumulator(struct ktel_daemon *d, struct ktel_metric *m,
			    struct ktel_pull_info *ret_info, struct ktel_err *err)
{
	const struct ktel_metric_cfg *mc = ktel_config__metric(d->cfg, m->md->name);
	uint64_t before = m->records;
	int r;

	ktel_router__batch_begin(d->router, mc ? (const char *const *)mc->sinks : NULL,
				 mc ? mc->n_sinks : 0);
	if (m->fold)
		r = run_attributed(d, m, ret_info, err);
	else
		r = ktel_metric_pull__run(m->mp, d->delta, ktel_boot_id(), route_window, m,
					  ret_info, err);
	ktel_router__batch_end(d->router);
	m->pulls++;
	if (m->records > before)
		ktel_fault__point("routed");
	/* Saved once the durable sinks have made these records durable;
	 * once per loop turn, after every pull of the round. */
	if (!r || m->records > before)
		daemon_saver__save_later(&d->saver);
	return r;
}

int ktel_daemon__pull(struct ktel_daemon *d, struct ktel_metric *m, struct ktel_err *err)
{
	struct ktel_pull_info info;
	uint64_t t0, took_ms;
	int r;

	if (m->sr)
		return pull_stream(d, m, err);
	t0 = ktel_now_boottime_ns();
	if (!m->mp)
		return ktel_err_set(err, ENODEV, "metric %s: %s", m->md->name,
				    m->problem[0] ? m->problem : "not loaded");
	r = pull_accumulator(d, m, &info, err);
	if (r) {
		m->pull_errors++;
		return r;
	}
	m->last = info;
	m->last_pull_wall_ns = (uint64_t)ktel_now_wall_ns();
	if (info.start == KTEL_DELTA_START_BASELINE && m->pulls == 1)
		ktel_log(KTEL_LOG_INFO,
			 "metric %s: reused pinned map %u has no saved state: "
			 "this window only sets the baseline, nothing emitted",
			 m->md->name, ktel_metric_pull__map_id(m->mp));
	ktel_log(KTEL_LOG_DEBUG,
		 "metric %s: pulled %zu keys with %s (%u syscalls), %zu records "
		 "in %llu us",
		 m->md->name, info.keys, info.method, info.syscalls, info.records,
		 (unsigned long long)(info.duration_ns / 1000));
	/* The whole pull blocks the loop: reading, routing and the state save. */
	took_ms = (ktel_now_boottime_ns() - t0) / 1000000;
	if (m->interval_ms && took_ms > m->interval_ms)
		ktel_log(KTEL_LOG_WARN,
			 "metric %s: pull took %llu ms (%llu ms reading the map), "
			 "longer than its %llu ms interval",
			 m->md->name, (unsigned long long)took_ms,
			 (unsigned long long)(info.duration_ns / 1000000),
			 (unsigned long long)m->interval_ms);
	return 0;
}

static void on_pull_timer(uv_timer_t *t)
{
	struct ktel_metric *m = t->data;
	struct ktel_err err;

	if (ktel_daemon__pull(m->daemon, m, &err))
		ktel_complain(&m->complaint, KTEL_LOG_ERROR, "%s", err.msg);
}

int ktel_daemon__pull_all(struct ktel_daemon *d)
{
	struct ktel_metric *m;
	struct ktel_err err;
	int failed = 0;

	for_each_metric(&d->plugins, m) {
		if (!m->enabled || (!m->mp && !m->sr))
			continue;
		if (ktel_daemon__pull(d, m, &err)) {
			ktel_log(KTEL_LOG_ERROR, "%s", err.msg);
			failed++;
		}
	}
	return failed;
}

/* ---- start-up totals ------------------------------------------------------ */

/* A window of a metric's totals, to the cumulative sinks of its batch. */
static void route_totals_window(void *ctx, const struct ktel_record *recs, size_t n)
{
	ktel_router__batch_add(ctx, recs, n);
}

/* Pull m (a short first window, routed as any pull), then hand its totals,
 * every key's, zero-delta ones included, to the cumulative sinks. */
static void route_metric_totals(struct ktel_daemon *d, struct ktel_metric *m)
{
	const struct ktel_metric_cfg *mc;
	struct ktel_err err;

	if (ktel_daemon__pull(d, m, &err)) {
		ktel_complain(&m->complaint, KTEL_LOG_ERROR, "%s", err.msg);
		return;
	}
	mc = ktel_config__metric(d->cfg, m->md->name);
	ktel_router__batch_begin_totals(d->router, mc ? (const char *const *)mc->sinks : NULL,
					mc ? mc->n_sinks : 0);
	/* An attributed metric's totals by name: its fold's, whose series
	 * are those its windows carry (the map's are per raw id). */
	if (m->fold)
		ktel_attr_fold__totals(m->fold, route_totals_window, d->router);
	else
		ktel_metric_pull__totals(m->mp, route_totals_window, d->router);
	ktel_router__batch_end(d->router);
}

/*
 * Right after start, once, when a sink is cumulative (Prometheus): every
 * enabled accumulator metric's totals, so the first scrape shows each
 * series at its cumulative value instead of an empty page until the first
 * interval.
 */
static void on_totals_timer(uv_timer_t *t)
{
	struct ktel_daemon *d = t->data;
	struct ktel_metric *m;

	/* --once pulls exactly once; without a cumulative sink nobody needs it. */
	if (d->opts.once || !ktel_router__any_cumulative(d->router))
		return;
	for_each_metric(&d->plugins, m)
		if (m->enabled && m->mp)
			route_metric_totals(d, m);
}

/* ---- enable / disable ----------------------------------------------------- */

/* Does metric m use program prog? (All programs when it lists none.) */
bool ktel_metric__uses_prog(const struct ktel_metric *m, const char *prog)
{
	if (!m->md->programs || !m->md->n_programs)
		return true;
	for (uint32_t i = 0; i < m->md->n_programs; i++)
		if (strcmp(m->md->programs[i], prog) == 0)
			return true;
	return false;
}

/* Is prog needed by an enabled metric of lp other than skip? */
static bool prog_needed(const struct ktel_loaded_plugin *lp, const char *prog,
			const struct ktel_metric *skip)
{
	for (size_t i = 0; i < lp->n_metrics; i++) {
		const struct ktel_metric *m = &lp->metrics[i];

		if (m != skip && m->enabled && ktel_metric__uses_prog(m, prog))
			return true;
	}
	return false;
}

static void on_lease_end(uv_timer_t *t)
{
	struct ktel_metric *m = t->data;
	struct ktel_err err;

	ktel_log(KTEL_LOG_INFO, "metric %s: lease ended, disabling", m->md->name);
	if (ktel_daemon__disable(m->daemon, m, &err))
		ktel_log(KTEL_LOG_ERROR, "%s", err.msg);
}

int ktel_daemon__enable(struct ktel_daemon *d, struct ktel_metric *m, uint64_t lease_ms,
			struct ktel_err *err)
{
	struct ktel_bpf_plugin *bp = m->lp->bpf;
	size_t attached = 0;

	if (!m->mp && !m->sr)
		return ktel_err_set(err, ENODEV, "metric %s: %s", m->md->name,
				    m->problem[0] ? m->problem : "not loaded");
	/* Poll the ring before its programs run: nothing waits unread. */
	if (m->sr && ktel_stream_reader__start(m->sr, err))
		return -err->code;
	/* Last program first: plugins define a pair's start before its end, so
	 * the end runs before any start can be saved and none is left stale. */
	for (size_t k = bp->n_progs; k-- > 0;) {
		struct ktel_bpf_prog *p = &bp->progs[k];

		if (!p->selected || !ktel_metric__uses_prog(m, p->name))
			continue;
		if (!p->attached && ktel_bpf_plugin__attach_prog(bp, p->name, err)) {
			ktel_log(KTEL_LOG_WARN, "metric %s: %s", m->md->name, err->msg);
			continue;
		}
		attached++;
	}
	if (!attached)
		ktel_err_set(err, ENODEV, "metric %s: no program could be attached", m->md->name);
	/* Half a start/end pair never produces data: collecting needs every
	 * hook the metric uses. What this call attached is undone. */
	if (!attached || ktel_bpf_plugin__metric_complete(bp, m->md, err)) {
		for (size_t i = 0; i < bp->n_progs; i++) {
			struct ktel_bpf_prog *p = &bp->progs[i];

			if (p->attached && ktel_metric__uses_prog(m, p->name) &&
			    !prog_needed(m->lp, p->name, m))
				ktel_bpf_plugin__detach_prog(bp, p->name);
		}
		ktel_stream_reader__stop(m->sr);
		return -ENODEV;
	}
	m->enabled = true;
	m->attached = true;
	/* --once pulls once, at its end (shutdown), not on the interval. */
	if (!d->opts.once)
		uv_timer_start(&m->timer, on_pull_timer, m->interval_ms, m->interval_ms);
	m->lease_ms = lease_ms;
	if (lease_ms)
		uv_timer_start(&m->lease_timer, on_lease_end, lease_ms, 0);
	else
		uv_timer_stop(&m->lease_timer);
	return 0;
}

int ktel_daemon__disable(struct ktel_daemon *d, struct ktel_metric *m, struct ktel_err *err)
{
	struct ktel_bpf_plugin *bp = m->lp->bpf;

	if (!m->enabled)
		return 0;
	m->enabled = false;
	m->attached = false;
	uv_timer_stop(&m->timer);
	uv_timer_stop(&m->lease_timer);
	for (size_t i = 0; bp && i < bp->n_progs; i++) {
		struct ktel_bpf_prog *p = &bp->progs[i];

		if (p->attached && ktel_metric__uses_prog(m, p->name) &&
		    !prog_needed(m->lp, p->name, m))
			ktel_bpf_plugin__detach_prog(bp, p->name);
	}
	/* After the detach: what the ring still holds is delivered now. */
	ktel_stream_reader__stop(m->sr);
	/* Then pull, so the window (and a stream's counters) includes all of
	 * it: disabling loses nothing. */
	if ((m->mp || m->sr) && ktel_daemon__pull(d, m, err))
		ktel_log(KTEL_LOG_WARN, "%s", err->msg);
	return 0;
}

void daemon__set_interval(struct ktel_daemon *d, struct ktel_metric *m, uint64_t interval_ms)
{
	m->interval_ms = interval_ms;
	if (m->enabled)
		uv_timer_start(&m->timer, on_pull_timer, m->interval_ms, m->interval_ms);
}

static void on_once(uv_timer_t *t)
{
	struct ktel_daemon *d = t->data;

	ktel_daemon__shutdown(d, 0);
}

/* What each sink could not deliver is said once, when it closes. */
static void on_sink_close_report(const char *sink, const struct ktel_sink_stats *final,
				 uint64_t dropped_at_close, void *ctx)
{
	enum ktel_log_level level = dropped_at_close ? KTEL_LOG_WARN : KTEL_LOG_INFO;

	ktel_log(level,
		 "sink %s: closed: %llu records sent, %llu dropped in all, %llu of them "
		 "not flushed before the close timeout, %llu errors%s%s",
		 sink, (unsigned long long) final->sent, (unsigned long long) final->dropped,
		 (unsigned long long)dropped_at_close, (unsigned long long) final->errors,
		 final->last_error[0] ? ", the last: " : "", final->last_error);
}

/* One line per sink saying where records go (a bound port 0 shows here). */
void daemon__log_sink_opened(struct ktel_daemon *d, const char *name, const char *type)
{
	char where[300];

	ktel_router__sink_where(d->router, name, where, sizeof(where));
	ktel_log(KTEL_LOG_INFO, "sink %s (%s): %s", name, type, where[0] ? where : "open");
}

static int open_sinks(struct ktel_daemon *d, struct ktel_err *err)
{
	int r = 0;

	d->router = ktel_router__new(d->loop);
	if (!d->router)
		return ktel_err_set(err, ENOMEM, "out of memory");
	ktel_router__on_close_report(d->router, on_sink_close_report, d);
	ktel_router__on_durable(d->router, daemon_saver__on_durable, &d->saver);
	for (size_t i = 0; !r && i < d->cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &d->cfg->sinks[i];

		r = ktel_router__add_sink(d->router, sc->name, sc->type, sc->options, err);
		if (!r)
			daemon__log_sink_opened(d, sc->name, sc->type);
	}
	return r;
}

static int open_state(struct ktel_daemon *d, struct ktel_err *err)
{
	int r = ktel_mkdir_parents(d->cfg->state_file, 0750);

	if (r)
		return ktel_err_set(err, -r, "%s: cannot create its directory: %s",
				    d->cfg->state_file, strerror(-r));
	r = ktel_delta__load(d->delta, d->cfg->state_file, err);
	if (r == -EBADMSG || r == -ESTALE) {
		ktel_log(KTEL_LOG_WARN, "%s", err->msg);
		r = 0;
	}
	if (r)
		return r;
	/* Fail now, not after the first pull, when the state cannot be written,
	 * but write nothing yet: a start that fails later leaves no file. */
	return ktel_dir_writable_for(d->cfg->state_file, err);
}

static int window_of(void *ctx, const char *boot_id, const char *metric, uint32_t map_id,
		     uint64_t seq)
{
	struct ktel_daemon *d = ctx;

	return ktel_delta__window(d->delta, boot_id, metric, map_id, seq);
}

/* Cut the sinks' files back to the state just loaded (daemon_state.c says why). */
static void recover_sinks(struct ktel_daemon *d)
{
	struct ktel_err err;

	/* A file that cannot be cut back keeps what it has: a window may then
	 * appear twice, which a consumer detects by its seq; refusing to start
	 * would lose every window instead. */
	if (ktel_router__recover(d->router, window_of, d, &err))
		ktel_log(KTEL_LOG_ERROR,
			 "%s; windows written after the last saved state may "
			 "appear twice",
			 err.msg);
}

int ktel_daemon__new(uv_loop_t *loop, struct ktel_config *cfg, const struct ktel_daemon_opts *opts,
		     struct ktel_daemon **ret, struct ktel_err *err)
{
	struct ktel_daemon *d = calloc(1, sizeof(*d));

	if (!d)
		return ktel_err_set(err, ENOMEM, "out of memory");
	d->loop = loop;
	d->cfg = cfg;
	if (opts)
		d->opts = *opts;
	d->delta = ktel_delta__new(ktel_boot_id());
	if (!d->delta) {
		d->cfg = NULL; /* still the caller's */
		ktel_daemon__free(d);
		return ktel_err_set(err, ENOMEM, "out of memory");
	}
	*ret = d;
	return 0;
}

static const struct daemon_plugins_ops plugins_ops = {
	.on_stream_records = on_stream_records,
	.enable = ktel_daemon__enable,
	.disable = ktel_daemon__disable,
	.plugin_freed = daemon_self__plugin_freed,
};

/* The parts, in the order they depend on each other: the state saver
 * before the plugins' first pulls, self-telemetry after the plugins. */
static int start_parts(struct ktel_daemon *d, struct ktel_err *err)
{
	int r;

	r = daemon_plugins__init(&d->plugins, d, &plugins_ops, err);
	if (r)
		return r;
	r = daemon_saver__init(&d->saver, d, err);
	if (r)
		return r;
	/* A configured directory that cannot be read is bad input: exit 2
	 * naming it, rather than run without the metrics it should hold. */
	r = daemon_plugins__load(&d->plugins, err);
	if (r)
		return r;
	daemon_self__init(&d->self, d);
	/* At once, on the loop: the start-up totals (on_totals_timer). */
	uv_timer_init(d->loop, &d->totals_timer);
	d->totals_timer.data = d;
	d->totals_timer_init = true;
	uv_timer_start(&d->totals_timer, on_totals_timer, 0, 0);
	return 0;
}

int daemon__start(struct ktel_daemon *d, const struct ktel_control_ops *control_ops,
		  struct ktel_err *err)
{
	int r;

	ktel_libbpf_log__set(libbpf_to_log, d, ktel_log_get_level() >= KTEL_LOG_DEBUG);
	ktel_fault__init(NULL);
	r = open_state(d, err);
	if (r)
		return r;
	r = open_sinks(d, err);
	if (r)
		return r;
	/* Before any plugin opens its maps (a baseline would look like
	 * state): windows written after the saved state come out of the
	 * files, the first pull reports them again. */
	recover_sinks(d);
	ktel_label_check__self(d->cfg, ktel_label_check__log, NULL);
	r = ktel_bpffs_ensure(d->cfg->pin_root, d->cfg->pin_gid, err);
	if (r)
		return r;
	r = start_parts(d, err);
	if (r)
		return r;
	/* --once is for scripts and tests: nothing to control. */
	if (!d->opts.once) {
		r = ktel_control__new(d->loop, control_ops, d, d->cfg->control_socket,
				      d->cfg->control_gid, &d->control, err);
		if (r)
			return r;
	}
	/* Everything that needs root is done: keep only what run-time plugin
	 * loads and pins need (docs/privileges.md). */
	r = ktel_privileges_drop(&(struct ktel_privileges_opts){.drop = d->cfg->drop_privileges,
								.pin_gid = d->cfg->pin_gid},
				 err);
	if (r)
		return r;
	if (d->opts.once) {
		uv_timer_init(d->loop, &d->once_timer);
		d->once_timer.data = d;
		d->once_timer_init = true;
		uv_timer_start(&d->once_timer, on_once, d->opts.once_wait_ms, 0);
	}
	d->started = true;
	return 0;
}

/* ---- shutdown ------------------------------------------------------------- */

static void close_timer(uv_timer_t *t, bool *init)
{
	if (!*init)
		return;
	uv_close((uv_handle_t *)t, NULL);
	*init = false;
}

static void close_parts(struct ktel_daemon *d)
{
	daemon_plugins__close(&d->plugins, d->started);
	close_timer(&d->once_timer, &d->once_timer_init);
	close_timer(&d->totals_timer, &d->totals_timer_init);
	daemon_saver__close(&d->saver);
	daemon_self__close(&d->self);
}

static void on_sinks_closed(void *ctx)
{
	struct ktel_daemon *d = ctx;

	ktel_log(KTEL_LOG_DEBUG, "sinks closed");
	daemon_saver__release(&d->saver);
}

void ktel_daemon__shutdown(struct ktel_daemon *d, int exit_code)
{
	if (d->shutting_down)
		return;
	d->shutting_down = true;
	d->exit_code = exit_code;
	/* A start that failed emits and saves nothing: its exit 2 leaves the
	 * outputs as they were. */
	if (d->started) {
		/* Stop counting first: the final pull then reports everything
		 * the maps hold, and nothing is counted between it and the
		 * exit (which would detach them anyway) that no line reports
		 * and the next start would. Streams deliver what their rings
		 * hold, so the last counters below include those events. */
		daemon_plugins__stop_counting(&d->plugins);
		/* The window since the last pull is not lost. Its state is
		 * saved once the durable sinks have flushed it (during the
		 * close below), never when one could not. */
		ktel_daemon__pull_all(d);
		daemon_saver__save(&d->saver);
		if (d->cfg->self_enabled && d->router)
			daemon_self__emit(&d->self);
	}
	close_parts(d);
	ktel_control__close(d->control);
	d->control = NULL;
	if (d->router)
		ktel_router__close(d->router, d->cfg->sink_close_timeout_ms, on_sinks_closed, d);
	else
		daemon_saver__release(&d->saver);
}

int ktel_daemon__exit_code(const struct ktel_daemon *d)
{
	return d->exit_code;
}

struct ktel_config *daemon__swap_config(struct ktel_daemon *d, struct ktel_config *cfg)
{
	struct ktel_config *old = d->cfg;

	d->cfg = cfg;
	return old;
}

void ktel_daemon__free(struct ktel_daemon *d)
{
	if (!d)
		return;
	daemon_plugins__free(&d->plugins);
	ktel_router__free(d->router);
	daemon_saver__free(&d->saver);
	ktel_delta__free(d->delta);
	ktel_libbpf_log__reset();
	ktel_config__free(d->cfg);
	free(d);
}

/* ---- accessors ------------------------------------------------------------ */

struct ktel_metric *ktel_daemon__metric(struct ktel_daemon *d, const char *name)
{
	return daemon_plugins__metric(&d->plugins, name);
}

size_t ktel_daemon__n_plugins(const struct ktel_daemon *d)
{
	return daemon_plugins__n(&d->plugins);
}

struct ktel_loaded_plugin *ktel_daemon__plugin(struct ktel_daemon *d, size_t i)
{
	return daemon_plugins__at(&d->plugins, i);
}

struct ktel_metric *ktel_daemon__next_metric(struct ktel_daemon *d, struct ktel_metric_iter *it)
{
	return daemon_plugins__next_metric(&d->plugins, it);
}

const struct ktel_config *ktel_daemon__config(const struct ktel_daemon *d)
{
	return d->cfg;
}

size_t ktel_daemon__reopen_sinks(struct ktel_daemon *d)
{
	size_t n = ktel_router__reopen(d->router);

	ktel_log(KTEL_LOG_INFO, "reopening the files of %zu sink%s", n, n == 1 ? "" : "s");
	return n;
}

struct ktel_router *ktel_daemon__router(struct ktel_daemon *d)
{
	return d->router;
}
