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
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "attr_names.h"
#include "cgroup_events.h"
#include "contain.h"
#include "label_check.h"
#include "memory.h"
#include "stream_reader.h"
#include "utf8.h"

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

static void count_unlisted(struct daemon_plugins *p);

/*
 * path was refused for reason (a whole line naming the file): keep it for
 * status and list, and log it unless this version of the file was refused
 * for the same reason before - a rescan must not repeat every refusal, but
 * a changed file, or a new reason, is news.
 */
static void note_refusal(struct daemon_plugins *p, const char *path, const char *reason)
{
	struct ktel_refusal *r;
	char shown[sizeof(r->path)], why[sizeof(r->reason)];
	struct stat st;
	bool news;

	memset(&st, 0, sizeof(st));
	(void)lstat(path, &st); /* gone: zeros, a version of its own */
	/* Kept as status and list show it: a file name is any bytes, an
	 * answer is UTF-8 JSON. */
	ktel_utf8_escape(path, shown, sizeof(shown));
	r = refusal_by_path(p, shown);
	if (!r)
		r = refusal_add(p, shown);
	if (!r) {
		count_unlisted(p);
		ktel_log(KTEL_LOG_ERROR, "%s", reason);
		return;
	}
	ktel_utf8_escape(reason, why, sizeof(why));
	news = !r->reason[0] || !same_version(r, &st) || strcmp(r->reason, why) != 0;
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	r->size = st.st_size;
	r->mtime = st.st_mtim;
	memcpy(r->reason, why, sizeof(r->reason));
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

size_t ktel_daemon__n_refused_unlisted(const struct ktel_daemon *d)
{
	return d->plugins.n_refused_unlisted;
}

/* ---- loading -------------------------------------------------------------- */

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
		json_object_foreach(mc->params, key, v) {
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

/* Does md declare an attribution dimension (KTEL_DIM_ATTRIBUTION)? */
static bool has_attr_dim(const struct ktel_metric_desc *md)
{
	for (uint32_t i = 0; md->dim_flags && i < md->n_dims; i++)
		if (md->dim_flags[i] & KTEL_DIM_ATTRIBUTION)
			return true;
	return false;
}

/* Does plugin have programs flagged KTEL_ATTR_PROG_BLKCG for metric, so
 * that its block_subject chooses between them and the bio's cgroup? */
static bool has_blkcg_progs(const struct ktel_plugin_desc *d, const char *metric)
{
	for (uint32_t i = 0; d->attr_prog_flags && i < d->n_attr_progs; i++)
		if ((d->attr_prog_flags[i] & KTEL_ATTR_PROG_BLKCG) &&
		    strcmp(d->attr_progs[i].metric, metric) == 0)
			return true;
	return false;
}

/*
 * Is the io controller enabled below the cgroup v2 root, so that `auto`
 * reads the cgroup the kernel puts in a bio? Asked at each load of a
 * plugin that can read it with a metric by cgroup: the host may move the
 * controller while the daemon runs. A failed check says no, which keeps
 * the submit programs (right on any host). The answer is logged when it
 * changes.
 */
static bool io_on_v2(struct daemon_plugins *p)
{
	struct ktel_err err;
	bool on;

	if (ktel_attr_io_on_v2(NULL, &on, &err)) {
		ktel_log(KTEL_LOG_WARN,
			 "attribution: io controller: %s (taken as not on cgroup v2)", err.msg);
		on = false;
	}
	if (p->io_on_v2_said != (on ? 2 : 1))
		ktel_log(KTEL_LOG_INFO,
			 on ? "attribution: the io controller is on cgroup v2: block I/O by cgroup "
			      "(block_subject auto) is read from the cgroup the kernel charges "
			      "each bio to"
			    : "attribution: the io controller is not on cgroup v2: block I/O by "
			      "cgroup (block_subject auto) is taken from the submitting task "
			      "(submit programs)");
	p->io_on_v2_said = on ? 2 : 1;
	return on;
}

/*
 * Metric md reads the charged cgroup at depth: say where that is coarser
 * than the depth asks, as the io controller is not enabled there (seen
 * now; the host may enable it later).
 */
static void log_io_gaps(const char *metric, uint32_t depth)
{
	struct ktel_attr_io_gaps *g = calloc(1, sizeof(*g));
	struct ktel_err err;

	if (!g)
		return;
	if (ktel_attr_io_gaps(NULL, depth, g, &err) == 0 && g->n)
		ktel_log(KTEL_LOG_INFO,
			 "metric %s: block I/O by cgroup at depth %u is the cgroup the kernel "
			 "charges, which is coarser than asked: %zu%s cgroup(s) at the levels "
			 "asked (the first: %s%s) have child cgroups but no io in their "
			 "cgroup.subtree_control, so I/O below them is counted under them "
			 "(block_subject submitter counts the submitter's own cgroup)",
			 metric, depth, g->n, g->truncated ? "+" : "", g->first,
			 strcmp(g->first, "/") == 0 ? ", the root" : "");
	free(g);
}

/*
 * Whose block I/O metric a (by cgroup, of a plugin with KTEL_ATTR_PROG_BLKCG
 * programs for it) counts, from its block_subject: sets a->blkcg to read
 * the cgroup the kernel charges. `charged` where the io controller is not
 * on cgroup v2 (a hybrid host: the bio names a v1 cgroup, whose id is no v2
 * cgroup's) leaves the metric unattributed (a->by none), logged, rather
 * than export v1 ids as v2 cgroups or count another subject than the one
 * asked for.
 */
static void choose_subject(struct daemon_plugins *p, const struct ktel_metric_cfg *mc,
			   struct ktel_bpf_attr *a)
{
	struct ktel_err err;
	bool avail = false;

	switch (mc->attr.block_subject) {
	case KTEL_ATTR_SUBJECT_SUBMITTER:
		ktel_log(KTEL_LOG_INFO,
			 "metric %s: block I/O by cgroup is the submitting task's cgroup "
			 "(block_subject submitter)",
			 a->metric);
		return;
	case KTEL_ATTR_SUBJECT_CHARGED:
		if (ktel_attr_io_v2_available(NULL, &avail, &err)) {
			ktel_log(KTEL_LOG_WARN, "attribution: io controller: %s", err.msg);
			avail = false;
		}
		if (!avail) {
			ktel_log(KTEL_LOG_WARN,
				 "metric %s: attribution refused: block_subject charged needs the "
				 "io controller on cgroup v2, and it is not there (on a v1 "
				 "hierarchy, whose cgroup ids name no v2 cgroup, or no cgroup v2 "
				 "mount): the metric is collected without attribution; "
				 "block_subject submitter or auto attributes it to the "
				 "submitter's cgroup",
				 a->metric);
			a->by = KTEL_ATTR_BY_NONE;
			return;
		}
		a->blkcg = true;
		break;
	default:
		a->blkcg = io_on_v2(p);
		break;
	}
	if (a->blkcg)
		log_io_gaps(a->metric, a->depth);
}

/*
 * The attribution settings of plugin's metrics for its load (bpf_lifecycle.h
 * struct ktel_bpf_attr), one per metric in attr. A metric the config
 * attributes whose plugin has no attribution dimension refuses the plugin:
 * a `by` silently ignored would leave the operator believing in numbers per
 * cgroup that do not exist.
 */
static int load_attr(struct daemon_plugins *p, const struct ktel_plugin *plugin,
		     struct ktel_bpf_attr *attr)
{
	const struct ktel_plugin_desc *desc = &plugin->desc;

	for (uint32_t j = 0; j < desc->n_metrics; j++) {
		const struct ktel_metric_desc *md = &desc->metrics[j];
		const struct ktel_metric_cfg *mc = ktel_config__metric(p->d->cfg, md->name);

		attr[j] = (struct ktel_bpf_attr){.metric = md->name, .map_name = md->map_name};
		if (!mc || mc->attr.by == KTEL_ATTR_BY_NONE)
			continue;
		if (!has_attr_dim(md)) {
			refuse(p, plugin->path,
			       "plugin %s: refused: metrics.%s.attribution.by: %s: metric %s of "
			       "plugin %s has no attribution dimension (KTEL_DIM_ATTRIBUTION)",
			       plugin->path, md->name, ktel_attr_by_name(mc->attr.by), md->name,
			       desc->name);
			return -EINVAL;
		}
		/* The kernel collects a class as it collects an app: the uid. */
		attr[j].by = mc->attr.by == KTEL_ATTR_BY_APP_CLASS ? KTEL_ATTR_BY_APP : mc->attr.by;
		attr[j].depth = mc->attr.depth;
		attr[j].limit = mc->attr.max_keys;
		if (!has_blkcg_progs(desc, md->name)) {
			if (mc->attr.block_subject != KTEL_ATTR_SUBJECT_AUTO)
				ktel_log(KTEL_LOG_INFO,
					 "plugin %s: metrics.%s.attribution.block_subject %s "
					 "ignored: the plugin has no programs that read a bio's "
					 "cgroup (KTEL_ATTR_PROG_BLKCG)",
					 plugin->path, md->name,
					 ktel_attr_subject_name(mc->attr.block_subject));
		} else if (attr[j].by == KTEL_ATTR_BY_CGROUP) {
			choose_subject(p, mc, &attr[j]);
		}
	}
	return 0;
}

/* The name of attribution id of metric m, or NULL. */
static const char *attr_name(struct ktel_metric *m, uint64_t id, char *buf, size_t len)
{
	struct ktel_attr_names *names = m->daemon->plugins.attr_names;

	switch (m->attr.by) {
	case KTEL_ATTR_BY_CGROUP:
		return names ? ktel_attr_names__cgroup(names, id, buf, len) : NULL;
	case KTEL_ATTR_BY_USER:
		return names ? ktel_attr_names__user(names, id, buf, len) : NULL;
	case KTEL_ATTR_BY_APP:
		return ktel_attr_app_name(id, buf, len);
	case KTEL_ATTR_BY_APP_CLASS:
		return ktel_attr_app_class_name(id, buf, len);
	case KTEL_ATTR_BY_PROCESS:
		return ktel_attr_process_name(id, buf, len);
	default:
		return NULL;
	}
}

static int cmp_gone(const void *a, const void *b)
{
	uint64_t x = ((const struct daemon_attr_gone *)a)->id;
	uint64_t y = ((const struct daemon_attr_gone *)b)->id;

	return x < y ? -1 : x > y;
}

/* The released id id among those of m's pull under way, or NULL. */
static struct daemon_attr_gone *gone_find(const struct ktel_metric *m, uint64_t id)
{
	struct daemon_attr_gone key = {.id = id};

	if (!m->n_attr_armed)
		return NULL;
	return bsearch(&key, m->attr_gone, m->n_attr_armed, sizeof(key), cmp_gone);
}

/* Names an attribution id for the fold of metric ctx (attr_fold.h). Only
 * ids with events reach here (an unchanged key makes no record): a user,
 * app or process id is noted as used for its ageing. */
static const char *resolve_attr(void *ctx, uint64_t id, char *buf, size_t len)
{
	struct ktel_metric *m = ctx;
	const struct daemon_attr_gone *g = gone_find(m, id);

	/* A released id's last events, taken with its keys: under the name it
	 * had (a released cgroup's left the names' cache). */
	if (g && g->name) {
		snprintf(buf, len, "%s", g->name);
		return buf;
	}
	if (m->attr_ids)
		ktel_attr_ids__used(m->attr_ids, id, m->attr_pull_ns);
	return attr_name(m, id, buf, len);
}

/*
 * When the names of metric ctx's ids may have changed (attr_fold.h): a
 * cgroup's name only with the names' generation, and never while released
 * ids are pulled under their old names; users, apps and processes are
 * resolved every window (their ageing is noted in resolve_attr).
 */
static uint64_t attr_generation(void *ctx)
{
	struct ktel_metric *m = ctx;
	struct ktel_attr_names *names = m->daemon->plugins.attr_names;

	if (m->attr.by != KTEL_ATTR_BY_CGROUP || !names || m->n_attr_armed)
		return 0;
	return ktel_attr_names__generation(names);
}

/* What resolve_attr does for a cgroup id named before, besides naming it. */
static bool attr_used(void *ctx, uint64_t id, uint64_t *hint)
{
	struct ktel_metric *m = ctx;

	return ktel_attr_names__cgroup_used(m->daemon->plugins.attr_names, id, hint);
}

/* attr_used's memory for hint, fetched ahead (attr_fold.h). */
static void attr_prefetch(void *ctx, uint64_t hint)
{
	struct ktel_metric *m = ctx;

	ktel_attr_names__cgroup_prefetch(m->daemon->plugins.attr_names, hint);
}

/* One of the kernel's cgroup events, to the names. */
static void on_cgroup_event(void *ctx, const struct ktel_cgroup_ev *ev)
{
	struct daemon_plugins *p = ctx;

	ktel_attr_names__cgroup_event(p->attr_names, ev, ktel_now_boottime_ns());
}

/*
 * Take the kernel's waiting cgroup events. A loss (the ring was full) is
 * said and makes the next pull walk cgroupfs; a ring that cannot be read
 * any more leaves the names to the walk alone.
 */
static void drain_cgroup_events(struct daemon_plugins *p)
{
	uint64_t lost = 0;
	int rc;

	if (!p->cgroup_events)
		return;
	rc = ktel_cgroup_events__drain(p->cgroup_events, &lost);
	if (lost) {
		ktel_attr_names__events_lost(p->attr_names);
		ktel_log(KTEL_LOG_WARN,
			 "attribution: %llu cgroup events lost (ring buffer full): cgroupfs is "
			 "walked again",
			 (unsigned long long)lost);
	}
	if (rc >= 0)
		return;
	snprintf(p->cgroup_events_problem, sizeof(p->cgroup_events_problem),
		 "cgroup events: cannot read the ring buffer: %s", strerror(-rc));
	ktel_log(KTEL_LOG_WARN, "attribution: %s: cgroup names from walks of cgroupfs alone",
		 p->cgroup_events_problem);
	if (p->cgroup_events_poll_init) {
		uv_poll_stop(&p->cgroup_events_poll);
		/* The fd stays open (in the object) until the handle closes. */
	}
	ktel_attr_names__use_events(p->attr_names, false);
}

/* A name miss: the events that came since the pull's drain. */
static void refill_names(void *ctx)
{
	drain_cgroup_events(ctx);
}

static void on_cgroup_events_ready(uv_poll_t *h, int status, int events)
{
	struct daemon_plugins *p = h->data;

	(void)status;
	(void)events;
	if (ktel_attr_names__events(p->attr_names))
		drain_cgroup_events(p);
}

void daemon_plugins__attr_begin_pull(struct daemon_plugins *p, struct ktel_metric *m)
{
	uint64_t now;

	if (!p->attr_names)
		return;
	if (ktel_attr_names__events(p->attr_names))
		drain_cgroup_events(p);
	/* After the drain: every event taken happened before this pull reads
	 * the map. */
	now = ktel_now_boottime_ns();
	m->attr_pull_ns = now;
	ktel_attr_names__begin_pull(p->attr_names, now);
}

/* Every metric attributed by cgroup and pulled has begun a pull at or
 * after this time (UINT64_MAX: there is none). */
static uint64_t cgroup_pulls_settled(const struct daemon_plugins *p)
{
	uint64_t settled = UINT64_MAX;
	struct ktel_metric *m;

	for_each_metric(p, m)
		if (m->fold && m->attr.by == KTEL_ATTR_BY_CGROUP && m->mp && m->enabled &&
		    m->attr_pull_ns < settled)
			settled = m->attr_pull_ns;
	return settled;
}

void daemon_plugins__attr_naming(const struct daemon_plugins *p, struct daemon_attr_naming *ret)
{
	*ret = (struct daemon_attr_naming){.source = "walk"};
	if (!p->attr_names)
		return;
	ret->active = true;
	ktel_attr_names__stats(p->attr_names, &ret->names);
	if (p->cgroup_events)
		ktel_cgroup_events__stats(p->cgroup_events, &ret->events);
	if (ktel_attr_names__events(p->attr_names))
		ret->source = "events";
	else if (p->cgroup_events_problem[0])
		ret->problem = p->cgroup_events_problem;
}

/* Pulls that take a released id's keys: the first, and two more for a key
 * an event made again after it (an I/O that completes after its issuer's
 * cgroup was released); a pull that finds no key of the id ends it. */
#define GONE_PULLS 3

/* Released id (named name, or NULL) for m's pulls to take out of its map. */
static void gone_add(struct ktel_metric *m, uint64_t id, const char *name)
{
	struct daemon_attr_gone *g;

	if (m->n_attr_gone == m->cap_attr_gone) {
		size_t cap = m->cap_attr_gone ? m->cap_attr_gone * 2 : 64;

		g = realloc(m->attr_gone, cap * sizeof(*g));
		/* Out of memory: the id's keys stay (their slots taken) until
		 * the daemon restarts; nothing is miscounted. */
		if (!g)
			return;
		m->attr_gone = g;
		m->cap_attr_gone = cap;
	}
	g = &m->attr_gone[m->n_attr_gone];
	*g = (struct daemon_attr_gone){.id = id, .pulls = GONE_PULLS};
	/* Without the name the id's last events are "unknown": counted all
	 * the same. */
	g->name = name ? strdup(name) : NULL;
	m->n_attr_gone++;
}

static void gone_free(struct ktel_metric *m)
{
	for (size_t i = 0; i < m->n_attr_gone; i++)
		free(m->attr_gone[i].name);
	free(m->attr_gone);
	m->attr_gone = NULL;
	m->n_attr_gone = m->cap_attr_gone = m->n_attr_armed = 0;
}

/* A sweep's context: the metric, its grace period and the time. */
struct sweep {
	struct ktel_metric *m;
	uint64_t now, grace;
	const char *name; /* carried(): the name looked for */
	char buf[KTEL_ATTR_NAME_MAX + 1];
};

/*
 * Is a user, app or process id gone: a process whose tgid with that start
 * time no longer exists and that had no events since the last sweep (an
 * I/O it issued may complete after its exit); a user or app without
 * events for the grace period.
 */
static bool id_gone(void *ctx, uint64_t id, uint64_t used_ns)
{
	struct sweep *s = ctx;

	if (id == KTEL_ATTR_OVERFLOW_ID || id == KTEL_ATTR_UNKNOWN_ID)
		return false;
	if (s->m->attr.by == KTEL_ATTR_BY_PROCESS)
		return used_ns < s->m->attr_sweep_ns && !ktel_attr_process_alive(NULL, id);
	return s->now > s->grace && used_ns < s->now - s->grace;
}

/* Does id (one still tracked) carry the name looked for? */
static bool carried(void *ctx, uint64_t id)
{
	struct sweep *s = ctx;
	char buf[KTEL_ATTR_NAME_MAX + 1];
	const char *name = attr_name(s->m, id, buf, sizeof(buf));

	return name && strcmp(name, s->name) == 0;
}

/*
 * Ageing of m's user, app or process ids, at most four times per grace
 * period: the ids gone go the cgroups' way (their names' series end unless
 * another id of m carries the name - every app of app_class is "app" -,
 * m's next pull takes their keys out of its map).
 */
static void sweep_ids(struct daemon_plugins *p, struct ktel_metric *m)
{
	struct sweep s = {.m = m,
			  .now = ktel_now_boottime_ns(),
			  .grace = p->d->cfg->attr_release_after_ms * 1000000ULL};
	const uint64_t *gone;
	size_t n;

	if (!m->attr_ids || !m->fold || s.now - m->attr_sweep_ns < s.grace / 4)
		return;
	n = ktel_attr_ids__sweep(m->attr_ids, id_gone, &s, &gone);
	m->attr_sweep_ns = s.now;
	for (size_t i = 0; i < n; i++) {
		s.name = attr_name(m, gone[i], s.buf, sizeof(s.buf));
		if (s.name && !ktel_attr_ids__any(m->attr_ids, carried, &s))
			ktel_attr_fold__release(m->fold, s.name);
		gone_add(m, gone[i], s.name);
	}
	m->attr_ids_released += n;
	if (n)
		ktel_log(KTEL_LOG_DEBUG, "metric %s: attribution: %zu %s ids released", m->md->name,
			 n, ktel_attr_by_name(m->attr.by));
}

void daemon_plugins__attr_take_released(struct daemon_plugins *p)
{
	const struct ktel_attr_released *rel;
	struct ktel_metric *m;
	size_t n;

	if (!p->attr_names)
		return;
	for_each_metric(p, m)
		sweep_ids(p, m);
	/* Released by their events: once every metric attributed by cgroup
	 * has pulled since, so each named the cgroup's last events. */
	ktel_attr_names__settle(p->attr_names, cgroup_pulls_settled(p));
	n = ktel_attr_names__released(p->attr_names, &rel);
	if (!n)
		return;
	for_each_metric(p, m) {
		if (!m->fold || m->attr.by != KTEL_ATTR_BY_CGROUP)
			continue;
		for (size_t i = 0; i < n; i++) {
			/* A restarted service's new cgroup carries the name:
			 * its series go on. */
			if (rel[i].name && !rel[i].carried)
				ktel_attr_fold__release(m->fold, rel[i].name);
			gone_add(m, rel[i].id, rel[i].name);
		}
	}
	ktel_log(KTEL_LOG_DEBUG, "attribution: %zu cgroups released", n);
	ktel_attr_names__clear_released(p->attr_names);
}

/* Is id one of the released ids of m's pull (metric_pull.h)? Its key is
 * then taken. */
static bool id_released(void *ctx, uint64_t id)
{
	struct daemon_attr_gone *g = gone_find(ctx, id);

	if (!g)
		return false;
	g->found = true;
	return true;
}

void daemon_plugins__attr_arm(struct ktel_metric *m)
{
	size_t n = 0;

	m->n_attr_armed = 0;
	if (!m->n_attr_gone || !m->mp)
		return;
	qsort(m->attr_gone, m->n_attr_gone, sizeof(*m->attr_gone), cmp_gone);
	/* An id released again (a user quiet once more) is taken for as many
	 * pulls as a new one, under its latest name. */
	for (size_t i = 0; i < m->n_attr_gone; i++) {
		struct daemon_attr_gone *g = &m->attr_gone[i];

		if (n && m->attr_gone[n - 1].id == g->id) {
			struct daemon_attr_gone *kept = &m->attr_gone[n - 1];

			if (g->name) {
				free(kept->name);
				kept->name = g->name;
			}
			if (g->pulls > kept->pulls)
				kept->pulls = g->pulls;
			continue;
		}
		m->attr_gone[n++] = *g;
	}
	for (size_t i = 0; i < n; i++)
		m->attr_gone[i].found = false;
	m->n_attr_gone = m->n_attr_armed = n;
	ktel_metric_pull__attr_release(m->mp, id_released, m);
}

void daemon_plugins__attr_taken(struct ktel_metric *m, bool pulled)
{
	size_t armed = m->n_attr_armed, n = 0, deleted;
	int rc;

	if (!armed || !m->mp)
		return;
	deleted = ktel_metric_pull__attr_taken(m->mp, &rc);
	m->n_attr_armed = 0;
	if (rc)
		ktel_complain(&m->complaint, KTEL_LOG_WARN,
			      "metric %s: attribution: cannot delete a released id's keys: %s",
			      m->md->name, strerror(-rc));
	m->attr_keys_deleted += deleted;
	ktel_log(KTEL_LOG_DEBUG, "metric %s: attribution: %zu released ids, %zu keys deleted",
		 m->md->name, armed, deleted);
	/* A failed pull may not have read the map: every id waits for the
	 * next (one whose keys it took finds none then, and ends). */
	if (!pulled)
		return;
	for (size_t i = 0; i < m->n_attr_gone; i++) {
		struct daemon_attr_gone *g = &m->attr_gone[i];

		/* Those released during this pull wait for the next. */
		if (i >= armed || (g->found && --g->pulls > 0))
			m->attr_gone[n++] = *g;
		else
			free(g->name);
	}
	m->n_attr_gone = n;
}

/*
 * The kernel's cgroup events for the names, and the loop's poll of their
 * ring. Where they cannot load (no BTF for the tracepoints, an older
 * kernel, no privilege) the walk names cgroups alone, which is said once
 * and in status.
 */
static void open_cgroup_events(struct daemon_plugins *p)
{
	struct ktel_err err;
	int fd;

	if (ktel_cgroup_events__open(on_cgroup_event, p, &p->cgroup_events, &err)) {
		snprintf(p->cgroup_events_problem, sizeof(p->cgroup_events_problem), "%s", err.msg);
		ktel_log(KTEL_LOG_WARN,
			 "attribution: %s: cgroup names from walks of cgroupfs alone (a cgroup "
			 "made and removed between two walks is unknown)",
			 err.msg);
		return;
	}
	fd = ktel_cgroup_events__fd(p->cgroup_events);
	if (uv_poll_init(p->d->loop, &p->cgroup_events_poll, fd) == 0) {
		p->cgroup_events_poll.data = p;
		p->cgroup_events_poll_init = true;
		uv_poll_start(&p->cgroup_events_poll, UV_READABLE, on_cgroup_events_ready);
	}
	ktel_attr_names__use_events(p->attr_names, true);
	ktel_attr_names__set_refill(p->attr_names, refill_names, p);
	ktel_log(KTEL_LOG_INFO, "attribution: cgroup names from the kernel's cgroup events");
}

/* The names cache, made at the first attributed metric. Without a cgroup2
 * mount cgroup ids stay unnamed ("unknown"), which is said once. */
static void need_attr_names(struct daemon_plugins *p)
{
	struct ktel_attr_names_opts none = {.cgroup_root = ""};
	struct ktel_attr_names_opts opts = {
		.grace_ns = p->d->cfg->attr_release_after_ms * 1000000ULL,
	};
	struct ktel_err err;

	if (p->attr_names)
		return;
	none.grace_ns = opts.grace_ns;
	if (ktel_attr_names__new(&opts, &p->attr_names, &err) == 0) {
		open_cgroup_events(p);
		return;
	}
	ktel_log(KTEL_LOG_WARN, "%s", err.msg);
	snprintf(p->cgroup_events_problem, sizeof(p->cgroup_events_problem), "%s", err.msg);
	if (ktel_attr_names__new(&none, &p->attr_names, &err))
		ktel_log(KTEL_LOG_ERROR, "attribution: %s", err.msg);
}

/* m's fold, when its config attributes it. */
static int make_fold(struct daemon_plugins *p, struct ktel_metric *m, struct ktel_err *err)
{
	struct ktel_attr_fold_opts fo = {
		.dim_name = ktel_attr_by_name(m->attr.by),
		.top = m->attr.top,
		.sticky_windows = m->attr.sticky_windows,
		.churn_per_hour = m->attr.churn_per_hour,
		.resolve = resolve_attr,
		.resolve_ctx = m,
		.generation = attr_generation,
		.used = attr_used,
		.prefetch = attr_prefetch,
	};

	if (m->attr.by == KTEL_ATTR_BY_NONE)
		return 0;
	need_attr_names(p);
	if (m->attr.by != KTEL_ATTR_BY_CGROUP && ktel_attr_ids__new(&m->attr_ids))
		return ktel_err_set(err, ENOMEM, "metric %s: attribution: out of memory",
				    m->md->name);
	return ktel_attr_fold__new(&fo, &m->fold, err);
}

/* m of lp, md attributed as a says (load_attr: a->by is none where the
 * config's attribution was refused). */
static void init_metric(struct daemon_plugins *p, struct ktel_loaded_plugin *lp,
			struct ktel_metric *m, const struct ktel_metric_desc *md,
			const struct ktel_bpf_attr *a)
{
	const struct ktel_metric_cfg *mc = ktel_config__metric(p->d->cfg, md->name);

	m->daemon = p->d;
	m->lp = lp;
	m->md = md;
	m->interval_ms = ktel_config__metric_interval(p->d->cfg, md->name);
	m->lease_ms = mc ? mc->lease_ms : 0;
	if (mc && has_attr_dim(md)) {
		m->attr_asked = mc->attr;
		if (a->by != KTEL_ATTR_BY_NONE)
			m->attr = mc->attr;
	}
	if (a->by != KTEL_ATTR_BY_NONE && has_blkcg_progs(&lp->plugin->desc, md->name))
		m->block_subject = a->blkcg ? KTEL_ATTR_SUBJECT_CHARGED
					    : KTEL_ATTR_SUBJECT_SUBMITTER;
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
		struct ktel_metric_pull_opts popts = {
			.attr_name = m->attr.by != KTEL_ATTR_BY_NONE ? ktel_attr_by_name(m->attr.by)
								     : NULL,
		};
		if (ktel_metric_pull__new_opts(m->md, lp->bpf->obj, bm && !bm->reused, &popts,
					       &m->mp, &err) ||
		    make_fold(p, m, &err)) {
			ktel_metric_pull__free(m->mp);
			m->mp = NULL;
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
	struct ktel_bpf_attr attr[KTEL_PLUGIN_MAX_METRICS];
	struct ktel_bpf_opts bopts = {
		.pin_root = p->d->cfg->pin_root,
		.pin_gid = p->d->cfg->pin_gid,
		.targets = p->targets,
		.param_values = params,
		.no_attach = true,
		.attr = attr,
		.n_attr = plugin->desc.n_metrics,
		.attr_memlock_budget = p->d->cfg->attr_memlock_budget,
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
	if (load_params(p, plugin, params) || load_attr(p, plugin, attr))
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
		init_metric(p, lp, &lp->metrics[i], &plugin->desc.metrics[i], &attr[i]);
	p->items[p->n++] = lp;
	log_plugin(lp);
	/* Once per load: at start, at a reload's rescan, for a drop-in. */
	for (size_t i = 0; i < lp->n_metrics; i++)
		ktel_label_check__metric(p->d->cfg, &plugin->desc.metrics[i], ktel_label_check__log,
					 NULL);
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
		ktel_attr_fold__free(lp->metrics[j].fold);
		ktel_attr_ids__free(lp->metrics[j].attr_ids);
		lp->metrics[j].attr_ids = NULL;
		lp->metrics[j].fold = NULL;
		gone_free(&lp->metrics[j]);
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
	h->items = NULL;
	h->n = 0;
}

static bool held_by(const struct held_names *h, const struct ktel_plugin *plugin)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->items[i].name, plugin->desc.name) == 0 &&
		    strcmp(h->items[i].path, plugin->path) == 0)
			return true;
	return false;
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

/* ---- intake: a scan that never holds the loop -------------------------------- */

/*
 * Opening a file is the slow part of a scan: it reads and validates the
 * whole file and has libbpf parse the embedded object in a contained child
 * (contain.h), which may hang until KTEL_CONTAIN_TIMEOUT_MS kills it. So the
 * opens run on threads of their own ("ktel-intake"), INTAKE_OPENS at a
 * time, the other files queued behind them (one more thread parses the
 * kernel's BTF for the loads, so that never waits behind a hanging open); the loop only lists the
 * directories, notes each answer and then loads the opened plugins into the
 * kernel in slices of INTAKE_SLICE_MS, serving control requests and pulls in
 * between. A hang then costs one intake thread its timeout, never the loop,
 * and never libuv's pool (one thread, which compressions and name lookups
 * need). An open's BTF check calls libbpf's btf__new and btf__free while
 * the loop may be loading an earlier plugin: the kernel's BTF lent to those
 * loads is kept under a lock (vmlinux_btf.c, which the interposed btf__free
 * asks) and libbpf's log buffers are per thread (bpf_lifecycle.c). The
 * threads start
 * with the first rescan after start-up, so they
 * inherit the loop thread's privileges as dropped (privileges.h). The
 * start-up scan runs the same steps inline, before the control socket opens.
 */
#define INTAKE_OPENS 2
#define INTAKE_THREADS (INTAKE_OPENS + 1)
#define INTAKE_SLICE_MS 10

/* Work for an intake thread: work() there, done() on the loop after. */
struct intake_task {
	struct intake_task *next;
	void (*work)(struct intake_task *task);
	void (*done)(struct intake_task *task);
};

/*
 * The intake threads and their queues. A finished task goes on the done
 * list and the async handle wakes the loop, which runs its done(); the
 * handle is referenced only while tasks are in flight, so an idle daemon's
 * loop neither wakes nor waits for it.
 */
struct intake_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct intake_task *queued, **queued_tail;
	struct intake_task *done, **done_tail;
	pthread_t threads[INTAKE_THREADS];
	int n_threads;
	bool stop;
	uv_async_t async;
	bool async_init, closing;
	unsigned in_flight; /* submitted, done() not yet run */
};

static void *intake_thread(void *arg)
{
	struct intake_pool *pool = arg;
	struct intake_task *task;
	sigset_t all;

	/* Signals are the loop's (libuv's handlers); a contained child resets
	 * its mask anyway. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (!pool->queued && !pool->stop)
			pthread_cond_wait(&pool->cond, &pool->lock);
		task = pool->queued;
		if (!task)
			break;
		pool->queued = task->next;
		if (!pool->queued)
			pool->queued_tail = &pool->queued;
		pthread_mutex_unlock(&pool->lock);
		task->work(task);
		pthread_mutex_lock(&pool->lock);
		task->next = NULL;
		*pool->done_tail = task;
		pool->done_tail = &task->next;
		/* Under the lock: the loop cannot see the task done, and close
		 * the handle, before this send. */
		uv_async_send(&pool->async);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

static void on_intake_async(uv_async_t *a)
{
	struct intake_pool *pool = a->data;
	struct intake_task *task, *next;

	pthread_mutex_lock(&pool->lock);
	task = pool->done;
	pool->done = NULL;
	pool->done_tail = &pool->done;
	pthread_mutex_unlock(&pool->lock);
	for (; task; task = next) {
		next = task->next;
		pool->in_flight--;
		task->done(task);
	}
	if (!pool->in_flight && pool->async_init) {
		if (pool->closing) {
			uv_close((uv_handle_t *)&pool->async, NULL);
			pool->async_init = false;
		} else {
			uv_unref((uv_handle_t *)&pool->async);
		}
	}
}

static int intake_pool__init(struct intake_pool *pool, uv_loop_t *loop)
{
	int r;

	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->cond, NULL);
	pool->queued_tail = &pool->queued;
	pool->done_tail = &pool->done;
	r = uv_async_init(loop, &pool->async, on_intake_async);
	if (r)
		return r;
	pool->async.data = pool;
	pool->async_init = true;
	uv_unref((uv_handle_t *)&pool->async);
	return 0;
}

/* Run task on an intake thread (started on first use); -errno when none
 * can be started. */
static int intake_pool__submit(struct intake_pool *pool, struct intake_task *task)
{
	if (pool->closing || !pool->async_init)
		return -ESHUTDOWN;
	while (pool->n_threads < INTAKE_THREADS) {
		if (pthread_create(&pool->threads[pool->n_threads], NULL, intake_thread, pool))
			break;
		pthread_setname_np(pool->threads[pool->n_threads], "ktel-intake");
		pool->n_threads++;
	}
	if (!pool->n_threads)
		return -EAGAIN;
	task->next = NULL;
	pthread_mutex_lock(&pool->lock);
	*pool->queued_tail = task;
	pool->queued_tail = &task->next;
	pthread_cond_signal(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	if (pool->in_flight++ == 0)
		uv_ref((uv_handle_t *)&pool->async);
	return 0;
}

/* The loop is closing: the handle goes once the tasks in flight are done
 * (each within its timeout), and the loop runs until then. */
static void intake_pool__close(struct intake_pool *pool)
{
	pool->closing = true;
	if (pool->async_init && !pool->in_flight) {
		uv_close((uv_handle_t *)&pool->async, NULL);
		pool->async_init = false;
	}
}

/* After the loop ended: the threads are idle; join them. */
static void intake_pool__free(struct intake_pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	pool->stop = true;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	for (int i = 0; i < pool->n_threads; i++)
		pthread_join(pool->threads[i], NULL);
	pool->n_threads = 0;
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->cond);
}

/* One file of the scan under way. */
struct intake_file {
	char *path;
	struct ktel_plugin *plugin; /* opened, waiting to be loaded */
	bool answered;
};

/* One open on an intake thread: owns its copy of the path and its answer until the
 * loop takes them, so the thread shares nothing with the loop. */
struct intake_job {
	struct intake_task task;
	struct plugin_intake *in;
	size_t index;
	char *path;
	struct ktel_plugin *plugin;
	int rc;
	struct ktel_err err;
};

struct plugin_intake {
	struct daemon_plugins *p;
	struct intake_file *files; /* directory, then file name order */
	size_t n, cap;
	/* next_open: the next file to open; n_ready: the files before it
	 * have all answered. */
	size_t next_open, n_ready;
	unsigned in_flight;
	/* Loading: pass 0 takes the plugins whose name a replaced file of
	 * theirs held (once those files answered), pass 1 the others, in
	 * order, as far as the files have answered; next_load is the next
	 * file. slice_pending: the next slice waits for the next loop turn. */
	int load_pass;
	size_t next_load;
	bool slice_pending;
	struct held_names held;
	int changes;
	size_t n_not_quiet, n_unlisted;
	/* running: a scan is under way; again: another was asked for
	 * meanwhile; inline: the start-up scan, run to its end at once. */
	bool running, again, inline_, closing;
	/* The kernel's BTF is being parsed on an intake thread for the loads
	 * (or was: tried). */
	bool targets_pending, targets_tried;
	struct intake_pool pool;
	/* Continues the loading, or starts the scan asked for meanwhile, on
	 * the next loop turn. */
	uv_timer_t next_turn;
	bool next_turn_init;
};

static void intake_begin_async(struct plugin_intake *in);

/* A refusal found no room in the list: counted (per scan while one runs),
 * so status says how many it does not list. */
static void count_unlisted(struct daemon_plugins *p)
{
	if (p->intake && p->intake->running)
		p->intake->n_unlisted++;
	else
		p->n_refused_unlisted++;
}

static void intake_clear(struct plugin_intake *in)
{
	for (size_t i = 0; i < in->n; i++) {
		free(in->files[i].path);
		ktel_plugin__free(in->files[i].plugin);
	}
	in->n = in->next_open = in->n_ready = in->next_load = 0;
	in->slice_pending = in->targets_tried = false;
	in->load_pass = 0;
	held_names__free(&in->held);
	in->changes = 0;
	in->n_not_quiet = in->n_unlisted = 0;
}

/* Queue path (taken) for opening. */
static int intake_add(struct plugin_intake *in, char *path)
{
	if (in->n == in->cap) {
		size_t cap = in->cap ? 2 * in->cap : 64;
		struct intake_file *files = realloc(in->files, cap * sizeof(*files));

		if (!files) {
			free(path);
			return -ENOMEM;
		}
		in->files = files;
		in->cap = cap;
	}
	in->files[in->n].path = path;
	in->files[in->n].plugin = NULL;
	in->files[in->n].answered = false;
	in->n++;
	return 0;
}

/* Queue the files of dir that are not loaded. Fails only when dir cannot
 * be read. */
static int intake_list(struct plugin_intake *in, const char *dir, struct ktel_err *err)
{
	char **names = NULL, *path;
	size_t n = 0;
	int r = ktel_plugin_dir__names(dir, &names, &n, err);

	if (r)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (asprintf(&path, "%s/%s", dir, names[i]) < 0 || intake_add(in, path)) {
			ktel_log(KTEL_LOG_ERROR, "%s: out of memory: %zu plugin files not examined",
				 dir, n - i);
			break;
		}
		/* A loaded plugin's file is current (see drop_stale). */
		if (is_loaded(path, in->p)) {
			free(path);
			in->n--;
		}
	}
	ktel_plugin_dir__names_free(names, n);
	return 0;
}

/* The answer for file i came back (on the loop): a plugin to load later, a
 * file still being written (tried again later, not refused), or a refusal. */
static void intake_opened(struct plugin_intake *in, size_t i, struct ktel_plugin *plugin, int rc,
			  const struct ktel_err *err)
{
	in->files[i].answered = true;
	while (in->n_ready < in->n && in->files[in->n_ready].answered)
		in->n_ready++;
	if (rc == -EAGAIN) {
		in->n_not_quiet++;
		return;
	}
	if (rc) {
		note_refusal(in->p, in->files[i].path, err->msg);
		return;
	}
	in->files[i].plugin = plugin;
}

/* On an intake thread: nothing of the daemon is touched, nothing logged. */
static void intake_open_work(struct intake_task *task)
{
	struct intake_job *job = (struct intake_job *)task;

	job->rc = ktel_plugin__open(job->path, &job->plugin, &job->err);
}

static void intake_pump(struct plugin_intake *in);

static void intake_open_done(struct intake_task *task)
{
	struct intake_job *job = (struct intake_job *)task;
	struct plugin_intake *in = job->in;

	in->in_flight--;
	if (in->closing) {
		ktel_plugin__free(job->plugin);
	} else {
		intake_opened(in, job->index, job->plugin, job->rc, &job->err);
	}
	free(job->path);
	free(job);
	if (!in->closing)
		intake_pump(in);
}

/* Open file i on an intake thread; -errno when it cannot be queued. */
static int intake_start_job(struct plugin_intake *in, size_t i)
{
	struct intake_job *job = calloc(1, sizeof(*job));

	if (!job)
		return -ENOMEM;
	job->in = in;
	job->index = i;
	job->path = strdup(in->files[i].path);
	job->task.work = intake_open_work;
	job->task.done = intake_open_done;
	if (!job->path || intake_pool__submit(&in->pool, &job->task) != 0) {
		free(job->path);
		free(job);
		return -ENOMEM;
	}
	in->in_flight++;
	return 0;
}

static void intake_load(struct plugin_intake *in);

/* Start opens while there is room; once every file answered, load. */
static void intake_pump(struct plugin_intake *in)
{
	while (in->next_open < in->n && (in->inline_ || in->in_flight < INTAKE_OPENS)) {
		size_t i = in->next_open++;
		struct ktel_plugin *plugin = NULL;
		struct ktel_err err = {0};
		int rc;

		if (!in->inline_ && intake_start_job(in, i) == 0)
			continue;
		/* Start-up, or no job could be queued: here and now. */
		rc = ktel_plugin__open(in->files[i].path, &plugin, &err);
		intake_opened(in, i, plugin, rc, &err);
	}
	intake_load(in);
}

static void on_intake_next_turn(uv_timer_t *t)
{
	struct plugin_intake *in = t->data;

	if (in->closing || in->p->d->shutting_down)
		return;
	if (in->running) {
		in->slice_pending = false;
		intake_load(in);
	} else {
		intake_begin_async(in);
	}
}

static void intake_end(struct plugin_intake *in);

/* The kernel's BTF parsed on an intake thread (tens of ms of a 5 MB file). */
struct targets_job {
	struct intake_task task;
	struct plugin_intake *in;
	struct ktel_targets *targets;
	struct ktel_err err;
};

static void targets_work(struct intake_task *task)
{
	struct targets_job *job = (struct targets_job *)task;

	job->targets = ktel_targets__new(NULL, &job->err);
}

static void targets_done(struct intake_task *task)
{
	struct targets_job *job = (struct targets_job *)task;
	struct plugin_intake *in = job->in;

	in->targets_pending = false;
	if (in->closing || in->p->targets) {
		ktel_targets__free(job->targets);
	} else {
		/* NULL: load_plugin tries again and refuses with the reason. */
		in->p->targets = job->targets;
	}
	free(job);
	if (!in->closing)
		intake_load(in);
}

/*
 * Before the first load of a scan that has plugins to load, parse the
 * kernel's BTF on an intake thread; true while that runs (intake_load goes on when
 * it is done). The parse is done while the loading waits, so nothing else
 * holds the kernel's BTF meanwhile (vmlinux_btf.h).
 */
static bool targets_on_thread(struct plugin_intake *in)
{
	struct targets_job *job;
	bool any = false;

	if (in->inline_ || in->p->targets || in->targets_tried)
		return false;
	for (size_t i = 0; i < in->n && !any; i++)
		any = in->files[i].plugin != NULL;
	if (!any)
		return false;
	job = calloc(1, sizeof(*job));
	if (!job)
		return false;
	job->in = in;
	job->task.work = targets_work;
	job->task.done = targets_done;
	if (intake_pool__submit(&in->pool, &job->task) != 0) {
		free(job);
		return false;
	}
	in->targets_pending = in->targets_tried = true;
	return true;
}

static void start_new_metrics(struct daemon_plugins *p);

/* Have all files whose path holds a replaced plugin's name answered? */
static bool held_answered(const struct plugin_intake *in)
{
	for (size_t h = 0; h < in->held.n; h++)
		for (size_t i = 0; i < in->n; i++)
			if (!in->files[i].answered &&
			    strcmp(in->files[i].path, in->held.items[h].path) == 0)
				return false;
	return true;
}

/*
 * Load the opened plugins, each checked against the plugins loaded so far:
 * first those whose name a replaced file of theirs held, then the others in
 * directory and file name order - each as soon as it and every file before
 * it answered, so a plugin ahead of a hanging one loads at once and the
 * first of a name in that order still wins. Each load can take the kernel's
 * verifier a while: after INTAKE_SLICE_MS the loop gets its turn and the
 * loading goes on at the next. Called whenever an answer came; the scan ends
 * here once every file answered and was dealt with.
 */
static void intake_load(struct plugin_intake *in)
{
	struct daemon_plugins *p = in->p;
	uint64_t start = uv_hrtime();

	if (!in->running || in->slice_pending || in->targets_pending || targets_on_thread(in))
		return;
	if (in->load_pass == 0 && !held_answered(in))
		return;
	while (in->load_pass < 2) {
		size_t end = in->load_pass == 0 ? in->n : in->n_ready;

		while (in->next_load < end) {
			struct intake_file *f = &in->files[in->next_load++];
			struct ktel_plugin *plugin = f->plugin;

			if (!plugin || held_by(&in->held, plugin) != (in->load_pass == 0))
				continue;
			f->plugin = NULL;
			if (check_collisions(p, plugin) || load_plugin(p, plugin))
				ktel_plugin__free(plugin);
			else
				in->changes++;
			if (!in->inline_ && uv_hrtime() - start > INTAKE_SLICE_MS * 1000000ull) {
				in->slice_pending = true;
				uv_timer_start(&in->next_turn, on_intake_next_turn, 0, 0);
				return;
			}
		}
		if (in->load_pass == 1 && in->n_ready < in->n) {
			/* The next answer goes on; what loaded starts now. */
			start_new_metrics(p);
			return;
		}
		in->load_pass++;
		in->next_load = 0;
	}
	intake_end(in);
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

/* Start the metrics of plugins that arrived with this scan. */
static void start_new_metrics(struct daemon_plugins *p)
{
	struct ktel_metric *m;

	for_each_metric(p, m)
		if (!m->enabled && !m->started_once)
			start_metric(p, m);
}

/* The scan is done: refusals it did not repeat go, new metrics start. */
static void intake_end(struct plugin_intake *in)
{
	struct daemon_plugins *p = in->p;
	int changes = in->changes;

	refusals_sweep(p);
	p->n_refused_unlisted = in->n_unlisted;
	ktel_targets__free(p->targets);
	p->targets = NULL;
	start_new_metrics(p);
	/* Loads parse the kernel's BTF (megabytes, freed by now): hand it back. */
	if (changes)
		ktel_memory__release();
	/* A file still being written is tried again once it can be quiet. */
	if (in->n_not_quiet && p->rescan_timer_init && !p->d->shutting_down)
		uv_timer_start(&p->rescan_timer, on_rescan_timer, KTEL_PLUGIN_QUIET_MS, 0);
	if (!in->inline_ && changes)
		ktel_log(KTEL_LOG_INFO, "plugin directories: %d change%s applied", changes,
			 changes == 1 ? "" : "s");
	intake_clear(in);
	in->running = false;
	if (in->again && !in->closing && !p->d->shutting_down) {
		in->again = false;
		uv_timer_start(&in->next_turn, on_intake_next_turn, 0, 0);
	}
}

/*
 * Begin a scan: unload plugins whose file is gone or changed, list the
 * directories, start the opens. A directory that cannot be read is logged
 * and the others are still scanned; returns -errno with err naming the first
 * such directory, else 0. With err, the first is not logged: the caller
 * says it, and each problem is said once. While a scan runs, another is only
 * noted: it follows when this one ends.
 */
static int intake_begin(struct plugin_intake *in, struct ktel_err *err)
{
	struct daemon_plugins *p = in->p;
	struct ktel_err dir_err;
	int r = 0;

	if (in->closing || p->d->shutting_down)
		return 0;
	if (in->running) {
		in->again = true;
		return 0;
	}
	in->running = true;
	refusals_unsee(p);
	in->changes = drop_stale(p, &in->held);
	for (size_t k = 0; k < p->d->cfg->n_plugin_dirs; k++) {
		if (!intake_list(in, p->d->cfg->plugin_dirs[k], &dir_err))
			continue;
		if (r || !err)
			ktel_log(KTEL_LOG_ERROR, "%s", dir_err.msg);
		if (!r) {
			if (err)
				*err = dir_err;
			r = -dir_err.code;
		}
	}
	intake_pump(in);
	return r;
}

static void intake_begin_async(struct plugin_intake *in)
{
	intake_begin(in, NULL);
}

static struct plugin_intake *intake_new(struct daemon_plugins *p)
{
	struct plugin_intake *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->p = p;
	if (intake_pool__init(&in->pool, p->d->loop)) {
		free(in);
		return NULL;
	}
	uv_timer_init(p->d->loop, &in->next_turn);
	in->next_turn.data = in;
	in->next_turn_init = true;
	return in;
}

/* Opens still on the intake threads are cut short - their contained
 * children killed, no shutdown waits for a parse's timeout - and their
 * answers dropped; the loop runs until they came back. */
static void intake_close(struct plugin_intake *in)
{
	if (!in)
		return;
	in->closing = true;
	if (in->pool.in_flight)
		ktel_contain__kill_all();
	if (in->next_turn_init) {
		uv_close((uv_handle_t *)&in->next_turn, NULL);
		in->next_turn_init = false;
	}
	intake_pool__close(&in->pool);
}

static void intake_free(struct plugin_intake *in)
{
	if (!in)
		return;
	intake_pool__free(&in->pool);
	intake_clear(in);
	free(in->files);
	free(in);
}

int daemon_plugins__rescan(struct daemon_plugins *p)
{
	/* An unreadable directory is logged; the plugins of the others run. */
	if (p->intake)
		intake_begin(p->intake, NULL);
	return 0;
}

int ktel_daemon__rescan_plugins(struct ktel_daemon *d)
{
	return daemon_plugins__rescan(&d->plugins);
}

static void on_rescan_timer(uv_timer_t *t)
{
	daemon_plugins__rescan(t->data);
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
	p->intake = intake_new(p);
	if (!p->intake)
		return ktel_err_set(err, ENOMEM, "out of memory");
	return 0;
}

int daemon_plugins__load(struct daemon_plugins *p, struct ktel_err *err)
{
	int r;

	/* Before the control socket opens: nobody waits on the loop yet. */
	p->intake->inline_ = true;
	r = intake_begin(p->intake, err);
	p->intake->inline_ = false;
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
	for_each_metric(p, m)
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

	for_each_metric(p, m)
		close_metric(m, flush_streams);
	if (p->rescan_timer_init) {
		uv_close((uv_handle_t *)&p->rescan_timer, NULL);
		p->rescan_timer_init = false;
	}
	intake_close(p->intake);
	close_watchers(p);
	if (p->cgroup_events_poll_init) {
		uv_close((uv_handle_t *)&p->cgroup_events_poll, NULL);
		p->cgroup_events_poll_init = false;
	}
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
	ktel_cgroup_events__free(p->cgroup_events);
	p->cgroup_events = NULL;
	ktel_attr_names__free(p->attr_names);
	p->attr_names = NULL;
	intake_free(p->intake);
	p->intake = NULL;
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

	for_each_metric(p, m)
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
