// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "daemon.h"

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

#include "fsutil.h"
#include "control.h"
#include "delta.h"
#include "privileges.h"
#include "router.h"

#define MAX_PLUGINS 256

struct ktel_daemon {
	uv_loop_t *loop;
	struct ktel_config *cfg;
	struct ktel_daemon_opts opts;
	struct ktel_targets *targets;
	struct ktel_router *router;
	struct ktel_delta *delta;
	struct ktel_loaded_plugin *plugins[MAX_PLUGINS];
	size_t n_plugins;
	/* Plugin directories watched for drop-ins; a change arms the debounce
	 * timer and the rescan runs when the directory has been quiet. */
	uv_fs_event_t *watchers, *retired_watchers;
	size_t n_watchers;
	uv_timer_t rescan_timer;
	bool rescan_timer_init;
	uv_timer_t once_timer;
	bool once_timer_init;
	bool shutting_down;
	int exit_code;
	struct ktel_complaint state_complaint;
	struct ktel_control *control;
	uv_timer_t self_timer;
	bool self_timer_init;
	uint64_t self_seq, self_start_boot;
	int64_t self_start_wall;
};

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

/* Persist the delta state when a pull changed it (blocking, but small). */
static void save_state(struct ktel_daemon *d)
{
	struct ktel_err err;

	if (!ktel_delta__dirty(d->delta))
		return;
	if (ktel_delta__save(d->delta, d->cfg->state_file, &err)) {
		ktel_complain(&d->state_complaint, KTEL_LOG_ERROR, "state: %s", err.msg);
		return;
	}
	ktel_delta__mark_saved(d->delta);
	ktel_complain_clear(&d->state_complaint, "state: %s written again", d->cfg->state_file);
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
		ktel_complain(&m->complaint, KTEL_LOG_WARN, "metric %s: %llu events lost in the "
			      "kernel (ring buffer full) since the last pull", m->md->name,
			      (unsigned long long)recs[1].counter.delta);
	if (recs[2].counter.delta)
		ktel_complain(&m->complaint, KTEL_LOG_WARN, "metric %s: %llu events dropped "
			      "(shorter than the event type)", m->md->name,
			      (unsigned long long)recs[2].counter.delta);
	route(d, m, recs, n);
	return 0;
}

int ktel_daemon__pull(struct ktel_daemon *d, struct ktel_metric *m, struct ktel_err *err)
{
	const struct ktel_record *recs;
	struct ktel_pull_info info;
	size_t n;
	int r;

	if (m->sr)
		return pull_stream(d, m, err);
	if (!m->mp)
		return ktel_err_set(err, ENODEV, "metric %s: %s", m->md->name,
				    m->problem[0] ? m->problem : "not loaded");
	r = ktel_metric_pull__run(m->mp, d->delta, ktel_boot_id(), &recs, &n, &info, err);
	m->pulls++;
	if (r) {
		m->pull_errors++;
		return r;
	}
	m->last = info;
	m->last_pull_wall_ns = (uint64_t)ktel_now_wall_ns();
	m->records += n;
	if (info.start == KTEL_DELTA_START_BASELINE && m->pulls == 1)
		ktel_log(KTEL_LOG_INFO, "metric %s: reused pinned map %u has no saved state: "
			 "this window only sets the baseline, nothing emitted", m->md->name,
			 ktel_metric_pull__map_id(m->mp));
	if (info.truncated)
		ktel_complain(&m->complaint, KTEL_LOG_WARN, "metric %s: map walk hit its bound, "
			      "some keys were not read", m->md->name);
	if (m->interval_ms && info.duration_ns / 1000000 > m->interval_ms)
		ktel_log(KTEL_LOG_WARN, "metric %s: pull took %llu ms, longer than its %llu ms "
			 "interval", m->md->name, (unsigned long long)(info.duration_ns / 1000000),
			 (unsigned long long)m->interval_ms);
	ktel_log(KTEL_LOG_DEBUG, "metric %s: pulled %zu keys with %s (%u syscalls), %zu records "
		 "in %llu us", m->md->name, info.keys, info.method, info.syscalls, n,
		 (unsigned long long)(info.duration_ns / 1000));
	route(d, m, recs, n);
	save_state(d);
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
	struct ktel_err err;
	int failed = 0;

	for (size_t i = 0; i < d->n_plugins; i++)
		for (size_t j = 0; j < d->plugins[i]->n_metrics; j++) {
			struct ktel_metric *m = &d->plugins[i]->metrics[j];

			if (!m->enabled || (!m->mp && !m->sr))
				continue;
			if (ktel_daemon__pull(d, m, &err)) {
				ktel_log(KTEL_LOG_ERROR, "%s", err.msg);
				failed++;
			}
		}
	return failed;
}

/* ---- enable / disable ----------------------------------------------------- */

/* Does metric m use program prog? (All programs when it lists none.) */
static bool metric_uses(const struct ktel_metric *m, const char *prog)
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

		if (m != skip && m->enabled && metric_uses(m, prog))
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
	for (size_t i = 0; i < bp->n_progs; i++) {
		struct ktel_bpf_prog *p = &bp->progs[i];

		if (!p->selected || !metric_uses(m, p->name))
			continue;
		if (!p->attached && ktel_bpf_plugin__attach_prog(bp, p->name, err)) {
			ktel_log(KTEL_LOG_WARN, "metric %s: %s", m->md->name, err->msg);
			continue;
		}
		attached++;
	}
	if (!attached) {
		ktel_stream_reader__stop(m->sr);
		return ktel_err_set(err, ENODEV, "metric %s: no program could be attached",
				    m->md->name);
	}
	m->enabled = true;
	m->attached = true;
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
	/* Pull what accumulated so far: disabling loses nothing. */
	if ((m->mp || m->sr) && ktel_daemon__pull(d, m, err))
		ktel_log(KTEL_LOG_WARN, "%s", err->msg);
	m->enabled = false;
	m->attached = false;
	uv_timer_stop(&m->timer);
	uv_timer_stop(&m->lease_timer);
	for (size_t i = 0; bp && i < bp->n_progs; i++) {
		struct ktel_bpf_prog *p = &bp->progs[i];

		if (p->attached && metric_uses(m, p->name) && !prog_needed(m->lp, p->name, m))
			ktel_bpf_plugin__detach_prog(bp, p->name);
	}
	/* After the detach: what the ring still holds is delivered now. */
	ktel_stream_reader__stop(m->sr);
	return 0;
}

/* ---- loading -------------------------------------------------------------- */

static void on_refusal(const char *path, const struct ktel_err *err, void *ctx)
{
	/* The loader's messages start with the path. */
	ktel_log(KTEL_LOG_ERROR, "%s", err->msg);
}

static int load_params(struct ktel_daemon *d, const struct ktel_plugin *p, int64_t *values)
{
	const struct ktel_plugin_desc *desc = &p->desc;

	for (uint32_t i = 0; i < desc->n_params; i++) {
		values[i] = desc->params[i].default_value;
		for (uint32_t j = 0; j < desc->n_metrics; j++) {
			const struct ktel_metric_cfg *mc =
				ktel_config__metric(d->cfg, desc->metrics[j].name);
			json_t *v = mc && mc->params ? json_object_get(mc->params,
								      desc->params[i].name)
						     : NULL;

			if (v && json_is_integer(v))
				values[i] = json_integer_value(v);
		}
	}
	return 0;
}

static void init_metric(struct ktel_daemon *d, struct ktel_loaded_plugin *lp,
			struct ktel_metric *m, const struct ktel_metric_desc *md)
{
	const struct ktel_metric_cfg *mc = ktel_config__metric(d->cfg, md->name);

	m->daemon = d;
	m->lp = lp;
	m->md = md;
	m->interval_ms = ktel_config__metric_interval(d->cfg, md->name);
	m->lease_ms = mc ? mc->lease_ms : 0;
	uv_timer_init(d->loop, &m->timer);
	uv_timer_init(d->loop, &m->lease_timer);
	m->timer.data = m;
	m->lease_timer.data = m;
	m->timers_init = true;
}

/* Resolve every metric of a loaded plugin: a pull for accumulators, a ring
 * buffer reader (not started until enabled) for streams. */
static void resolve_metrics(struct ktel_daemon *d, struct ktel_loaded_plugin *lp)
{
	struct ktel_err err;

	for (size_t i = 0; i < lp->n_metrics; i++) {
		struct ktel_metric *m = &lp->metrics[i];
		const struct ktel_bpf_map *bm = ktel_bpf_plugin__map(lp->bpf, m->md->map_name);
		const struct ktel_metric_cfg *mc = ktel_config__metric(d->cfg, m->md->name);

		if (lp->bpf->unsupported) {
			snprintf(m->problem, sizeof(m->problem), "unsupported: %s",
				 lp->bpf->unsupported_reason);
			continue;
		}
		if (m->md->model == KTEL_MODEL_STREAM) {
			if (ktel_stream_reader__new(d->loop, m->md, lp->bpf->obj, on_stream_records,
						    m, &m->sr, &err)) {
				snprintf(m->problem, sizeof(m->problem), "%s", err.msg);
				ktel_log(KTEL_LOG_ERROR, "plugin %s: %s", lp->path, err.msg);
			}
			continue;
		}
		if (ktel_metric_pull__new(m->md, lp->bpf->obj, bm && !bm->reused, &m->mp, &err)) {
			snprintf(m->problem, sizeof(m->problem), "%s", err.msg);
			ktel_log(KTEL_LOG_ERROR, "plugin %s: %s", lp->path, err.msg);
			continue;
		}
		ktel_delta__set_emit_zeros(d->delta, m->md->name,
					   mc ? mc->emit_zero : d->cfg->emit_zero);
	}
}

static void log_plugin(const struct ktel_loaded_plugin *lp)
{
	const struct ktel_bpf_plugin *bp = lp->bpf;

	if (bp->unsupported) {
		ktel_log(KTEL_LOG_INFO, "plugin %s: unsupported: %s", lp->plugin->desc.name,
			 bp->unsupported_reason);
		return;
	}
	for (size_t i = 0; i < bp->n_maps; i++)
		if (bp->maps[i].pinned)
			ktel_log(KTEL_LOG_INFO, "plugin %s: map %s %s %s%s%s", lp->plugin->desc.name,
				 bp->maps[i].name, bp->maps[i].reused ? "reuses pin" : "pinned at",
				 bp->maps[i].pin_path, bp->maps[i].note[0] ? ": " : "",
				 bp->maps[i].note);
	for (size_t i = 0; i < bp->n_progs; i++)
		if (!bp->progs[i].selected)
			ktel_log(KTEL_LOG_INFO, "plugin %s: program %s skipped: %s",
				 lp->plugin->desc.name, bp->progs[i].name, bp->progs[i].skip_reason);
}

/* Load an opened plugin into the kernel; on success the daemon owns it. */
static int load_plugin(struct ktel_daemon *d, struct ktel_plugin *plugin, const struct stat *st)
{
	int64_t params[KTEL_PLUGIN_MAX_PARAMS];
	struct ktel_bpf_opts bopts = {
		.pin_root = d->cfg->pin_root,
		.pin_gid = d->cfg->pin_gid,
		.targets = d->targets,
		.param_values = params,
		.no_attach = true,
	};
	struct ktel_loaded_plugin *lp;
	struct ktel_err err;

	if (d->n_plugins >= MAX_PLUGINS) {
		ktel_log(KTEL_LOG_ERROR, "plugin %s: refused: more than %d plugins", plugin->path,
			 MAX_PLUGINS);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < plugin->desc.n_metrics; i++) {
		struct ktel_metric *other = ktel_daemon__metric(d, plugin->desc.metrics[i].name);

		if (other) {
			ktel_log(KTEL_LOG_ERROR, "plugin %s: refused: duplicate metric name %s "
				 "(already provided by %s)", plugin->path,
				 plugin->desc.metrics[i].name, other->lp->path);
			return -EEXIST;
		}
	}
	/* The kernel's BTF is parsed for a (re)scan and freed after it: it is
	 * a third of the daemon's memory otherwise (docs/benchmarks.md). */
	if (!d->targets) {
		d->targets = ktel_targets__new(NULL, &err);
		if (!d->targets) {
			ktel_log(KTEL_LOG_ERROR, "plugin %s: %s", plugin->path, err.msg);
			return -err.code;
		}
		bopts.targets = d->targets;
	}
	load_params(d, plugin, params);
	lp = calloc(1, sizeof(*lp));
	if (!lp)
		return -ENOMEM;
	snprintf(lp->path, sizeof(lp->path), "%s", plugin->path);
	lp->dev = st->st_dev;
	lp->ino = st->st_ino;
	lp->mtime = st->st_mtim;
	if (ktel_bpf_plugin__load(plugin, &bopts, &lp->bpf, &err)) {
		ktel_log(KTEL_LOG_ERROR, "plugin %s: %s", plugin->path, err.msg);
		free(lp);
		return -EINVAL;
	}
	lp->metrics = calloc(plugin->desc.n_metrics, sizeof(*lp->metrics));
	if (!lp->metrics) {
		ktel_bpf_plugin__free(lp->bpf);
		free(lp);
		return -ENOMEM;
	}
	lp->plugin = plugin;
	lp->n_metrics = plugin->desc.n_metrics;
	for (size_t i = 0; i < lp->n_metrics; i++)
		init_metric(d, lp, &lp->metrics[i], &plugin->desc.metrics[i]);
	d->plugins[d->n_plugins++] = lp;
	log_plugin(lp);
	resolve_metrics(d, lp);
	return 0;
}

static void free_loaded_plugin(struct ktel_loaded_plugin *lp)
{
	for (size_t j = 0; j < lp->n_metrics; j++) {
		ktel_metric_pull__free(lp->metrics[j].mp);
		/* Normally freed already (unload, shutdown), while the loop runs
		 * to close its handle. */
		ktel_stream_reader__free(lp->metrics[j].sr);
	}
	free(lp->metrics);
	ktel_bpf_plugin__free(lp->bpf); /* detaches; pins stay */
	ktel_plugin__free(lp->plugin);
	free(lp);
}

static void on_unloaded_timer_closed(uv_handle_t *h)
{
	struct ktel_metric *m = h->data;
	struct ktel_loaded_plugin *lp = m->lp;

	if (--lp->pending_closes == 0)
		free_loaded_plugin(lp);
}

/*
 * Take plugin i out of the daemon: pull what its enabled metrics hold (so
 * nothing is lost), detach, and free once its timers have closed.
 */
static void unload_plugin(struct ktel_daemon *d, size_t i, const char *why)
{
	struct ktel_loaded_plugin *lp = d->plugins[i];
	struct ktel_err err;

	ktel_log(KTEL_LOG_INFO, "plugin %s: unloading: %s", lp->path, why);
	for (size_t j = 0; j < lp->n_metrics; j++) {
		struct ktel_metric *m = &lp->metrics[j];

		if (m->enabled && ktel_daemon__disable(d, m, &err))
			ktel_log(KTEL_LOG_WARN, "%s", err.msg);
		/* Frees itself once its poll handle closed; needs nothing of lp. */
		ktel_stream_reader__free(m->sr);
		m->sr = NULL;
		if (m->timers_init) {
			m->timers_init = false;
			lp->pending_closes += 2;
			uv_close((uv_handle_t *)&m->timer, on_unloaded_timer_closed);
			uv_close((uv_handle_t *)&m->lease_timer, on_unloaded_timer_closed);
		}
	}
	memmove(&d->plugins[i], &d->plugins[i + 1], (d->n_plugins - i - 1) * sizeof(lp));
	d->n_plugins--;
	if (!lp->pending_closes)
		free_loaded_plugin(lp);
}

static struct ktel_loaded_plugin *plugin_by_path(struct ktel_daemon *d, const char *path,
						  size_t *ret_index)
{
	for (size_t i = 0; i < d->n_plugins; i++)
		if (strcmp(d->plugins[i]->path, path) == 0) {
			*ret_index = i;
			return d->plugins[i];
		}
	return NULL;
}

static int so_filter(const struct dirent *e)
{
	size_t n = strlen(e->d_name);

	return e->d_name[0] != '.' && n > 3 && strcmp(e->d_name + n - 3, ".so") == 0;
}

/*
 * Bring one plugin directory's loaded set in line with its files: new files
 * are opened and loaded, changed files reloaded. Returns the changes made.
 */
static int scan_dir(struct ktel_daemon *d, const char *dir)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, so_filter, alphasort), changes = 0;

	if (n < 0) {
		ktel_log(KTEL_LOG_ERROR, "plugin directory %s: %s", dir, strerror(errno));
		return 0;
	}
	for (int k = 0; k < n; k++) {
		struct ktel_loaded_plugin *lp;
		struct ktel_plugin *plugin;
		char path[4096];
		struct ktel_err err;
		struct stat st;
		size_t idx;

		snprintf(path, sizeof(path), "%s/%s", dir, names[k]->d_name);
		free(names[k]);
		if (lstat(path, &st) != 0)
			continue;
		lp = plugin_by_path(d, path, &idx);
		if (lp && lp->dev == st.st_dev && lp->ino == st.st_ino &&
		    lp->mtime.tv_sec == st.st_mtim.tv_sec && lp->mtime.tv_nsec == st.st_mtim.tv_nsec)
			continue;
		if (lp) {
			unload_plugin(d, idx, "file replaced");
			changes++;
		}
		if (ktel_plugin__open(path, &plugin, &err)) {
			on_refusal(path, &err, d);
			continue;
		}
		if (load_plugin(d, plugin, &st)) {
			ktel_plugin__free(plugin);
			continue;
		}
		changes++;
	}
	free(names);
	return changes;
}

/* Unload plugins whose file is gone (or whose directory left the config). */
static int drop_vanished(struct ktel_daemon *d)
{
	int changes = 0;

	for (size_t i = d->n_plugins; i-- > 0;) {
		const char *path = d->plugins[i]->path;
		bool listed = false;
		struct stat st;

		for (size_t k = 0; k < d->cfg->n_plugin_dirs; k++) {
			size_t len = strlen(d->cfg->plugin_dirs[k]);

			if (strncmp(path, d->cfg->plugin_dirs[k], len) == 0 && path[len] == '/')
				listed = true;
		}
		if (listed && lstat(path, &st) == 0)
			continue;
		unload_plugin(d, i, listed ? "file removed" : "directory no longer configured");
		changes++;
	}
	return changes;
}

static void start_metric(struct ktel_daemon *d, struct ktel_metric *m);

int ktel_daemon__rescan_plugins(struct ktel_daemon *d)
{
	size_t before = d->n_plugins;
	int changes = drop_vanished(d);

	for (size_t k = 0; k < d->cfg->n_plugin_dirs; k++)
		changes += scan_dir(d, d->cfg->plugin_dirs[k]);
	ktel_targets__free(d->targets);
	d->targets = NULL;
	/* Start the metrics of plugins that arrived with this scan. */
	for (size_t i = 0; i < d->n_plugins; i++)
		for (size_t j = 0; j < d->plugins[i]->n_metrics; j++) {
			struct ktel_metric *m = &d->plugins[i]->metrics[j];

			if (!m->enabled && !m->started_once)
				start_metric(d, m);
		}
	(void)before;
	return changes;
}

static void on_rescan_timer(uv_timer_t *t)
{
	struct ktel_daemon *d = t->data;
	int changes = ktel_daemon__rescan_plugins(d);

	if (changes)
		ktel_log(KTEL_LOG_INFO, "plugin directories: %d change%s applied", changes,
			 changes == 1 ? "" : "s");
}

static void on_dir_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
	struct ktel_daemon *d = h->data;

	/* Debounce: a copy is many events; rescan once it is quiet. */
	if (!d->shutting_down)
		uv_timer_start(&d->rescan_timer, on_rescan_timer, 300, 0);
}

static void close_watchers(struct ktel_daemon *d)
{
	for (size_t i = 0; i < d->n_watchers; i++)
		uv_close((uv_handle_t *)&d->watchers[i], NULL);
	d->n_watchers = 0;
}

static void watch_dirs(struct ktel_daemon *d)
{
	size_t n = d->cfg->n_plugin_dirs;

	close_watchers(d);
	/* Closing handles still live in the old array until their close
	 * callbacks ran: retire it, free it with the daemon. */
	free(d->retired_watchers);
	d->retired_watchers = d->watchers;
	d->watchers = calloc(n ? n : 1, sizeof(*d->watchers));
	if (!d->watchers)
		return;
	for (size_t i = 0; i < n; i++) {
		uv_fs_event_t *w = &d->watchers[i];
		int r;

		uv_fs_event_init(d->loop, w);
		w->data = d;
		r = uv_fs_event_start(w, on_dir_event, d->cfg->plugin_dirs[i], 0);
		if (r)
			ktel_log(KTEL_LOG_WARN, "plugin directory %s: not watched for drop-ins: %s",
				 d->cfg->plugin_dirs[i], uv_strerror(r));
		/* Every initialised handle is closed by close_watchers. */
		d->n_watchers = i + 1;
	}
}

/* Enable m at start-up or when its plugin arrives, as the config says. */
static void start_metric(struct ktel_daemon *d, struct ktel_metric *m)
{
	struct ktel_err err;

	m->started_once = true;
	if (!m->mp && !m->sr) {
		ktel_log(KTEL_LOG_INFO, "metric %s: not collected: %s", m->md->name, m->problem);
		return;
	}
	if (!ktel_config__metric_enabled(d->cfg, m->md->name)) {
		ktel_log(KTEL_LOG_INFO, "metric %s: disabled by the config", m->md->name);
		return;
	}
	if (ktel_daemon__enable(d, m, m->lease_ms, &err)) {
		ktel_log(KTEL_LOG_ERROR, "%s", err.msg);
		return;
	}
	ktel_log(KTEL_LOG_INFO, "metric %s: collecting every %llu ms", m->md->name,
		 (unsigned long long)m->interval_ms);
}

/* ---- self-telemetry -------------------------------------------------------- */

#define SELF_PER_METRIC 3
#define SELF_PER_PROG 2

/* A record for metric-level self-telemetry: name, one dimension. */
static struct ktel_record *self_rec(struct ktel_record *r, const struct ktel_record *tmpl,
				    const char *name, const char *dim, int64_t idx,
				    const char *label)
{
	*r = *tmpl;
	r->metric = name;
	r->n_dims = 1;
	r->dims[0] = (struct ktel_dim){.name = dim, .value = idx, .label = label};
	return r;
}

static bool bpf_stats_on(void)
{
	char c = '0';
	int fd = open("/proc/sys/kernel/bpf_stats_enabled", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = '0';
		close(fd);
	}
	return c == '1';
}

/* Records for each attached program: run time (bpf_stats) and recursion misses. */
static size_t self_prog_records(struct ktel_daemon *d, const struct ktel_record *tmpl,
				struct ktel_record *out, size_t max)
{
	bool stats = bpf_stats_on();
	size_t n = 0;
	int64_t idx = 0;

	for (size_t i = 0; i < d->n_plugins; i++) {
		struct ktel_bpf_plugin *bp = d->plugins[i]->bpf;

		for (size_t j = 0; bp && j < bp->n_progs; j++, idx++) {
			struct bpf_prog_info info = {0};
			__u32 len = sizeof(info);
			int fd;

			if (!bp->progs[j].attached || n + SELF_PER_PROG > max)
				continue;
			fd = bpf_program__fd(bp->progs[j].prog);
			if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
				continue;
			self_rec(&out[n], tmpl, "ktel_prog_recursion_misses", "program", idx,
				 bp->progs[j].name);
			out[n].type = KTEL_RECORD_GAUGE;
			out[n++].gauge = (int64_t)info.recursion_misses;
			if (!stats)
				continue;
			/* Body-only time: bpf_stats does not see the dispatch. */
			self_rec(&out[n], tmpl, "ktel_prog_run_time_ns_per_run", "program", idx,
				 bp->progs[j].name);
			out[n].type = KTEL_RECORD_GAUGE;
			out[n++].gauge = info.run_cnt ? (int64_t)(info.run_time_ns / info.run_cnt) : 0;
		}
	}
	return n;
}

static size_t self_metric_records(struct ktel_daemon *d, const struct ktel_record *tmpl,
				  struct ktel_record *out, size_t max)
{
	size_t n = 0;
	int64_t idx = 0;

	for (size_t i = 0; i < d->n_plugins; i++)
		for (size_t j = 0; j < d->plugins[i]->n_metrics; j++, idx++) {
			struct ktel_metric *m = &d->plugins[i]->metrics[j];
			const char *name = m->md->name;

			if (!m->enabled || n + SELF_PER_METRIC > max)
				continue;
			self_rec(&out[n], tmpl, "ktel_pull_duration_us", "metric", idx, name);
			out[n].type = KTEL_RECORD_GAUGE;
			out[n++].gauge = (int64_t)(m->last.duration_ns / 1000);
			self_rec(&out[n], tmpl, "ktel_pull_keys", "metric", idx, name);
			out[n].type = KTEL_RECORD_GAUGE;
			out[n++].gauge = (int64_t)m->last.keys;
			self_rec(&out[n], tmpl, "ktel_pull_errors", "metric", idx, name);
			out[n].type = KTEL_RECORD_COUNTER;
			out[n].counter.total = m->pull_errors;
			out[n++].counter.delta = m->pull_errors - m->self_pull_errors;
			m->self_pull_errors = m->pull_errors;
		}
	return n;
}

/*
 * The daemon's own telemetry, as ordinary records through the same sinks:
 * sink counters (router), pull cost per metric, program health.
 */
static void emit_self(struct ktel_daemon *d)
{
	size_t n_progs = 0, n_metrics = 0, max, n = 0, got = 0;
	struct ktel_record tmpl = {0}, *recs;

	for (size_t i = 0; i < d->n_plugins; i++) {
		n_metrics += d->plugins[i]->n_metrics;
		n_progs += d->plugins[i]->bpf ? d->plugins[i]->bpf->n_progs : 0;
	}
	max = ktel_router__n_sinks(d->router) * KTEL_ROUTER_SELF_PER_SINK +
	      n_metrics * SELF_PER_METRIC + n_progs * SELF_PER_PROG;
	recs = calloc(max ? max : 1, sizeof(*recs));
	if (!recs)
		return;
	tmpl.type = KTEL_RECORD_COUNTER;
	tmpl.unit = "";
	tmpl.boot_id = ktel_boot_id();
	tmpl.start_boottime_ns = d->self_start_boot;
	tmpl.start_wall_ns = d->self_start_wall;
	tmpl.end_boottime_ns = ktel_now_boottime_ns();
	tmpl.end_wall_ns = ktel_now_wall_ns();
	tmpl.seq = ++d->self_seq;
	if (ktel_router__self_records(d->router, &tmpl, recs, max, &got) == 0)
		n = got;
	n += self_metric_records(d, &tmpl, recs + n, max - n);
	n += self_prog_records(d, &tmpl, recs + n, max - n);
	ktel_router__route(d->router, recs, n, (const char *const *)d->cfg->self_sinks,
			   d->cfg->n_self_sinks);
	d->self_start_boot = tmpl.end_boottime_ns;
	d->self_start_wall = tmpl.end_wall_ns;
	free(recs);
}

static void on_self_timer(uv_timer_t *t)
{
	emit_self(t->data);
}

static void start_self(struct ktel_daemon *d)
{
	d->self_start_boot = ktel_now_boottime_ns();
	d->self_start_wall = ktel_now_wall_ns();
	uv_timer_init(d->loop, &d->self_timer);
	d->self_timer.data = d;
	d->self_timer_init = true;
	if (d->cfg->self_enabled)
		uv_timer_start(&d->self_timer, on_self_timer, d->cfg->self_interval_ms,
			       d->cfg->self_interval_ms);
}

static void on_once(uv_timer_t *t)
{
	struct ktel_daemon *d = t->data;

	ktel_daemon__shutdown(d, 0);
}

static int open_sinks(struct ktel_daemon *d, struct ktel_err *err)
{
	int r = 0;

	d->router = ktel_router__new(d->loop);
	if (!d->router)
		return ktel_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; !r && i < d->cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &d->cfg->sinks[i];

		r = ktel_router__add_sink(d->router, sc->name, sc->type, sc->options, err);
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
	/* Fail now, not after the first pull, when the state cannot be written. */
	return ktel_delta__save(d->delta, d->cfg->state_file, err);
}

int ktel_daemon__new(uv_loop_t *loop, struct ktel_config *cfg,
		     const struct ktel_daemon_opts *opts, struct ktel_daemon **ret,
		     struct ktel_err *err)
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

int ktel_daemon__start(struct ktel_daemon *d, struct ktel_err *err)
{
	int r;

	ktel_libbpf_log__set(libbpf_to_log, d, ktel_log_get_level() >= KTEL_LOG_DEBUG);
	r = open_state(d, err);
	if (r)
		return r;
	r = open_sinks(d, err);
	if (r)
		return r;
	r = ktel_bpffs_ensure(d->cfg->pin_root, d->cfg->pin_gid, err);
	if (r)
		return r;
	/* Fail now, clearly, when the kernel has no readable BTF. */
	d->targets = ktel_targets__new(NULL, err);
	if (!d->targets)
		return -err->code;
	uv_timer_init(d->loop, &d->rescan_timer);
	d->rescan_timer.data = d;
	d->rescan_timer_init = true;
	ktel_daemon__rescan_plugins(d);
	watch_dirs(d);
	if (!d->n_plugins)
		ktel_log(KTEL_LOG_WARN, "no plugin loaded from %zu plugin director%s",
			 d->cfg->n_plugin_dirs, d->cfg->n_plugin_dirs == 1 ? "y" : "ies");
	start_self(d);
	/* --once is for scripts and tests: nothing to control. */
	if (!d->opts.once) {
		r = ktel_control__new(d->loop, d, d->cfg->control_socket, d->cfg->control_gid,
				      &d->control, err);
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
	return 0;
}

/* ---- reload ---------------------------------------------------------------- */

static const struct ktel_sink_cfg *sink_cfg(const struct ktel_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_sinks; i++)
		if (strcmp(cfg->sinks[i].name, name) == 0)
			return &cfg->sinks[i];
	return NULL;
}

static bool sink_changed(const struct ktel_sink_cfg *a, const struct ktel_sink_cfg *b)
{
	return strcmp(a->type, b->type) != 0 || !json_equal(a->options, b->options);
}

/* Settings that pinned maps, state and the socket hang on cannot change live. */
static void check_immutable(const struct ktel_config *old, const struct ktel_config *cfg,
			    struct ktel_config_errors *errs)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{"pin_root", offsetof(struct ktel_config, pin_root)},
		{"state_file", offsetof(struct ktel_config, state_file)},
		{"control_socket", offsetof(struct ktel_config, control_socket)},
	};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *a = *(char *const *)((const char *)old + keys[i].off);
		const char *b = *(char *const *)((const char *)cfg + keys[i].off);

		if (strcmp(a, b) != 0)
			ktel_config_errors__add(errs, "%s: cannot change while the daemon runs "
						"(\"%s\" -> \"%s\"): restart ktelemetryd", keys[i].key,
						a, b);
	}
}

/*
 * Open the sinks the new config adds or changes. Added ones go straight in
 * (nothing else uses their names); a changed one replaces the old instance,
 * which is put back if the new one cannot be opened. On failure everything
 * done here is undone and the errors are in errs.
 */
static int apply_sinks(struct ktel_daemon *d, const struct ktel_config *cfg,
		       struct ktel_config_errors *errs)
{
	const struct ktel_config *old = d->cfg;
	size_t added = 0;
	struct ktel_err err;
	int rc = 0;

	for (size_t i = 0; i < cfg->n_sinks && !rc; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i];

		if (sink_cfg(old, sc->name))
			continue;
		rc = ktel_router__add_sink(d->router, sc->name, sc->type, sc->options, &err);
		if (rc)
			ktel_config_errors__add(errs, "%s", err.msg);
		else
			added = i + 1;
	}
	if (rc) {
		for (size_t i = 0; i < added; i++)
			if (!sink_cfg(old, cfg->sinks[i].name))
				ktel_router__remove_sink(d->router, cfg->sinks[i].name, 0, NULL,
							 NULL);
		return rc;
	}
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i], *was = sink_cfg(old, sc->name);

		if (!was || !sink_changed(was, sc))
			continue;
		ktel_router__remove_sink(d->router, sc->name, old->sink_close_timeout_ms, NULL,
					 NULL);
		if (ktel_router__add_sink(d->router, sc->name, sc->type, sc->options, &err) == 0) {
			ktel_log(KTEL_LOG_INFO, "sink %s: reopened with its new options", sc->name);
			continue;
		}
		ktel_config_errors__add(errs, "%s (kept the previous options)", err.msg);
		if (ktel_router__add_sink(d->router, was->name, was->type, was->options, &err))
			ktel_log(KTEL_LOG_ERROR, "sink %s: cannot reopen with its previous options "
				 "either: %s", was->name, err.msg);
		rc = -EINVAL;
	}
	for (size_t i = 0; i < old->n_sinks; i++)
		if (!sink_cfg(cfg, old->sinks[i].name)) {
			ktel_router__remove_sink(d->router, old->sinks[i].name,
						 old->sink_close_timeout_ms, NULL, NULL);
			ktel_log(KTEL_LOG_INFO, "sink %s: removed", old->sinks[i].name);
		}
	return rc;
}

/* Enable, disable and retime metrics as the (already installed) config says. */
static void apply_metrics(struct ktel_daemon *d)
{
	struct ktel_err err;

	for (size_t i = 0; i < d->n_plugins; i++)
		for (size_t j = 0; j < d->plugins[i]->n_metrics; j++) {
			struct ktel_metric *m = &d->plugins[i]->metrics[j];
			const char *name = m->md->name;
			const struct ktel_metric_cfg *mc = ktel_config__metric(d->cfg, name);
			bool want = ktel_config__metric_enabled(d->cfg, name);
			uint64_t interval = ktel_config__metric_interval(d->cfg, name);

			ktel_delta__set_emit_zeros(d->delta, name,
						   mc ? mc->emit_zero : d->cfg->emit_zero);
			if (!m->mp && !m->sr)
				continue;
			if (interval != m->interval_ms) {
				m->interval_ms = interval;
				if (m->enabled)
					uv_timer_start(&m->timer, on_pull_timer, interval, interval);
			}
			if (want && !m->enabled && ktel_daemon__enable(d, m, mc ? mc->lease_ms : 0,
								       &err))
				ktel_log(KTEL_LOG_ERROR, "%s", err.msg);
			else if (!want && m->enabled && ktel_daemon__disable(d, m, &err))
				ktel_log(KTEL_LOG_ERROR, "%s", err.msg);
		}
}

static bool same_dirs(const struct ktel_config *a, const struct ktel_config *b)
{
	if (a->n_plugin_dirs != b->n_plugin_dirs)
		return false;
	for (size_t i = 0; i < a->n_plugin_dirs; i++)
		if (strcmp(a->plugin_dirs[i], b->plugin_dirs[i]) != 0)
			return false;
	return true;
}

int ktel_daemon__reload(struct ktel_daemon *d, const char *path, struct ktel_config_errors *errs,
			struct ktel_err *err)
{
	struct ktel_config *cfg = NULL, *old = d->cfg;
	int rc;

	if (!path)
		path = d->opts.config_path;
	rc = path ? ktel_config__load_file(path, &d->opts.vars, &cfg, errs, err)
		  : ktel_config__load_string(d->opts.config_text, "<embedded config>",
					     &d->opts.vars, &cfg, errs, err);
	if (rc)
		return ktel_err_prefix(err, "the running configuration is unchanged: ");
	check_immutable(old, cfg, errs);
	if (errs->n || apply_sinks(d, cfg, errs)) {
		ktel_config__free(cfg);
		return ktel_err_set(err, EINVAL, "%s: %zu error%s: the running configuration is "
				    "unchanged", path ? path : "<embedded config>", errs->n,
				    errs->n == 1 ? "" : "s");
	}
	d->cfg = cfg;
	apply_metrics(d);
	if (cfg->self_enabled)
		uv_timer_start(&d->self_timer, on_self_timer, cfg->self_interval_ms,
			       cfg->self_interval_ms);
	else
		uv_timer_stop(&d->self_timer);
	if (!same_dirs(old, cfg)) {
		watch_dirs(d);
		ktel_daemon__rescan_plugins(d);
	}
	ktel_log(KTEL_LOG_INFO, "configuration reloaded from %s", cfg->source);
	ktel_config__free(old);
	return 0;
}

/* ---- shutdown ------------------------------------------------------------- */

static void close_timers(struct ktel_daemon *d)
{
	for (size_t i = 0; i < d->n_plugins; i++)
		for (size_t j = 0; j < d->plugins[i]->n_metrics; j++) {
			struct ktel_metric *m = &d->plugins[i]->metrics[j];

			/* The last events go to the sinks before they close; the
			 * reader frees itself when the loop closes its handle. */
			ktel_stream_reader__stop(m->sr);
			ktel_stream_reader__free(m->sr);
			m->sr = NULL;
			if (!m->timers_init)
				continue;
			uv_close((uv_handle_t *)&m->timer, NULL);
			uv_close((uv_handle_t *)&m->lease_timer, NULL);
			m->timers_init = false;
		}
	if (d->once_timer_init) {
		uv_close((uv_handle_t *)&d->once_timer, NULL);
		d->once_timer_init = false;
	}
	if (d->rescan_timer_init) {
		uv_close((uv_handle_t *)&d->rescan_timer, NULL);
		d->rescan_timer_init = false;
	}
	if (d->self_timer_init) {
		uv_close((uv_handle_t *)&d->self_timer, NULL);
		d->self_timer_init = false;
	}
	close_watchers(d);
}

static void on_sinks_closed(void *ctx)
{
	struct ktel_daemon *d = ctx;

	ktel_log(KTEL_LOG_DEBUG, "sinks closed");
	(void)d;
}

void ktel_daemon__shutdown(struct ktel_daemon *d, int exit_code)
{
	if (d->shutting_down)
		return;
	d->shutting_down = true;
	d->exit_code = exit_code;
	/* The window since the last pull is not lost. */
	ktel_daemon__pull_all(d);
	save_state(d);
	if (d->cfg->self_enabled && d->router)
		emit_self(d);
	close_timers(d);
	ktel_control__close(d->control);
	d->control = NULL;
	if (d->router)
		ktel_router__close(d->router, d->cfg->sink_close_timeout_ms, on_sinks_closed, d);
}

int ktel_daemon__exit_code(const struct ktel_daemon *d)
{
	return d->exit_code;
}

void ktel_daemon__free(struct ktel_daemon *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_plugins; i++)
		free_loaded_plugin(d->plugins[i]);
	free(d->watchers);
	free(d->retired_watchers);
	ktel_router__free(d->router);
	ktel_delta__free(d->delta);
	ktel_targets__free(d->targets);
	ktel_libbpf_log__reset();
	ktel_config__free(d->cfg);
	free(d);
}

/* ---- accessors ------------------------------------------------------------ */

struct ktel_metric *ktel_daemon__metric(struct ktel_daemon *d, const char *name)
{
	for (size_t i = 0; i < d->n_plugins; i++)
		for (size_t j = 0; j < d->plugins[i]->n_metrics; j++)
			if (strcmp(d->plugins[i]->metrics[j].md->name, name) == 0)
				return &d->plugins[i]->metrics[j];
	return NULL;
}

size_t ktel_daemon__n_plugins(const struct ktel_daemon *d)
{
	return d->n_plugins;
}

struct ktel_loaded_plugin *ktel_daemon__plugin(struct ktel_daemon *d, size_t i)
{
	return i < d->n_plugins ? d->plugins[i] : NULL;
}

const struct ktel_config *ktel_daemon__config(const struct ktel_daemon *d)
{
	return d->cfg;
}

struct ktel_router *ktel_daemon__router(struct ktel_daemon *d)
{
	return d->router;
}
