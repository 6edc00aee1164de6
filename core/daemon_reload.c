// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reload: validate a whole new config and open its new sinks first, then
 * apply the difference, or keep running on the old config.
 */
#include "daemon_internal.h"

#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

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

/* Replace the open instance of sink name with one configured by to. */
static int reopen(struct ktel_daemon *d, const struct ktel_sink_cfg *to, uint64_t timeout_ms,
		  struct ktel_err *err)
{
	ktel_router__remove_sink(d->router, to->name, timeout_ms, NULL, NULL);
	return ktel_router__add_sink(d->router, to->name, to->type, to->options, err);
}

/*
 * Undo what apply_sinks did before a failure: remove the n_added sinks it
 * added (first in cfg order) and give the n_changed sinks it replaced their
 * previous options again.
 */
static void undo_sinks(struct ktel_daemon *d, const struct ktel_config *cfg, size_t n_added,
		       size_t n_changed)
{
	const struct ktel_config *old = d->cfg;
	struct ktel_err err;

	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i], *was = sink_cfg(old, sc->name);

		if (!was && n_added) {
			ktel_router__remove_sink(d->router, sc->name, 0, NULL, NULL);
			n_added--;
		} else if (was && sink_changed(was, sc) && n_changed) {
			if (reopen(d, was, 0, &err))
				ktel_log(KTEL_LOG_ERROR, "sink %s: cannot reopen with its previous "
					 "options: %s", was->name, err.msg);
			n_changed--;
		}
	}
}

/*
 * Open the sinks the new config adds or changes, then close the ones it
 * drops. Added sinks go in first (nothing else uses their names); a changed
 * one replaces its old instance. When any of them cannot open, everything
 * done here is undone, so the running sinks are exactly the old config's,
 * and the errors are in errs.
 */
static int apply_sinks(struct ktel_daemon *d, const struct ktel_config *cfg,
		       struct ktel_config_errors *errs)
{
	const struct ktel_config *old = d->cfg;
	size_t n_added = 0, n_changed = 0;
	struct ktel_err err;

	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i];

		if (sink_cfg(old, sc->name))
			continue;
		if (ktel_router__add_sink(d->router, sc->name, sc->type, sc->options, &err))
			goto fail;
		n_added++;
	}
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i], *was = sink_cfg(old, sc->name);

		if (!was || !sink_changed(was, sc))
			continue;
		if (reopen(d, sc, old->sink_close_timeout_ms, &err)) {
			ktel_config_errors__add(errs, "%s (kept the previous options)", err.msg);
			/* This one is closed now: put its old instance back first. */
			if (reopen(d, was, 0, &err))
				ktel_log(KTEL_LOG_ERROR, "sink %s: cannot reopen with its previous "
					 "options either: %s", was->name, err.msg);
			goto fail_changed;
		}
		n_changed++;
	}
	for (size_t i = 0; i < cfg->n_sinks; i++)
		if (!sink_cfg(old, cfg->sinks[i].name) ||
		    sink_changed(sink_cfg(old, cfg->sinks[i].name), &cfg->sinks[i]))
			daemon_log_sink_opened(d, cfg->sinks[i].name, cfg->sinks[i].type);
	for (size_t i = 0; i < old->n_sinks; i++)
		if (!sink_cfg(cfg, old->sinks[i].name)) {
			ktel_router__remove_sink(d->router, old->sinks[i].name,
						 old->sink_close_timeout_ms, NULL, NULL);
			ktel_log(KTEL_LOG_INFO, "sink %s: removed", old->sinks[i].name);
		}
	return 0;

fail:
	ktel_config_errors__add(errs, "%s", err.msg);
fail_changed:
	undo_sinks(d, cfg, n_added, n_changed);
	return -EINVAL;
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
					uv_timer_start(&m->timer, daemon_on_pull_timer, interval, interval);
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
		uv_timer_start(&d->self_timer, daemon_on_self_timer, cfg->self_interval_ms,
			       cfg->self_interval_ms);
	else
		uv_timer_stop(&d->self_timer);
	if (!same_dirs(old, cfg)) {
		daemon_watch_dirs(d);
		ktel_daemon__rescan_plugins(d);
	}
	ktel_log(KTEL_LOG_INFO, "configuration reloaded from %s", cfg->source);
	ktel_config__free(old);
	return 0;
}

