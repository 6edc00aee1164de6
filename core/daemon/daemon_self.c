// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Self-telemetry (struct daemon_self): the daemon's own health as ordinary
 * records through the same sinks (docs/architecture.md, "Run time"). It
 * reads the loaded plugins through the plugins part's functions and keeps
 * its previous running totals on each plugin (self_prev) and metric
 * (self_pull_errors), which nothing else touches.
 */
#include "daemon_internal.h"
#include "bpf_globals.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* ---- self-telemetry -------------------------------------------------------- */

#define SELF_PER_METRIC 5
#define SELF_PER_PROG 2
#define SELF_PER_PLUGIN 1

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

/*
 * The running total cur as a counter record, its delta from *prev (the value
 * of the previous self-telemetry; a smaller value is a new object: delta =
 * cur), *prev updated.
 */
static void self_counter(struct ktel_record *r, uint64_t cur, uint64_t *prev)
{
	r->type = KTEL_RECORD_COUNTER;
	r->counter.total = cur;
	r->counter.delta = cur >= *prev ? cur - *prev : cur;
	*prev = cur;
}

/* Does the config leave any of lp's metrics enabled? Self-telemetry speaks
 * only of plugins the config uses. */
static bool plugin_in_use(const struct ktel_loaded_plugin *lp)
{
	for (size_t j = 0; j < lp->n_metrics; j++)
		if (lp->metrics[j].enabled)
			return true;
	return false;
}

/*
 * lp's self-telemetry memory: slot 0 the invalid durations, slot 1 + j
 * program j's recursion misses, as of the previous self-telemetry. NULL on
 * ENOMEM (the plugin's records are left out).
 */
static uint64_t *self_prev(struct ktel_loaded_plugin *lp)
{
	size_t n = 1 + (lp->bpf ? lp->bpf->n_progs : 0);

	if (!lp->self_prev) {
		lp->self_prev = calloc(n, sizeof(*lp->self_prev));
		lp->n_self_prev = lp->self_prev ? n : 0;
	}
	return lp->n_self_prev == n ? lp->self_prev : NULL;
}

/* Records for each attached program: run time (bpf_stats) and recursion misses. */
static size_t self_prog_records(const struct daemon_plugins *p, const struct ktel_record *tmpl,
				struct ktel_record *out, size_t max)
{
	bool stats = ktel_bpf_stats_enabled();
	struct ktel_loaded_plugin *lp;
	size_t n = 0;
	int64_t idx = 0;

	for (size_t i = 0; (lp = daemon_plugins__at(p, i)); i++) {
		struct ktel_bpf_plugin *bp = lp->bpf;
		bool in_use = plugin_in_use(lp);
		uint64_t *prev = self_prev(lp);

		for (size_t j = 0; bp && j < bp->n_progs; j++, idx++) {
			struct bpf_prog_info info = {0};
			__u32 len = sizeof(info);
			int fd;

			if (!in_use || !prev || !bp->progs[j].attached || n + SELF_PER_PROG > max)
				continue;
			fd = bpf_program__fd(bp->progs[j].prog);
			if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
				continue;
			self_rec(&out[n], tmpl, "ktel_prog_recursion_misses", "program", idx,
				 bp->progs[j].name);
			out[n].unit = "runs";
			self_counter(&out[n++], info.recursion_misses, &prev[1 + j]);
			if (!stats)
				continue;
			/* Body-only time: bpf_stats does not see the dispatch. */
			self_rec(&out[n], tmpl, "ktel_prog_run_time_per_run", "program", idx,
				 bp->progs[j].name);
			out[n].type = KTEL_RECORD_GAUGE;
			out[n].unit = "ns";
			out[n++].gauge = info.run_cnt ? (int64_t)(info.run_time_ns / info.run_cnt)
						      : 0;
		}
	}
	return n;
}

/*
 * An attributed metric's events folded into "other" (attr_fold.h), by stage:
 * "kernel" past the map's bound of attributed keys, "user" past the top K.
 * Two records, or none for a metric that does not attribute.
 */
static size_t self_attr_records(struct ktel_metric *m, const struct ktel_record *tmpl, int64_t idx,
				struct ktel_record *out)
{
	static const char *const stages[] = {"kernel", "user"};
	struct ktel_attr_fold_stats st;
	uint64_t cur[2], *prev[2] = {&m->self_folded_kernel, &m->self_folded_user};

	if (!m->fold)
		return 0;
	ktel_attr_fold__stats(m->fold, &st);
	cur[0] = st.folded_kernel;
	cur[1] = st.folded_user;
	for (size_t i = 0; i < 2; i++) {
		self_rec(&out[i], tmpl, "ktel_attr_overflow", "metric", idx, m->md->name);
		out[i].n_dims = 2;
		out[i].dims[1] = (struct ktel_dim){.name = "stage",
						   .value = (int64_t)i,
						   .label = stages[i]};
		out[i].unit = "events";
		self_counter(&out[i], cur[i], prev[i]);
	}
	return 2;
}

/* Pull cost and errors of each enabled metric; idx counts every metric. */
static size_t self_metric_records(const struct daemon_plugins *p, const struct ktel_record *tmpl,
				  struct ktel_record *out, size_t max)
{
	struct ktel_metric *m;
	size_t n = 0;
	int64_t idx = -1;

	for_each_metric(p, m) {
		const char *name = m->md->name;

		idx++;
		if (!m->enabled || n + SELF_PER_METRIC > max)
			continue;
		self_rec(&out[n], tmpl, "ktel_pull_duration", "metric", idx, name);
		out[n].type = KTEL_RECORD_GAUGE;
		out[n].unit = "ns";
		out[n++].gauge = (int64_t)m->last.duration_ns;
		self_rec(&out[n], tmpl, "ktel_pull_keys", "metric", idx, name);
		out[n].type = KTEL_RECORD_GAUGE;
		out[n].unit = "keys";
		out[n++].gauge = (int64_t)m->last.keys;
		self_rec(&out[n], tmpl, "ktel_pull_errors", "metric", idx, name);
		out[n].unit = "pulls";
		self_counter(&out[n++], m->pull_errors, &m->self_pull_errors);
		n += self_attr_records(m, tmpl, idx, out + n);
	}
	return n;
}

/*
 * Per loaded plugin: durations its programs dropped because the clock went
 * backwards (ktel_invalid_durations in bpf_telemetry.h), a counter.
 */
static size_t self_plugin_records(const struct daemon_plugins *p, const struct ktel_record *tmpl,
				  struct ktel_record *out, size_t max)
{
	struct ktel_loaded_plugin *lp;
	size_t n = 0;

	for (size_t i = 0; (lp = daemon_plugins__at(p, i)); i++) {
		struct ktel_bpf_plugin *bp = lp->bpf;
		uint64_t invalid, *prev = self_prev(lp);

		if (!bp || !bp->obj || bp->unsupported || !prev || n + SELF_PER_PLUGIN > max ||
		    !plugin_in_use(lp) ||
		    ktel_bpf_global_u64(bp->obj, "ktel_invalid_durations", &invalid) != 0)
			continue;
		self_rec(&out[n], tmpl, "ktel_invalid_durations", "plugin", (int64_t)i,
			 bp->plugin->desc.name);
		out[n].unit = "events";
		self_counter(&out[n++], invalid, &prev[0]);
	}
	return n;
}

/* How many records self-telemetry can make at most. */
static size_t self_max(const struct daemon_self *s)
{
	const struct daemon_plugins *p = &s->d->plugins;
	size_t n_progs = 0, n_metrics = 0;
	struct ktel_loaded_plugin *lp;

	for (size_t i = 0; (lp = daemon_plugins__at(p, i)); i++) {
		n_metrics += lp->n_metrics;
		n_progs += lp->bpf ? lp->bpf->n_progs : 0;
	}
	return ktel_router__n_sinks(s->d->router) * KTEL_ROUTER_SELF_PER_SINK +
	       n_metrics * SELF_PER_METRIC + n_progs * SELF_PER_PROG +
	       daemon_plugins__n(p) * SELF_PER_PLUGIN;
}

/*
 * The daemon's own telemetry, as ordinary records through the same sinks:
 * sink counters (router), pull cost per metric, program health.
 */
void daemon_self__emit(struct daemon_self *s)
{
	const struct daemon_plugins *p = &s->d->plugins;
	const struct ktel_config *cfg = s->d->cfg;
	size_t max = self_max(s), n = 0, got = 0;
	struct ktel_record tmpl = {0}, *recs;

	recs = calloc(max ? max : 1, sizeof(*recs));
	if (!recs)
		return;
	tmpl.type = KTEL_RECORD_COUNTER;
	tmpl.unit = "";
	tmpl.boot_id = ktel_boot_id();
	tmpl.start_boottime_ns = s->start_boot;
	tmpl.start_wall_ns = s->start_wall;
	tmpl.end_boottime_ns = ktel_now_boottime_ns();
	tmpl.end_wall_ns = ktel_now_wall_ns();
	tmpl.seq = ++s->seq;
	if (ktel_router__self_records(s->d->router, &tmpl, recs, max, &got) == 0)
		n = got;
	n += self_metric_records(p, &tmpl, recs + n, max - n);
	n += self_prog_records(p, &tmpl, recs + n, max - n);
	n += self_plugin_records(p, &tmpl, recs + n, max - n);
	ktel_router__route(s->d->router, recs, n, (const char *const *)cfg->self_sinks,
			   cfg->n_self_sinks);
	s->start_boot = tmpl.end_boottime_ns;
	s->start_wall = tmpl.end_wall_ns;
	free(recs);
}

static void on_timer(uv_timer_t *t)
{
	daemon_self__emit(t->data);
}

void daemon_self__configure(struct daemon_self *s)
{
	const struct ktel_config *cfg = s->d->cfg;

	if (cfg->self_enabled)
		uv_timer_start(&s->timer, on_timer, cfg->self_interval_ms, cfg->self_interval_ms);
	else
		uv_timer_stop(&s->timer);
}

void daemon_self__init(struct daemon_self *s, struct ktel_daemon *d)
{
	s->d = d;
	s->start_boot = ktel_now_boottime_ns();
	s->start_wall = ktel_now_wall_ns();
	uv_timer_init(d->loop, &s->timer);
	s->timer.data = s;
	s->timer_init = true;
	daemon_self__configure(s);
}

void daemon_self__close(struct daemon_self *s)
{
	if (!s->timer_init)
		return;
	uv_close((uv_handle_t *)&s->timer, NULL);
	s->timer_init = false;
}

void daemon_self__plugin_freed(struct ktel_loaded_plugin *lp)
{
	free(lp->self_prev);
	lp->self_prev = NULL;
	lp->n_self_prev = 0;
}
