// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The daemon's plugins part (struct daemon_plugins): the plugin directories
 * scanned (new, replaced and removed files), their plugins loaded into the
 * kernel and unloaded, the directories watched for drop-ins, and the files
 * refused. It owns the loaded plugins and their metrics' handles; enabling,
 * disabling and routing are the core's, reached through the ops it was
 * given at init (daemon_internal.h).
 */
#include "daemon_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "memory.h"
#include "stream_reader.h"

/* ---- refused files -------------------------------------------------------- */

static struct ktel_refusal *refusal_by_path(struct daemon_plugins *p, const char *path)
{
	for (size_t i = 0; i < p->n_refused; i++)
		if (strcmp(p->refused[i].path, path) == 0)
			return &p->refused[i];
	return NULL;
}

static struct ktel_refusal *refusal_add(struct daemon_plugins *p, const char *path)
{
	struct ktel_refusal *r;

	if (!p->refused)
		p->refused = calloc(MAX_REFUSALS, sizeof(*p->refused));
	if (!p->refused || p->n_refused >= MAX_REFUSALS)
		return NULL;
	r = &p->refused[p->n_refused++];
	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "%s", path);
	return r;
}

static bool same_version(const struct ktel_refusal *r, const struct stat *st)
{
	return r->dev == st->st_dev && r->ino == st->st_ino && r->size == st->st_size &&
	       r->mtime.tv_sec == st->st_mtim.tv_sec && r->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/*
 * path was refused for reason (a whole line naming the file): keep it for
 * status and list, and log it unless this version of the file was refused
 * for the same reason before - a rescan must not repeat every refusal, but
 * a changed file, or a new reason, is news.
 */
static void note_refusal(struct daemon_plugins *p, const char *path, const char *reason)
{
	struct ktel_refusal *r = refusal_by_path(p, path);
	struct stat st;
	bool news;

	memset(&st, 0, sizeof(st));
	(void)lstat(path, &st); /* gone: zeros, a version of its own */
	if (!r)
		r = refusal_add(p, path);
	if (!r) {
		ktel_log(KTEL_LOG_ERROR, "%s", reason);
		return;
	}
	news = !r->reason[0] || !same_version(r, &st) || strcmp(r->reason, reason) != 0;
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	r->size = st.st_size;
	r->mtime = st.st_mtim;
	snprintf(r->reason, sizeof(r->reason), "%s", reason);
	r->seen = true;
	if (news)
		ktel_log(KTEL_LOG_ERROR, "%s", reason);
}

/* printf-style note_refusal(). */
static void refuse(struct daemon_plugins *p, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void refuse(struct daemon_plugins *p, const char *path, const char *fmt, ...)
{
	char reason[KTEL_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	note_refusal(p, path, reason);
}

/* A scan begins: refusals it does not repeat are dropped at its end. */
static void refusals_unsee(struct daemon_plugins *p)
{
	for (size_t i = 0; i < p->n_refused; i++)
		p->refused[i].seen = false;
}

/* A scan ended: forget files it did not refuse (loaded now, or gone). */
static void refusals_sweep(struct daemon_plugins *p)
{
	size_t k = 0;

	for (size_t i = 0; i < p->n_refused; i++)
		if (p->refused[i].seen && k++ != i)
			p->refused[k - 1] = p->refused[i];
	p->n_refused = k;
}

size_t ktel_daemon__n_refused(const struct ktel_daemon *d)
{
	return d->plugins.n_refused;
}

const struct ktel_refusal *ktel_daemon__refused(const struct ktel_daemon *d, size_t i)
{
	return i < d->plugins.n_refused ? &d->plugins.refused[i] : NULL;
}

/* ---- loading -------------------------------------------------------------- */

static void on_refusal(const char *path, const struct ktel_err *err, void *ctx)
{
	/* The loader's messages start with the path. */
	note_refusal(ctx, path, err->msg);
}

static int param_index(const struct ktel_plugin_desc *desc, const char *name)
{
	for (uint32_t i = 0; i < desc->n_params; i++)
		if (strcmp(desc->params[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* "a, b, c", or "none": the params a plugin has, for a refusal. */
static void param_names(const struct ktel_plugin_desc *desc, char *buf, size_t len)
{
	size_t used = 0;

	snprintf(buf, len, "none");
	for (uint32_t i = 0; i < desc->n_params && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
					 desc->params[i].name);
}

/*
 * The plugin's param values: its defaults, overridden by metrics.<name>.params
 * of each of its metrics. A key the plugin does not declare or a value that is
 * not an integer refuses the plugin: a setting silently ignored would leave
 * the metric measuring something else than the config says.
 */
static int load_params(struct daemon_plugins *p, const struct ktel_plugin *plugin, int64_t *values)
{
	const struct ktel_plugin_desc *desc = &plugin->desc;
	char names[512];

	for (uint32_t i = 0; i < desc->n_params; i++)
		values[i] = desc->params[i].default_value;
	for (uint32_t j = 0; j < desc->n_metrics; j++) {
		const struct ktel_metric_cfg *mc = ktel_config__metric(p->d->cfg,
								       desc->metrics[j].name);
		const char *key;
		json_t *v;

		if (!mc || !mc->params)
			continue;
		json_object_foreach(mc->params, key, v)
		{
			int k = param_index(desc, key);

			if (k >= 0 && json_is_integer(v)) {
				values[k] = json_integer_value(v);
				continue;
			}
			param_names(desc, names, sizeof(names));
			refuse(p, plugin->path,
			       "plugin %s: refused: metrics.%s.params.%s: %s "
			       "(plugin %s has params: %s)",
			       plugin->path, desc->metrics[j].name, key,
			       k < 0 ? "no such param" : "expected an integer", desc->name, names);
			return -EINVAL;
		}
	}
	return 0;
}

static void init_metric(struct daemon_plugins *p, struct ktel_loaded_plugin *lp,
			struct ktel_metric *m, const struct ktel_metric_desc *md)
{
	const struct ktel_metric_cfg *mc = ktel_config__metric(p->d->cfg, md->name);

	m->daemon = p->d;
	m->lp = lp;
	m->md = md;
	m->interval_ms = ktel_config__metric_interval(p->d->cfg, md->name);
	m->lease_ms = mc ? mc->lease_ms : 0;
	uv_timer_init(p->d->loop, &m->timer);
	uv_timer_init(p->d->loop, &m->lease_timer);
	m->timer.data = m;
	m->lease_timer.data = m;
	m->timers_init = true;
}

/* Before any program of the metric is attached (docs/architecture.md,
 * Deltas): the first pull then reports all that happened since this start. */
static void baseline_at_open(struct daemon_plugins *p, struct ktel_metric *m)
{
	struct ktel_err err;
	bool taken;

	if (ktel_metric_pull__baseline(m->mp, p->d->delta, &taken, &err)) {
		ktel_log(KTEL_LOG_WARN,
			 "metric %s: baseline at start: %s (the first pull "
			 "sets it instead)",
			 m->md->name, err.msg);
		return;
	}
	if (taken)
		ktel_log(KTEL_LOG_INFO,
			 "metric %s: reused pinned map %u has no saved state: "
			 "what it counted before this start is not reported (baseline taken "
			 "before attaching); everything from now on is",
			 m->md->name, ktel_metric_pull__map_id(m->mp));
}

/* Resolve every metric of a loaded plugin: a pull for accumulators, a ring
 * buffer reader (not started until enabled) for streams. */
static void resolve_metrics(struct daemon_plugins *p, struct ktel_loaded_plugin *lp)
{
	struct ktel_err err;

	for (size_t i = 0; i < lp->n_metrics; i++) {
		struct ktel_metric *m = &lp->metrics[i];
		const struct ktel_bpf_map *bm = ktel_bpf_plugin__map(lp->bpf, m->md->map_name);
		const struct ktel_metric_cfg *mc = ktel_config__metric(p->d->cfg, m->md->name);

		if (lp->bpf->unsupported) {
			snprintf(m->problem, sizeof(m->problem), "unsupported: %s",
				 lp->bpf->unsupported_reason);
			continue;
		}
		if (m->md->model == KTEL_MODEL_STREAM) {
			if (ktel_stream_reader__new(p->d->loop, m->md, lp->bpf->obj,
						    p->ops->on_stream_records, m, &m->sr, &err)) {
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
		ktel_delta__set_emit_zeros(p->d->delta, m->md->name,
					   mc ? mc->emit_zero : p->d->cfg->emit_zero);
		baseline_at_open(p, m);
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
			ktel_log(KTEL_LOG_INFO, "plugin %s: map %s %s %s%s%s",
				 lp->plugin->desc.name, bp->maps[i].name,
				 bp->maps[i].reused ? "reuses pin" : "pinned at",
				 bp->maps[i].pin_path, bp->maps[i].note[0] ? ": " : "",
				 bp->maps[i].note);
	for (size_t i = 0; i < bp->n_progs; i++)
		if (!bp->progs[i].selected)
			ktel_log(KTEL_LOG_INFO, "plugin %s: program %s skipped: %s%s%s",
				 lp->plugin->desc.name, bp->progs[i].name, bp->progs[i].skip_reason,
				 bp->progs[i].verifier_log[0] ? "; verifier: " : "",
				 bp->progs[i].verifier_log);
}

/* Load an opened plugin into the kernel; on success the part owns it. */
static int load_plugin(struct daemon_plugins *p, struct ktel_plugin *plugin)
{
	int64_t params[KTEL_PLUGIN_MAX_PARAMS];
	struct ktel_bpf_opts bopts = {
		.pin_root = p->d->cfg->pin_root,
		.pin_gid = p->d->cfg->pin_gid,
		.targets = p->targets,
		.param_values = params,
		.no_attach = true,
	};
	struct ktel_loaded_plugin *lp;
	struct ktel_err err;

	if (p->n >= MAX_PLUGINS) {
		refuse(p, plugin->path, "plugin %s: refused: more than %d plugins", plugin->path,
		       MAX_PLUGINS);
		return -E2BIG;
	}
	/* The kernel's BTF is parsed once for a (re)scan and freed after it:
	 * it is half of the daemon's memory otherwise. The targets hold it, and
	 * every load of the scan borrows it (vmlinux_btf.h, docs/benchmarks.md). */
	if (!p->targets) {
		p->targets = ktel_targets__new(NULL, &err);
		if (!p->targets) {
			refuse(p, plugin->path, "plugin %s: %s", plugin->path, err.msg);
			return -err.code;
		}
		bopts.targets = p->targets;
	}
	if (load_params(p, plugin, params))
		return -EINVAL;
	lp = calloc(1, sizeof(*lp));
	if (!lp)
		return -ENOMEM;
	snprintf(lp->path, sizeof(lp->path), "%s", plugin->path);
	/* The file as the loader opened it, not a stat taken before. */
	lp->dev = plugin->st.st_dev;
	lp->ino = plugin->st.st_ino;
	lp->mtime = plugin->st.st_mtim;
	if (ktel_bpf_plugin__load(plugin, &bopts, &lp->bpf, &err)) {
		refuse(p, plugin->path, "plugin %s: %s", plugin->path, err.msg);
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
		init_metric(p, lp, &lp->metrics[i], &plugin->desc.metrics[i]);
	p->items[p->n++] = lp;
	log_plugin(lp);
	resolve_metrics(p, lp);
	return 0;
}

/*
 * Everything of a plugin but lp and its metrics array (which holds the
 * timers): pulls, readers, the BPF object, and the library itself.
 */
static void release_plugin_code(struct ktel_loaded_plugin *lp)
{
	for (size_t j = 0; j < lp->n_metrics; j++) {
		ktel_metric_pull__free(lp->metrics[j].mp);
		lp->metrics[j].mp = NULL;
		/* Normally freed already (unload, shutdown), while the loop runs
		 * to close its handle. */
		ktel_stream_reader__free(lp->metrics[j].sr);
		lp->metrics[j].sr = NULL;
	}
	ktel_bpf_plugin__free(lp->bpf); /* detaches; pins stay */
	lp->bpf = NULL;
	ktel_plugin__free(lp->plugin);
	lp->plugin = NULL;
}

static void free_plugin(struct daemon_plugins *p, struct ktel_loaded_plugin *lp)
{
	release_plugin_code(lp);
	if (p->ops && p->ops->plugin_freed)
		p->ops->plugin_freed(lp);
	free(lp->metrics);
	free(lp);
}

static void on_unloaded_timer_closed(uv_handle_t *h)
{
	struct ktel_metric *m = h->data;
	struct ktel_loaded_plugin *lp = m->lp;

	if (--lp->pending_closes == 0)
		free_plugin(&m->daemon->plugins, lp);
}

/*
 * Take plugin i out of the daemon: pull what its enabled metrics hold (so
 * nothing is lost), detach, and dlclose it at once - a new version of the
 * file may be opened next, and must not find this one still loaded. Only lp
 * and its timers wait for the loop to close them.
 */
static void unload_plugin(struct daemon_plugins *p, size_t i, const char *why)
{
	struct ktel_loaded_plugin *lp = p->items[i];
	struct ktel_err err;

	ktel_log(KTEL_LOG_INFO, "plugin %s: unloading: %s", lp->path, why);
	for (size_t j = 0; j < lp->n_metrics; j++) {
		struct ktel_metric *m = &lp->metrics[j];

		if (m->enabled && p->ops->disable(p->d, m, &err))
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
		/* Points into the plugin, which is released below. */
		m->md = NULL;
	}
	memmove(&p->items[i], &p->items[i + 1], (p->n - i - 1) * sizeof(lp));
	p->n--;
	release_plugin_code(lp);
	if (!lp->pending_closes)
		free_plugin(p, lp);
}

static struct ktel_loaded_plugin *plugin_by_path(struct daemon_plugins *p, const char *path,
						 size_t *ret_index)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->items[i]->path, path) == 0) {
			*ret_index = i;
			return p->items[i];
		}
	return NULL;
}

/* For the loader's scan: a loaded plugin's file is current (see drop_stale). */
static bool is_loaded(const char *path, void *ctx)
{
	size_t idx;

	return plugin_by_path(ctx, path, &idx) != NULL;
}

static const char *metric_owner(const char *metric, void *ctx)
{
	struct ktel_metric *m = daemon_plugins__metric(ctx, metric);

	return m ? m->lp->path : NULL;
}

static void on_rescan_timer(uv_timer_t *t);

/*
 * Plugin names are a namespace, and pins are named after them: a plugin
 * whose name, a metric name or a pin is taken by a loaded plugin would share
 * that plugin's maps and count its events twice (or steal them). Returns 0,
 * or -EEXIST after refusing plugin with a reason naming both files.
 */
static int check_collisions(struct daemon_plugins *p, const struct ktel_plugin *plugin)
{
	const struct ktel_plugin_desc *desc = &plugin->desc;
	char pin[2 * KTEL_PLUGIN_NAME_MAX + 8];

	for (size_t i = 0; i < p->n; i++) {
		const struct ktel_loaded_plugin *lp = p->items[i];

		if (strcmp(lp->plugin->desc.name, desc->name) == 0) {
			refuse(p, plugin->path,
			       "%s: refused: plugin name %s is taken by %s "
			       "(loaded first; plugin names must be unique)",
			       plugin->path, desc->name, lp->path);
			return -EEXIST;
		}
		if (ktel_bpf_pins_collide(plugin, lp->plugin, pin, sizeof(pin))) {
			refuse(p, plugin->path,
			       "%s: refused: its pin %s/%s would be that of %s "
			       "(plugin %s)",
			       plugin->path, p->d->cfg->pin_root, pin, lp->path,
			       lp->plugin->desc.name);
			return -EEXIST;
		}
	}
	for (uint32_t j = 0; j < desc->n_metrics; j++) {
		struct ktel_metric *m = daemon_plugins__metric(p, desc->metrics[j].name);

		if (m) {
			refuse(p, plugin->path,
			       "%s: refused: duplicate metric name %s (already "
			       "provided by %s)",
			       plugin->path, desc->metrics[j].name, m->lp->path);
			return -EEXIST;
		}
	}
	return 0;
}

/* Plugins opened by one rescan, waiting to be loaded. */
struct candidates {
	struct ktel_plugin **items;
	size_t n, cap;
};

/*
 * A plugin a rescan unloaded because its file was replaced: its plugin name
 * stays with its path for that rescan, so the new version wins over a
 * newcomer of the same name whatever order the directories list them in.
 */
struct held_name {
	char name[KTEL_PLUGIN_NAME_MAX + 1];
	char *path;
};

struct held_names {
	struct held_name *items;
	size_t n;
};

static void held_names__free(struct held_names *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->items[i].path);
	free(h->items);
}

static bool held_by(const struct held_names *h, const struct ktel_plugin *plugin)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->items[i].name, plugin->desc.name) == 0 &&
		    strcmp(h->items[i].path, plugin->path) == 0)
			return true;
	return false;
}

/*
 * Open the plugins of dir that are not loaded (the loader checks, validates
 * and refuses duplicates of loaded metric names) and add them to c. Fails
 * only when dir cannot be read.
 */
static int scan_dir(struct daemon_plugins *p, const char *dir, struct candidates *c,
		    struct ktel_err *err)
{
	struct ktel_plugin_scan_opts opts = {
		.max_plugins = MAX_PLUGINS - p->n, /* 0: load_plugin refuses */
		.on_refusal = on_refusal,
		.skip = is_loaded,
		.metric_owner = metric_owner,
		.ctx = p,
	};
	struct ktel_plugin_list *list;
	int r = ktel_plugin_dir__scan(dir, &opts, &list, err);

	if (r)
		return r;
	/* A file still being written is tried again once it can be quiet. */
	if (list->n_not_quiet && p->rescan_timer_init && !p->d->shutting_down)
		uv_timer_start(&p->rescan_timer, on_rescan_timer, KTEL_PLUGIN_QUIET_MS, 0);
	for (size_t i = 0; i < list->n; i++) {
		if (c->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 16;
			struct ktel_plugin **items = realloc(c->items, cap * sizeof(*items));

			if (!items)
				break; /* the rest are freed with the list */
			c->items = items;
			c->cap = cap;
		}
		c->items[c->n++] = list->items[i];
		list->items[i] = NULL;
	}
	ktel_plugin_list__free(list);
	return 0;
}

/*
 * Load the candidates, each checked against the plugins loaded so far: first
 * those whose name a replaced file of theirs held, then the others in
 * directory and file name order. Every candidate is loaded or freed.
 */
static void load_candidates(struct daemon_plugins *p, struct candidates *c,
			    const struct held_names *held, int *changes)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < c->n; i++) {
			struct ktel_plugin *plugin = c->items[i];

			if (!plugin || held_by(held, plugin) != (pass == 0))
				continue;
			c->items[i] = NULL;
			if (check_collisions(p, plugin) || load_plugin(p, plugin))
				ktel_plugin__free(plugin);
			else
				(*changes)++;
		}
	free(c->items);
}

/* Is the file at path still the one lp was loaded from? */
static bool same_file(const struct ktel_loaded_plugin *lp, const struct stat *st)
{
	const struct stat *was = &lp->plugin->st;

	return was->st_dev == st->st_dev && was->st_ino == st->st_ino &&
	       was->st_size == st->st_size && was->st_mtim.tv_sec == st->st_mtim.tv_sec &&
	       was->st_mtim.tv_nsec == st->st_mtim.tv_nsec;
}

static void hold_name(struct held_names *h, const struct ktel_loaded_plugin *lp)
{
	struct held_name *items = realloc(h->items, (h->n + 1) * sizeof(*items));

	if (!items)
		return;
	h->items = items;
	snprintf(items[h->n].name, sizeof(items[h->n].name), "%s", lp->plugin->desc.name);
	items[h->n].path = strdup(lp->path);
	if (items[h->n].path)
		h->n++;
}

/*
 * Unload plugins whose file is gone or changed (renamed over, or rewritten
 * in place), or whose directory left the config; a changed file's plugin
 * name goes to held. Runs before the scan, so a changed file's old library
 * is closed before its new content is opened.
 */
static int drop_stale(struct daemon_plugins *p, struct held_names *held)
{
	int changes = 0;

	for (size_t i = p->n; i-- > 0;) {
		const char *path = p->items[i]->path;
		bool listed = false;
		struct stat st;

		for (size_t k = 0; k < p->d->cfg->n_plugin_dirs; k++) {
			size_t len = strlen(p->d->cfg->plugin_dirs[k]);

			if (strncmp(path, p->d->cfg->plugin_dirs[k], len) == 0 && path[len] == '/')
				listed = true;
		}
		if (!listed) {
			unload_plugin(p, i, "directory no longer configured");
		} else if (lstat(path, &st) != 0) {
			unload_plugin(p, i, "file removed");
		} else if (!same_file(p->items[i], &st)) {
			hold_name(held, p->items[i]);
			unload_plugin(p, i, "file replaced");
		} else {
			continue;
		}
		changes++;
	}
	return changes;
}

/* Enable m at start-up or when its plugin arrives, as the config says. */
static void start_metric(struct daemon_plugins *p, struct ktel_metric *m)
{
	struct ktel_err err;

	m->started_once = true;
	if (!m->mp && !m->sr) {
		ktel_log(KTEL_LOG_INFO, "metric %s: not collected: %s", m->md->name, m->problem);
		return;
	}
	if (!ktel_config__metric_enabled(p->d->cfg, m->md->name)) {
		ktel_log(KTEL_LOG_INFO, "metric %s: disabled by the config", m->md->name);
		return;
	}
	if (p->ops->enable(p->d, m, m->lease_ms, &err)) {
		ktel_log(KTEL_LOG_ERROR, "%s", err.msg);
		return;
	}
	ktel_log(KTEL_LOG_INFO, "metric %s: collecting every %llu ms", m->md->name,
		 (unsigned long long)m->interval_ms);
}

/*
 * Bring the loaded plugins in line with the plugin directories; stores the
 * number of changes. A directory that cannot be read is logged and the
 * others are still scanned; returns -errno with err naming the first such
 * directory, else 0.
 */
static int rescan(struct daemon_plugins *p, int *ret_changes, struct ktel_err *err)
{
	struct held_names held = {0};
	struct candidates c = {0};
	struct ktel_err dir_err;
	struct ktel_metric *m;
	int changes, r = 0;

	refusals_unsee(p);
	changes = drop_stale(p, &held);
	for (size_t k = 0; k < p->d->cfg->n_plugin_dirs; k++) {
		if (!scan_dir(p, p->d->cfg->plugin_dirs[k], &c, &dir_err))
			continue;
		ktel_log(KTEL_LOG_ERROR, "%s", dir_err.msg);
		if (!r) {
			*err = dir_err;
			r = -dir_err.code;
		}
	}
	load_candidates(p, &c, &held, &changes);
	held_names__free(&held);
	refusals_sweep(p);
	ktel_targets__free(p->targets);
	p->targets = NULL;
	/* Start the metrics of plugins that arrived with this scan. */
	for_each_metric (p, m)
		if (!m->enabled && !m->started_once)
			start_metric(p, m);
	/* Loads parse the kernel's BTF (megabytes, freed by now): hand it back. */
	if (changes)
		ktel_memory__release();
	*ret_changes = changes;
	return r;
}

int daemon_plugins__rescan(struct daemon_plugins *p)
{
	struct ktel_err err;
	int changes;

	/* An unreadable directory is logged; the plugins of the others run. */
	rescan(p, &changes, &err);
	return changes;
}

int ktel_daemon__rescan_plugins(struct ktel_daemon *d)
{
	return daemon_plugins__rescan(&d->plugins);
}

static void on_rescan_timer(uv_timer_t *t)
{
	struct daemon_plugins *p = t->data;
	int changes = daemon_plugins__rescan(p);

	if (changes)
		ktel_log(KTEL_LOG_INFO, "plugin directories: %d change%s applied", changes,
			 changes == 1 ? "" : "s");
}

static void on_dir_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
	struct daemon_plugins *p = h->data;

	/* Debounce: a copy is many events; rescan once it is quiet. */
	if (!p->d->shutting_down)
		uv_timer_start(&p->rescan_timer, on_rescan_timer, 300, 0);
}

static void close_watchers(struct daemon_plugins *p)
{
	for (size_t i = 0; i < p->n_watchers; i++)
		uv_close((uv_handle_t *)&p->watchers[i], NULL);
	p->n_watchers = 0;
}

void daemon_plugins__watch(struct daemon_plugins *p)
{
	size_t n = p->d->cfg->n_plugin_dirs;

	close_watchers(p);
	/* Closing handles still live in the old array until their close
	 * callbacks ran: retire it, free it with the part. */
	free(p->retired_watchers);
	p->retired_watchers = p->watchers;
	p->watchers = calloc(n ? n : 1, sizeof(*p->watchers));
	if (!p->watchers)
		return;
	for (size_t i = 0; i < n; i++) {
		uv_fs_event_t *w = &p->watchers[i];
		int r;

		uv_fs_event_init(p->d->loop, w);
		w->data = p;
		r = uv_fs_event_start(w, on_dir_event, p->d->cfg->plugin_dirs[i], 0);
		if (r)
			ktel_log(KTEL_LOG_WARN, "plugin directory %s: not watched for drop-ins: %s",
				 p->d->cfg->plugin_dirs[i], uv_strerror(r));
		/* Every initialised handle is closed by close_watchers. */
		p->n_watchers = i + 1;
	}
}

/* ---- the part --------------------------------------------------------------- */

int daemon_plugins__init(struct daemon_plugins *p, struct ktel_daemon *d,
			 const struct daemon_plugins_ops *ops, struct ktel_err *err)
{
	p->d = d;
	p->ops = ops;
	/* Fail now, clearly, when the kernel has no readable BTF; the
	 * start-up scan then borrows it. */
	p->targets = ktel_targets__new(NULL, err);
	if (!p->targets)
		return -err->code;
	uv_timer_init(d->loop, &p->rescan_timer);
	p->rescan_timer.data = p;
	p->rescan_timer_init = true;
	return 0;
}

int daemon_plugins__load(struct daemon_plugins *p, struct ktel_err *err)
{
	int changes, r;

	r = rescan(p, &changes, err);
	if (r)
		return r;
	daemon_plugins__watch(p);
	if (!p->n)
		ktel_log(KTEL_LOG_WARN, "no plugin loaded from %zu plugin director%s",
			 p->d->cfg->n_plugin_dirs, p->d->cfg->n_plugin_dirs == 1 ? "y" : "ies");
	return 0;
}

void daemon_plugins__stop_counting(struct daemon_plugins *p)
{
	struct ktel_metric *m;

	for (size_t i = 0; i < p->n; i++)
		if (p->items[i]->bpf)
			ktel_bpf_plugin__detach_all(p->items[i]->bpf);
	for_each_metric (p, m)
		if (m->enabled)
			ktel_stream_reader__stop(m->sr);
}

static void close_metric(struct ktel_metric *m, bool flush_streams)
{
	/* The last events go to the sinks before they close (not after a
	 * failed start: it writes nothing); the reader frees itself when the
	 * loop closes its handle. */
	if (flush_streams)
		ktel_stream_reader__stop(m->sr);
	ktel_stream_reader__free(m->sr);
	m->sr = NULL;
	if (!m->timers_init)
		return;
	uv_close((uv_handle_t *)&m->timer, NULL);
	uv_close((uv_handle_t *)&m->lease_timer, NULL);
	m->timers_init = false;
}

void daemon_plugins__close(struct daemon_plugins *p, bool flush_streams)
{
	struct ktel_metric *m;

	for_each_metric (p, m)
		close_metric(m, flush_streams);
	if (p->rescan_timer_init) {
		uv_close((uv_handle_t *)&p->rescan_timer, NULL);
		p->rescan_timer_init = false;
	}
	close_watchers(p);
}

void daemon_plugins__free(struct daemon_plugins *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		free_plugin(p, p->items[i]);
	p->n = 0;
	free(p->watchers);
	p->watchers = NULL;
	free(p->retired_watchers);
	p->retired_watchers = NULL;
	free(p->refused);
	p->refused = NULL;
	p->n_refused = 0;
	ktel_targets__free(p->targets);
	p->targets = NULL;
}

size_t daemon_plugins__n(const struct daemon_plugins *p)
{
	return p->n;
}

struct ktel_loaded_plugin *daemon_plugins__at(const struct daemon_plugins *p, size_t i)
{
	return i < p->n ? p->items[i] : NULL;
}

struct ktel_metric *daemon_plugins__metric(const struct daemon_plugins *p, const char *name)
{
	struct ktel_metric *m;

	for_each_metric (p, m)
		if (strcmp(m->md->name, name) == 0)
			return m;
	return NULL;
}

struct ktel_metric *daemon_plugins__next_metric(const struct daemon_plugins *p,
						struct ktel_metric_iter *it)
{
	while (it->plugin < p->n) {
		struct ktel_loaded_plugin *lp = p->items[it->plugin];

		if (it->metric < lp->n_metrics)
			return &lp->metrics[it->metric++];
		it->plugin++;
		it->metric = 0;
	}
	return NULL;
}
