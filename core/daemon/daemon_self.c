// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Self-telemetry: the daemon's own health as ordinary records through the
 * same sinks (docs/architecture.md, "Run time").
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

#define SELF_PER_METRIC 3
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
static size_t self_prog_records(struct ktel_daemon *d, const struct ktel_record *tmpl,
				struct ktel_record *out, size_t max)
{
	bool stats = ktel_bpf_stats_enabled();
	size_t n = 0;
	int64_t idx = 0;

	for (size_t i = 0; i < d->n_plugins; i++) {
		struct ktel_bpf_plugin *bp = d->plugins[i]->bpf;
		bool in_use = plugin_in_use(d->plugins[i]);
		uint64_t *prev = self_prev(d->plugins[i]);

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
		}
	return n;
}

/*
 * Per loaded plugin: durations its programs dropped because the clock went
 * backwards (ktel_invalid_durations in bpf_telemetry.h), a counter.
 */
static size_t self_plugin_records(struct ktel_daemon *d, const struct ktel_record *tmpl,
				  struct ktel_record *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_plugins; i++) {
		struct ktel_bpf_plugin *bp = d->plugins[i]->bpf;
		uint64_t invalid, *prev = self_prev(d->plugins[i]);

		if (!bp || !bp->obj || bp->unsupported || !prev || n + SELF_PER_PLUGIN > max ||
		    !plugin_in_use(d->plugins[i]) ||
		    ktel_bpf_global_u64(bp->obj, "ktel_invalid_durations", &invalid) != 0)
			continue;
		self_rec(&out[n], tmpl, "ktel_invalid_durations", "plugin", (int64_t)i,
			 bp->plugin->desc.name);
		out[n].unit = "events";
		self_counter(&out[n++], invalid, &prev[0]);
	}
	return n;
}

/*
 * The daemon's own telemetry, as ordinary records through the same sinks:
 * sink counters (router), pull cost per metric, program health.
 */
void daemon_emit_self(struct ktel_daemon *d)
{
	size_t n_progs = 0, n_metrics = 0, max, n = 0, got = 0;
	struct ktel_record tmpl = {0}, *recs;

	for (size_t i = 0; i < d->n_plugins; i++) {
		n_metrics += d->plugins[i]->n_metrics;
		n_progs += d->plugins[i]->bpf ? d->plugins[i]->bpf->n_progs : 0;
	}
	max = ktel_router__n_sinks(d->router) * KTEL_ROUTER_SELF_PER_SINK +
	      n_metrics * SELF_PER_METRIC + n_progs * SELF_PER_PROG +
	      d->n_plugins * SELF_PER_PLUGIN;
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
	n += self_plugin_records(d, &tmpl, recs + n, max - n);
	ktel_router__route(d->router, recs, n, (const char *const *)d->cfg->self_sinks,
			   d->cfg->n_self_sinks);
	d->self_start_boot = tmpl.end_boottime_ns;
	d->self_start_wall = tmpl.end_wall_ns;
	free(recs);
}

/* A window of a metric's totals, to the cumulative sinks of its batch. */
static void route_totals_window(void *ctx, const struct ktel_record *recs, size_t n)
{
	ktel_router__batch_add(ctx, recs, n);
}

/*
 * Right after start, once, when a sink is cumulative (and not with --once):
 * pull every enabled accumulator metric (a short
 * first window, routed as any pull) and hand its totals, every key's,
 * zero-delta ones included, to the cumulative sinks (Prometheus), so their
 * first scrape shows each series at its cumulative value instead of an
 * empty page until the first interval.
 */
static void route_start_totals(struct ktel_daemon *d)
{
	/* --once pulls exactly once; without a cumulative sink nobody needs it. */
	if (d->opts.once || !ktel_router__any_cumulative(d->router))
		return;
	for (size_t i = 0; i < d->n_plugins; i++)
		for (size_t j = 0; j < d->plugins[i]->n_metrics; j++) {
			struct ktel_metric *m = &d->plugins[i]->metrics[j];
			const struct ktel_metric_cfg *mc;
			struct ktel_err err;

			if (!m->enabled || !m->mp)
				continue;
			if (ktel_daemon__pull(d, m, &err)) {
				ktel_complain(&m->complaint, KTEL_LOG_ERROR, "%s", err.msg);
				continue;
			}
			mc = ktel_config__metric(d->cfg, m->md->name);
			ktel_router__batch_begin_totals(d->router,
							mc ? (const char *const *)mc->sinks : NULL,
							mc ? mc->n_sinks : 0);
			ktel_metric_pull__totals(m->mp, route_totals_window, d->router);
			ktel_router__batch_end(d->router);
		}
}

void daemon_on_self_timer(uv_timer_t *t)
{
	struct ktel_daemon *d = t->data;

	if (!d->start_totals_routed) {
		d->start_totals_routed = true;
		route_start_totals(d);
		return; /* self-telemetry keeps its interval */
	}
	daemon_emit_self(d);
}

void daemon_start_self(struct ktel_daemon *d)
{
	d->self_start_boot = ktel_now_boottime_ns();
	d->self_start_wall = ktel_now_wall_ns();
	uv_timer_init(d->loop, &d->self_timer);
	d->self_timer.data = d;
	d->self_timer_init = true;
	/* First, at once: the start-up totals (route_start_totals). */
	uv_timer_start(&d->self_timer, daemon_on_self_timer, 0,
		       d->cfg->self_enabled ? d->cfg->self_interval_ms : 0);
}

