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

#define SELF_PER_METRIC 8
#define SELF_ATTR_NAMING 6
#define SELF_PER_PROG 4
#define SELF_PER_PLUGIN 4
/* self_prev's slots per plugin: invalid durations, map write failures,
 * unpaired events, events counted (audit builds). */
#define SELF_PREV_PER_PLUGIN 4
/* self_prev's slots per program: recursion misses, run time, runs. */
#define SELF_PREV_PER_PROG 3

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
 * lp's self-telemetry memory: SELF_PREV_PER_PLUGIN slots (the invalid
 * durations, map write failures, unpaired events, events counted), then
 * SELF_PREV_PER_PROG slots per program (recursion misses, run time, runs),
 * as of the previous self-telemetry. NULL on ENOMEM (the plugin's records
 * are left out).
 */
static uint64_t *self_prev(struct ktel_loaded_plugin *lp)
{
	size_t n = SELF_PREV_PER_PLUGIN + SELF_PREV_PER_PROG * (lp->bpf ? lp->bpf->n_progs : 0);

	if (!lp->self_prev) {
		lp->self_prev = calloc(n, sizeof(*lp->self_prev));
		lp->n_self_prev = lp->self_prev ? n : 0;
	}
	return lp->n_self_prev == n ? lp->self_prev : NULL;
}

/*
 * A program's running total of bpf_stats as a counter with two dimensions:
 * the plugin (its index plug) and the program (idx), so that a sink can add
 * a plugin's programs up.
 */
static void prog_counter(struct ktel_record *r, const struct ktel_record *tmpl, const char *name,
			 const char *unit, int64_t plug, const char *plugin, int64_t idx,
			 const char *prog, uint64_t cur, uint64_t *prev)
{
	self_rec(r, tmpl, name, "plugin", plug, plugin);
	r->n_dims = 2;
	r->dims[1] = (struct ktel_dim){.name = "program", .value = idx, .label = prog};
	r->unit = unit;
	self_counter(r, cur, prev);
}

/*
 * Records for each attached program: recursion misses and, while bpf_stats
 * is on, its run time and runs (counters, so that a sink's rate is the
 * share of one CPU it costs) and the time per run.
 */
static size_t self_prog_records(const struct daemon_self *s, const struct ktel_record *tmpl,
				struct ktel_record *out, size_t max)
{
	const struct daemon_plugins *p = &s->d->plugins;
	bool stats = daemon_self__stats_source(s) != NULL;
	struct ktel_loaded_plugin *lp;
	size_t n = 0;
	int64_t idx = 0;

	for (size_t i = 0; (lp = daemon_plugins__at(p, i)); i++) {
		struct ktel_bpf_plugin *bp = lp->bpf;
		bool in_use = plugin_in_use(lp);
		uint64_t *prev = self_prev(lp);

		for (size_t j = 0; bp && j < bp->n_progs; j++, idx++) {
			const struct ktel_bpf_prog *bpr = &bp->progs[j];
			uint64_t *pp = prev ? prev + SELF_PREV_PER_PLUGIN + SELF_PREV_PER_PROG * j
					    : NULL;
			struct ktel_bpf_prog_stats st;

			if (!in_use || !pp || !bpr->attached || n + SELF_PER_PROG > max ||
			    ktel_bpf_prog__stats(bpr, &st))
				continue;
			self_rec(&out[n], tmpl, "ktel_prog_recursion_misses", "program", idx,
				 bpr->name);
			out[n].unit = "runs";
			self_counter(&out[n++], st.recursion_misses, &pp[0]);
			if (!stats)
				continue;
			prog_counter(&out[n++], tmpl, "ktel_prog_run_time", "ns", (int64_t)i,
				     lp->plugin->desc.name, idx, bpr->name, st.run_time_ns, &pp[1]);
			prog_counter(&out[n++], tmpl, "ktel_prog_runs", "runs", (int64_t)i,
				     lp->plugin->desc.name, idx, bpr->name, st.run_cnt, &pp[2]);
			/* Body-only time: bpf_stats does not see the dispatch. */
			self_rec(&out[n], tmpl, "ktel_prog_run_time_per_run", "program", idx,
				 bpr->name);
			out[n].type = KTEL_RECORD_GAUGE;
			out[n].unit = "ns";
			out[n++].gauge = st.run_cnt ? (int64_t)(st.run_time_ns / st.run_cnt) : 0;
		}
	}
	return n;
}

/*
 * An attributed metric's events folded into "other" (attr_fold.h), by stage:
 * "kernel" past the map's bound of attributed keys, "user" past the top K;
 * the kernel keys its ageing deleted (those of released cgroups); and the
 * events the fold took in and handed on (ktel_attr_events by stage "in",
 * "out"). Five records, or none for a metric that does not attribute.
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
	self_rec(&out[2], tmpl, "ktel_attr_keys_deleted", "metric", idx, m->md->name);
	out[2].unit = "keys";
	self_counter(&out[2], m->attr_keys_deleted, &m->self_keys_deleted);
	/* What the fold took in and handed on: equal while every event of
	 * the windows reaches the sinks. */
	cur[0] = st.events_in;
	cur[1] = st.events_out;
	prev[0] = &m->self_events_in;
	prev[1] = &m->self_events_out;
	for (size_t i = 0; i < 2; i++) {
		self_rec(&out[3 + i], tmpl, "ktel_attr_events", "metric", idx, m->md->name);
		out[3 + i].n_dims = 2;
		out[3 + i].dims[1] = (struct ktel_dim){.name = "stage",
						       .value = (int64_t)i,
						       .label = i ? "out" : "in"};
		out[3 + i].unit = "events";
		self_counter(&out[3 + i], cur[i], prev[i]);
	}
	return 5;
}

/* A naming counter of attribution: name{dim=label}. */
static void naming_counter(struct ktel_record *r, const struct ktel_record *tmpl, const char *name,
			   const char *unit, const char *dim, int64_t idx, const char *label,
			   uint64_t cur, uint64_t *prev)
{
	self_rec(r, tmpl, name, dim, idx, label);
	r->unit = unit;
	self_counter(r, cur, prev);
}

/*
 * How attribution names cgroups (daemon_attr_naming): cgroups released, by
 * rule (their release event, or the grace rule); the kernel's cgroup
 * events taken and lost (a loss makes the names walk cgroupfs again), and
 * the mkdir events whose path may be cut (never taken as a name); the
 * cgroup names cached, by the source in use. None before a metric
 * attributes.
 */
static size_t self_naming_records(struct daemon_self *s, const struct ktel_record *tmpl,
				  struct ktel_record *out, size_t max)
{
	struct daemon_attr_naming an;

	daemon_plugins__attr_naming(&s->d->plugins, &an);
	if (!an.active || max < SELF_ATTR_NAMING)
		return 0;
	naming_counter(&out[0], tmpl, "ktel_attr_cgroups_released", "cgroups", "rule", 0, "event",
		       an.names.released_event, &s->prev_attr[0]);
	naming_counter(&out[1], tmpl, "ktel_attr_cgroups_released", "cgroups", "rule", 1, "grace",
		       an.names.released - an.names.released_event, &s->prev_attr[1]);
	naming_counter(&out[2], tmpl, "ktel_attr_cgroup_events", "events", "result", 0, "taken",
		       an.events.events, &s->prev_attr[2]);
	naming_counter(&out[3], tmpl, "ktel_attr_cgroup_events", "events", "result", 1, "lost",
		       an.events.lost, &s->prev_attr[3]);
	naming_counter(&out[4], tmpl, "ktel_attr_cgroup_events", "events", "result", 2, "path_cut",
		       an.names.event_paths_cut, &s->prev_attr[4]);
	self_rec(&out[5], tmpl, "ktel_attr_cgroup_names", "source",
		 strcmp(an.source, "events") == 0 ? 0 : 1, an.source);
	out[5].type = KTEL_RECORD_GAUGE;
	out[5].unit = "cgroups";
	out[5].gauge = (int64_t)an.names.cgroups;
	return SELF_ATTR_NAMING;
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
 * Per loaded plugin, counters of its programs' running totals in
 * bpf_telemetry.h: durations dropped because the clock went backwards
 * (ktel_invalid_durations), map writes the kernel refused
 * (ktel_map_write_failures) and end events without a recorded start
 * (ktel_unpaired_events); in an audit build (KTEL_BPF_AUDIT) the events
 * the accumulator macros recorded (ktel_events_counted). Each where the
 * object has it (one built before them has not).
 */
static size_t self_plugin_records(const struct daemon_plugins *p, const struct ktel_record *tmpl,
				  struct ktel_record *out, size_t max)
{
	struct ktel_loaded_plugin *lp;
	size_t n = 0;

	for (size_t i = 0; (lp = daemon_plugins__at(p, i)); i++) {
		struct ktel_bpf_plugin *bp = lp->bpf;
		static const char *const names[SELF_PREV_PER_PLUGIN] = {"ktel_invalid_durations",
									"ktel_map_write_failures",
									"ktel_unpaired_events",
									"ktel_events_counted"};
		static const char *const units[SELF_PREV_PER_PLUGIN] = {"events", "writes",
									"events", "events"};
		uint64_t *prev = self_prev(lp), cur;

		if (!bp || !bp->obj || bp->unsupported || !prev || n + SELF_PER_PLUGIN > max ||
		    !plugin_in_use(lp))
			continue;
		for (size_t k = 0; k < SELF_PREV_PER_PLUGIN; k++) {
			if (ktel_bpf_global_u64(bp->obj, names[k], &cur) != 0)
				continue;
			self_rec(&out[n], tmpl, names[k], "plugin", (int64_t)i,
				 bp->plugin->desc.name);
			out[n].unit = units[k];
			self_counter(&out[n++], cur, &prev[k]);
		}
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
	       daemon_plugins__n(p) * SELF_PER_PLUGIN + SELF_ATTR_NAMING;
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
	n += self_prog_records(s, &tmpl, recs + n, max - n);
	n += self_plugin_records(p, &tmpl, recs + n, max - n);
	n += self_naming_records(s, &tmpl, recs + n, max - n);
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

const char *daemon_self__stats_source(const struct daemon_self *s)
{
	if (s->stats_held)
		return "daemon";
	return ktel_bpf_stats_enabled() ? "sysctl" : NULL;
}

int daemon_self__plugin_cost(struct ktel_loaded_plugin *lp, struct daemon_plugin_cost *ret)
{
	const struct ktel_bpf_plugin *bp = lp->bpf;
	struct daemon_plugin_cost c = {0};
	uint64_t now = ktel_now_boottime_ns(), since = lp->cost_since_ns, prev;
	bool any = false;

	for (size_t j = 0; bp && j < bp->n_progs; j++) {
		struct ktel_bpf_prog_stats st;

		if (ktel_bpf_prog__stats(&bp->progs[j], &st))
			continue;
		any = true;
		c.run_cnt += st.run_cnt;
		c.run_time_ns += st.run_time_ns;
		/* The first window starts at the earliest load. */
		if (!lp->cost_since_ns && (!since || st.load_time_ns < since))
			since = st.load_time_ns;
	}
	if (!any)
		return -ENOENT;
	prev = lp->cost_since_ns ? lp->cost_run_time_ns : 0;
	c.window_run_time_ns = c.run_time_ns >= prev ? c.run_time_ns - prev : c.run_time_ns;
	c.window_ns = now > since ? now - since : 0;
	c.cpu_share = c.window_ns ? (double)c.window_run_time_ns / (double)c.window_ns : 0;
	lp->cost_run_time_ns = c.run_time_ns;
	lp->cost_since_ns = now;
	*ret = c;
	return 0;
}

/* self_telemetry.bpf_stats: hold the kernel's statistics on until close. */
static void hold_stats(struct daemon_self *s)
{
	struct ktel_err err;
	int fd;

	if (!s->d->cfg->self_bpf_stats)
		return;
	fd = ktel_bpf_stats_hold(&err);
	if (fd < 0) {
		ktel_log(KTEL_LOG_WARN,
			 "self_telemetry.bpf_stats: %s: programs' run counts and "
			 "times are not measured",
			 err.msg);
		return;
	}
	s->stats_fd = fd;
	s->stats_held = true;
	ktel_log(KTEL_LOG_INFO, "bpf_stats on while the daemon runs (self_telemetry.bpf_stats)");
}

void daemon_self__init(struct daemon_self *s, struct ktel_daemon *d)
{
	s->d = d;
	hold_stats(s);
	s->start_boot = ktel_now_boottime_ns();
	s->start_wall = ktel_now_wall_ns();
	uv_timer_init(d->loop, &s->timer);
	s->timer.data = s;
	s->timer_init = true;
	daemon_self__configure(s);
}

void daemon_self__close(struct daemon_self *s)
{
	if (s->stats_held) {
		close(s->stats_fd);
		s->stats_held = false;
	}
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
