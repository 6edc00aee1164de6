// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The daemon's side of the control socket: the operations the protocol asks
 * for (struct ktel_control_ops, control.h), answered from the daemon's
 * state. core/daemon/control.c is the server and the protocol; it reaches the
 * daemon only through ktel_daemon_control_ops, so the dependency runs one
 * way: daemon -> control. docs/control.md describes every answer.
 *
 * This file sits on top of the daemon: it calls the core and reload, and
 * ktel_daemon__start hands its table to the core's start, so the core
 * never names this file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "attr_fold.h"
#include "control.h"
#include "daemon_internal.h"
#include "fault.h"
#include "jsonutil.h"
#include "metric_pull.h"
#include "plugin_loader.h"
#include "router.h"
#include "utf8.h"

static void iso_time(int64_t wall_ns, char *buf, size_t len)
{
	time_t s = (time_t)(wall_ns / 1000000000);
	struct tm tm;

	if (!gmtime_r(&s, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "%" PRId64, wall_ns);
}

/* Seconds since this process started (/proc/self/stat field 22). */
static double uptime_s(void)
{
	char buf[1024], *p;
	unsigned long long start = 0;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	struct timespec ts;

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu",
			 &start) != 1)
		return 0;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)start / sysconf(_SC_CLK_TCK);
}

/*
 * The daemon's part of status's "daemon" object. control_socket is the
 * configured one; the server puts the path the answer came through in its
 * place and adds its own counters ("control"). stats_by: who keeps
 * bpf_stats on (daemon_self__stats_source), NULL when off.
 */
static json_t *daemon_json(struct ktel_daemon *d, const char *stats_by)
{
	const struct ktel_config *cfg = ktel_daemon__config(d);
	char fault[300];
	json_t *o;

	o = json_pack("{s:i, s:f, s:s, s:s?, s:s, s:s, s:b, s:s?, s:I}", "pid", (int)getpid(),
		      "uptime_s", uptime_s(), "config", cfg->source, "control_socket",
		      cfg->control_socket, "pin_root", cfg->pin_root, "state_file", cfg->state_file,
		      "bpf_stats", stats_by != NULL, "bpf_stats_by", stats_by, "plugins",
		      (json_int_t)ktel_daemon__n_plugins(d));
	/* A test build's armed fault (or an ignored KTEL_TEST_FAULT) is shown
	 * wherever the daemon is looked at, not only in its start-up log. */
	if (o && ktel_fault__describe(fault, sizeof(fault)) != KTEL_FAULT_NONE)
		json_object_set_new(o, "test_fault", json_string(fault));
	return o;
}

static json_t *prog_json(const struct ktel_bpf_prog *p, bool stats_on)
{
	json_t *o = json_pack("{s:s, s:s, s:b, s:b}", "name", p->name, "section", p->section,
			      "selected", p->selected, "attached", p->attached);
	struct ktel_bpf_prog_stats st;

	if (!o)
		return NULL;
	if (!p->selected)
		ktel_json_set_str(o, "skip_reason", p->skip_reason);
	if (p->attach_error[0])
		ktel_json_set_str(o, "attach_error", p->attach_error);
	if (!p->prog_id)
		return o;
	ktel_json_set_int(o, "prog_id", p->prog_id);
	if (ktel_bpf_prog__stats(p, &st))
		return o;
	/* The kernel counts runs and time only while bpf_stats is on: without
	 * it the numbers would read as "never ran", so they are left out. */
	if (stats_on) {
		ktel_json_set_int(o, "run_cnt", (json_int_t)st.run_cnt);
		ktel_json_set_int(o, "run_time_ns", (json_int_t)st.run_time_ns);
		json_object_set_new(o, "ns_per_run",
				    json_real(st.run_cnt ? (double)st.run_time_ns / st.run_cnt
							 : 0.0));
	}
	ktel_json_set_int(o, "recursion_misses", (json_int_t)st.recursion_misses);
	return o;
}

/*
 * lp's programs' cost ("cost"): their summed runs and run time, and the
 * share of one CPU they took since the previous status (since their load,
 * for the first); *total adds the share up over the plugins. NULL when
 * bpf_stats is off or lp has no loaded program.
 */
static json_t *cost_json(struct ktel_loaded_plugin *lp, bool stats_on, double *total)
{
	struct daemon_plugin_cost c;

	if (!stats_on || daemon_self__plugin_cost(lp, &c))
		return NULL;
	*total += c.cpu_share;
	return json_pack("{s:I, s:I, s:I, s:f, s:f}", "run_cnt", (json_int_t)c.run_cnt,
			 "run_time_ns", (json_int_t)c.run_time_ns, "window_run_time_ns",
			 (json_int_t)c.window_run_time_ns, "window_s", c.window_ns / 1e9,
			 "cpu_share", c.cpu_share);
}

static json_t *plugin_json(struct ktel_loaded_plugin *lp, bool stats_on, double *total)
{
	const struct ktel_bpf_plugin *bp = lp->bpf;
	char path[4 * sizeof(lp->path)];
	json_t *progs = json_array(), *o, *cost;

	/* A file name is any bytes; the answer is UTF-8 (utf8.h). */
	ktel_utf8_escape(lp->path, path, sizeof(path));
	o = json_pack("{s:s, s:s, s:s, s:b}", "name", lp->plugin->desc.name, "version",
		      lp->plugin->desc.version ?: "", "path", path, "unsupported",
		      bp && bp->unsupported);

	if (!o || !progs) {
		json_decref(o);
		json_decref(progs);
		return NULL;
	}
	if (bp && bp->unsupported)
		ktel_json_set_str(o, "reason", bp->unsupported_reason);
	for (size_t i = 0; bp && i < bp->n_progs; i++)
		json_array_append_new(progs, prog_json(&bp->progs[i], stats_on));
	json_object_set_new(o, "programs", progs);
	cost = cost_json(lp, stats_on, total);
	if (cost)
		json_object_set_new(o, "cost", cost);
	return o;
}

static json_t *last_pull_json(const struct ktel_metric *m)
{
	char when[64];

	if (!m->last_pull_wall_ns)
		return json_null();
	iso_time((int64_t)m->last_pull_wall_ns, when, sizeof(when));
	return json_pack("{s:s, s:I, s:s, s:I, s:I, s:I, s:b}", "time", when, "keys",
			 (json_int_t)m->last.keys, "method", m->last.method ?: "", "syscalls",
			 (json_int_t)m->last.syscalls, "duration_ns",
			 (json_int_t)m->last.duration_ns, "records", (json_int_t)m->last.records,
			 "truncated", m->last.truncated);
}

/*
 * m's attribution as loaded, or NULL when the config asks none: {"by"} and,
 * for block I/O with a choice, "block_subject" (submitter or charged); a
 * refused one is by none with "refused" saying why.
 */
static json_t *attribution_json(const struct ktel_metric *m)
{
	json_t *o;

	if (m->attr_asked.by == KTEL_ATTR_BY_NONE)
		return NULL;
	if (m->attr.by == KTEL_ATTR_BY_NONE)
		return json_pack("{s:s, s:s}", "by", "none", "refused",
				 "block_subject charged: the io controller is not on cgroup v2");
	o = json_pack("{s:s}", "by", ktel_attr_by_name(m->attr.by));
	if (o && m->block_subject != KTEL_ATTR_SUBJECT_AUTO)
		ktel_json_set_str(o, "block_subject", ktel_attr_subject_name(m->block_subject));
	return o;
}

static json_t *metric_pulls_json(const struct ktel_metric *m)
{
	json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:o}", "name", m->md->name, "enabled",
			      m->enabled, "pulls", (json_int_t)m->pulls, "pull_errors",
			      (json_int_t)m->pull_errors, "records", (json_int_t)m->records,
			      "last_pull", last_pull_json(m));

	json_t *attr = attribution_json(m);

	if (o && attr)
		json_object_set(o, "attribution", attr);
	json_decref(attr);
	if (o && m->problem[0])
		ktel_json_set_str(o, "problem", m->problem);
	if (o && m->mp && ktel_metric_pull__fallback_reason(m->mp))
		ktel_json_set_str(o, "fallback_reason", ktel_metric_pull__fallback_reason(m->mp));
	return o;
}

static const char *sink_type(const struct ktel_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_sinks; i++)
		if (strcmp(cfg->sinks[i].name, name) == 0)
			return cfg->sinks[i].type;
	return NULL;
}

static json_t *sinks_json(struct ktel_daemon *d)
{
	const struct ktel_router *r = ktel_daemon__router(d);
	json_t *a = json_array();

	for (size_t i = 0; r && i < ktel_router__n_sinks(r); i++) {
		const char *name = ktel_router__sink_name(r, i);
		struct ktel_sink_stats st = {0};
		char where[300];

		ktel_router__sink_stats(r, name, &st);
		ktel_router__sink_where(r, name, where, sizeof(where));
		/* last_error only when the sink has kept one (statsd). */
		json_array_append_new(a,
				      json_pack("{s:s, s:s?, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s?}",
						"name", name, "type",
						sink_type(ktel_daemon__config(d), name), "where",
						where, "sent", (json_int_t)st.sent, "dropped",
						(json_int_t)st.dropped, "errors",
						(json_int_t)st.errors, "reconnects",
						(json_int_t)st.reconnects, "queued",
						(json_int_t)st.queued, "refused",
						(json_int_t)st.refused, "last_error",
						st.last_error[0] ? st.last_error : NULL));
	}
	return a;
}

/* [{"path", "reason"}] of the plugin files the daemon refused (escaped
 * when they were kept, daemon_plugins.c). */
static json_t *refused_json(struct ktel_daemon *d)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < ktel_daemon__n_refused(d); i++) {
		const struct ktel_refusal *r = ktel_daemon__refused(d, i);

		json_array_append_new(a, json_pack("{s:s, s:s}", "path", r->path, "reason",
						   r->reason));
	}
	return a;
}

static struct ktel_metric *find_metric(struct ktel_daemon *d, const char *name,
				       struct ktel_err *err)
{
	struct ktel_metric *m = ktel_daemon__metric(d, name);

	if (!m)
		ktel_err_set(err, ENOENT, "no metric named \"%s\" (\"list\" shows them)", name);
	return m;
}

/*
 * How attribution names cgroups ("attribution"), or null before a metric
 * attributes: the source in use ("events": the kernel's cgroup events;
 * "walk": walks of cgroupfs alone, "naming_problem" says why), the names
 * cached, and the counters of both sources.
 */
static json_t *attr_naming_json(struct ktel_daemon *d)
{
	struct daemon_attr_naming an;
	json_t *o;

	daemon_plugins__attr_naming(&d->plugins, &an);
	if (!an.active)
		return json_null();
	o = json_pack("{s:s, s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "naming",
		      an.source, "naming_problem", an.problem, "cgroups",
		      (json_int_t)an.names.cgroups, "walks", (json_int_t)an.names.walks, "misses",
		      (json_int_t)an.names.misses, "truncated", (json_int_t)an.names.truncated,
		      "released", (json_int_t)an.names.released, "released_by_event",
		      (json_int_t)an.names.released_event, "events", (json_int_t)an.events.events,
		      "events_lost", (json_int_t)an.events.lost, "events_malformed",
		      (json_int_t)an.events.malformed, "events_path_cut",
		      (json_int_t)an.names.event_paths_cut);
	return o ? o : json_null();
}

/* ---- the operations -------------------------------------------------------- */

static int op_status(void *ctx, json_t *resp, struct ktel_err *err)
{
	struct ktel_daemon *d = ctx;
	const char *stats_by = daemon_self__stats_source(&d->self);
	json_t *plugins = json_array(), *metrics = json_array();
	struct ktel_router_stats rs = {0};
	struct ktel_metric_iter it = {0};
	struct ktel_metric *m;
	double share = 0;

	for (size_t i = 0; i < ktel_daemon__n_plugins(d); i++)
		json_array_append_new(plugins, plugin_json(ktel_daemon__plugin(d, i),
							   stats_by != NULL, &share));
	while ((m = ktel_daemon__next_metric(d, &it)))
		json_array_append_new(metrics, metric_pulls_json(m));
	if (ktel_daemon__router(d))
		ktel_router__stats(ktel_daemon__router(d), &rs);
	json_object_set_new(resp, "daemon", daemon_json(d, stats_by));
	/* Every plugin's share added up: what the daemon's programs cost the
	 * kernel, in CPUs (only while bpf_stats measures it). */
	if (stats_by)
		json_object_set_new(resp, "programs_cpu_share", json_real(share));
	json_object_set_new(resp, "plugins", plugins);
	json_object_set_new(resp, "refused", refused_json(d));
	json_object_set_new(resp, "refused_not_listed",
			    json_integer((json_int_t)ktel_daemon__n_refused_unlisted(d)));
	json_object_set_new(resp, "metrics", metrics);
	json_object_set_new(resp, "sinks", sinks_json(d));
	json_object_set_new(resp, "attribution", attr_naming_json(d));
	json_object_set_new(resp, "router",
			    json_pack("{s:I, s:I}", "batches", (json_int_t)rs.batches, "unrouted",
				      (json_int_t)rs.unrouted));
	return 0;
}

static json_t *metric_list_json(const struct ktel_metric *m)
{
	const struct ktel_metric_desc *md = m->md;
	json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:s, s:s, s:s?, s:I, s:I, s:I, s:s?}", "name",
			      md->name, "plugin", m->lp->plugin->desc.name, "enabled", m->enabled,
			      "attached", m->attached, "model",
			      md->model == KTEL_MODEL_STREAM ? "stream" : "accumulator", "unit",
			      md->unit ?: "", "atom", md->atom_name, "atom_id",
			      (json_int_t)md->atom_id, "interval_ms", (json_int_t)m->interval_ms,
			      "lease_ms", (json_int_t)m->lease_ms, "description", md->description);

	if (!o)
		return NULL;
	ktel_json_set_str(o, "problem", m->problem[0] ? m->problem : NULL);
	/* What is left of a lease, so that `leases` can say when it ends. */
	if (m->enabled && m->lease_ms)
		ktel_json_set_int(o, "lease_left_ms",
				  (json_int_t)uv_timer_get_due_in(&m->lease_timer));
	return o;
}

static int op_list(void *ctx, json_t *resp, struct ktel_err *err)
{
	struct ktel_daemon *d = ctx;
	json_t *metrics = json_array();
	struct ktel_metric_iter it = {0};
	struct ktel_metric *m;

	while ((m = ktel_daemon__next_metric(d, &it)))
		json_array_append_new(metrics, metric_list_json(m));
	if (json_object_set_new(resp, "refused", refused_json(d)) ||
	    json_object_set_new(resp, "refused_not_listed",
				json_integer((json_int_t)ktel_daemon__n_refused_unlisted(d))))
		return -ENOMEM;
	return json_object_set_new(resp, "metrics", metrics) ? -ENOMEM : 0;
}

/* The metric's programs with their ids and attach state, after a change. */
static json_t *metric_progs_json(const struct ktel_metric *m)
{
	const struct ktel_bpf_plugin *bp = m->lp->bpf;
	json_t *a = json_array();

	for (size_t i = 0; bp && i < bp->n_progs; i++) {
		const struct ktel_bpf_prog *p = &bp->progs[i];

		if (!p->selected || !ktel_metric__uses_prog(m, p->name))
			continue;
		json_array_append_new(a,
				      json_pack("{s:s, s:I, s:b}", "name", p->name, "prog_id",
						(json_int_t)p->prog_id, "attached", p->attached));
	}
	return a;
}

static void set_metric_state(json_t *resp, const struct ktel_metric *m)
{
	ktel_json_set_str(resp, "metric", m->md->name);
	ktel_json_set_bool(resp, "enabled", m->enabled);
	ktel_json_set_int(resp, "lease_ms", (json_int_t)m->lease_ms);
	json_object_set_new(resp, "programs", metric_progs_json(m));
}

static int op_enable(void *ctx, const char *name, uint64_t lease_ms, json_t *resp,
		     struct ktel_err *err)
{
	struct ktel_metric *m = find_metric(ctx, name, err);
	int r;

	if (!m)
		return -ENOENT;
	r = ktel_daemon__enable(ctx, m, lease_ms, err);
	if (!r)
		set_metric_state(resp, m);
	return r;
}

static int op_disable(void *ctx, const char *name, json_t *resp, struct ktel_err *err)
{
	struct ktel_metric *m = find_metric(ctx, name, err);
	int r;

	if (!m)
		return -ENOENT;
	r = ktel_daemon__disable(ctx, m, err);
	if (!r)
		set_metric_state(resp, m);
	return r;
}

static int append_records(json_t *a, const struct ktel_record *recs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		json_t *j = ktel_control_record_json(&recs[i]);

		if (!j || json_array_append_new(a, j))
			return -ENOMEM;
	}
	return 0;
}

/* Records as JSON into an array, window by window (ktel_pull_records_fn);
 * the first failure is kept. */
struct json_records {
	json_t *a;
	int r;
};

static void append_window(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct json_records *jr = ctx;

	if (!jr->r)
		jr->r = append_records(jr->a, recs, n);
}

/*
 * The last pull's records of m, appended to a (metric_pull.h rebuilds
 * them: the pull routed them window by window and kept no buffer). Those
 * of a pull too large to keep whole (more than a control answer can carry)
 * after the first ones are added up in *not_kept.
 */
static int append_last_records(struct ktel_metric *m, json_t *a, json_int_t *not_kept,
			       struct ktel_err *err)
{
	struct json_records jr = {.a = a};

	/* An attributed metric's window by name: what its fold emitted. */
	if (m->fold)
		ktel_attr_fold__last(m->fold, append_window, &jr);
	else
		*not_kept += (json_int_t)ktel_metric_pull__last_records(m->mp, append_window, &jr);
	return jr.r ? ktel_err_set(err, ENOMEM, "out of memory") : 0;
}

/* "<what>_not_kept": N, only when some were not. */
static void set_not_kept(json_t *resp, const char *key, json_int_t n)
{
	if (n)
		ktel_json_set_int(resp, key, n);
}

/* m's totals as of its last pull, appended to a (an attributed metric's by
 * name, as its windows carry them). */
static int append_totals(struct ktel_metric *m, json_t *a, struct ktel_err *err)
{
	struct json_records jr = {.a = a};

	if (m->fold)
		ktel_attr_fold__totals(m->fold, append_window, &jr);
	else
		ktel_metric_pull__totals(m->mp, append_window, &jr);
	return jr.r ? ktel_err_set(err, ENOMEM, "out of memory") : 0;
}

/* Pull m now and append what it produced to records. */
static int pull_one(struct ktel_daemon *d, struct ktel_metric *m, json_t *records,
		    json_int_t *not_kept, struct ktel_err *err)
{
	int r = ktel_daemon__pull(d, m, err);

	return r ? r : append_last_records(m, records, not_kept, err);
}

/* Every enabled accumulator metric; the failures' messages in errors. */
static size_t pull_enabled(struct ktel_daemon *d, json_t *records, json_t *errors,
			   json_int_t *not_kept)
{
	struct ktel_metric_iter it = {0};
	struct ktel_metric *m;
	size_t pulled = 0;

	while ((m = ktel_daemon__next_metric(d, &it))) {
		struct ktel_err e;

		if (!m->enabled || !m->mp)
			continue;
		if (pull_one(d, m, records, not_kept, &e) == 0)
			pulled++;
		else
			json_array_append_new(errors, json_string(e.msg));
	}
	return pulled;
}

static int op_pull(void *ctx, const char *name, json_t *resp, struct ktel_err *err)
{
	json_t *records = json_array(), *errors = json_array();
	json_int_t not_kept = 0;
	struct ktel_metric *m;
	int r = 0;

	json_object_set_new(resp, "records", records);
	json_object_set_new(resp, "errors", errors);
	if (name) {
		m = find_metric(ctx, name, err);
		if (!m)
			return -ENOENT;
		r = pull_one(ctx, m, records, &not_kept, err);
		ktel_json_set_int(resp, "pulled", !r);
		set_not_kept(resp, "records_not_kept", not_kept);
		return r;
	}
	ktel_json_set_int(resp, "pulled",
			  (json_int_t)pull_enabled(ctx, records, errors, &not_kept));
	set_not_kept(resp, "records_not_kept", not_kept);
	if (json_array_size(errors))
		r = ktel_err_set(err, EIO, "%zu pull(s) failed, first: %s", json_array_size(errors),
				 json_string_value(json_array_get(errors, 0)));
	return r;
}

static int op_show(void *ctx, const char *name, json_t *resp, struct ktel_err *err)
{
	struct ktel_metric *m = find_metric(ctx, name, err);
	json_int_t not_kept = 0;
	json_t *totals, *window;
	int r;

	if (!m)
		return -ENOENT;
	if (m->sr)
		return ktel_err_set(err, EINVAL,
				    "metric %s: a stream of events, not a histogram: "
				    "its events reach the sinks as they happen (ktelemetryctl watch "
				    "shows them live)",
				    m->md->name);
	if (!m->mp)
		return ktel_err_set(err, ENODEV, "metric %s: %s", m->md->name,
				    m->problem[0] ? m->problem : "not loaded");
	totals = json_array();
	window = json_array();
	json_object_set_new(resp, "metric", json_string(m->md->name));
	json_object_set_new(resp, "unit", json_string(m->md->unit ?: ""));
	ktel_json_set_bool(resp, "enabled", m->enabled);
	json_object_set_new(resp, "last_pull", last_pull_json(m));
	if (m->attr_asked.by != KTEL_ATTR_BY_NONE)
		json_object_set_new(resp, "attribution", attribution_json(m));
	json_object_set_new(resp, "totals", totals);
	json_object_set_new(resp, "window", window);
	r = append_totals(m, totals, err) ?: append_last_records(m, window, &not_kept, err);
	set_not_kept(resp, "window_not_kept", not_kept);
	return r;
}

/* The daemon's message says what runs now (the old config, or the new one
 * without some metrics); errors has every problem the new file had. */
static int op_reload(void *ctx, json_t *errors, struct ktel_err *err)
{
	struct ktel_config_errors errs = {0};
	int r = ktel_daemon__reload(ctx, NULL, &errs, err);

	for (size_t i = 0; i < errs.n; i++)
		json_array_append_new(errors, json_string(errs.msgs[i]));
	ktel_config_errors__clear(&errs);
	return r;
}

static int op_watch(void *ctx, json_t *resp, struct ktel_err *err)
{
	const struct ktel_config *cfg = ktel_daemon__config(ctx);
	json_t *a = json_array();

	json_object_set_new(resp, "sockets", a);
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const char *path = json_string_value(
			json_object_get(cfg->sinks[i].options, "socket"));

		if (strcmp(cfg->sinks[i].type, "stream") == 0 && path)
			json_array_append_new(a, json_pack("{s:s, s:s}", "sink", cfg->sinks[i].name,
							   "socket", path));
	}
	if (!json_array_size(a))
		return ktel_err_set(err, ENOENT,
				    "no sink of type \"stream\" with a \"socket\" in "
				    "the config (%s)",
				    cfg->source);
	return 0;
}

static size_t op_reopen(void *ctx)
{
	return ktel_daemon__reopen_sinks(ctx);
}

const struct ktel_control_ops ktel_daemon_control_ops = {
	.status = op_status,
	.list = op_list,
	.enable = op_enable,
	.disable = op_disable,
	.pull = op_pull,
	.show = op_show,
	.reload = op_reload,
	.watch = op_watch,
	.reopen = op_reopen,
};

int ktel_daemon__start(struct ktel_daemon *d, struct ktel_err *err)
{
	return daemon__start(d, &ktel_daemon_control_ops, err);
}
