// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reload: validate a whole new config and open its new sinks first, then
 * apply the difference between the old config and the new one, or keep
 * running on the old config.
 *
 * The difference is taken between the two configs, never between the new
 * config and the daemon's live state: what an operator changed at run time
 * (`ktelemetryctl disable`, a lease that ran out) stays as it is unless the
 * new file changes that metric's entry.
 */
#include "daemon_internal.h"

#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "label_check.h"
#include "sinks.h"

/* ---- settings that cannot change live ---------------------------------------- */

static void refuse_change(struct ktel_config_errors *errs, const char *key, const char *why,
			  const char *from, const char *to)
{
	ktel_config_errors__add(errs,
				"%s: cannot change while the daemon runs (%s): %s -> %s: "
				"restart ktelemetryd to apply it",
				key, why, from, to);
}

static void check_string(struct ktel_config_errors *errs, const char *key, const char *why,
			 const char *a, const char *b)
{
	char from[300], to[300];

	if (strcmp(a, b) == 0)
		return;
	snprintf(from, sizeof(from), "\"%s\"", a);
	snprintf(to, sizeof(to), "\"%s\"", b);
	refuse_change(errs, key, why, from, to);
}

static void check_gid(struct ktel_config_errors *errs, const char *key, const char *why, gid_t a,
		      gid_t b)
{
	char from[32], to[32];

	if (a == b)
		return;
	snprintf(from, sizeof(from), "gid %u", (unsigned)a);
	snprintf(to, sizeof(to), "gid %u", (unsigned)b);
	refuse_change(errs, key, why, from, to);
}

/* A plugin's params are written into its BPF .rodata when it loads. */
static void check_params(struct ktel_daemon *d, const struct ktel_config *old,
			 const struct ktel_config *cfg, struct ktel_config_errors *errs)
{
	struct ktel_metric *m;

	for_each_metric(&d->plugins, m) {
		const char *name = m->md->name;
		const struct ktel_metric_cfg *a = ktel_config__metric(old, name);
		const struct ktel_metric_cfg *b = ktel_config__metric(cfg, name);
		const json_t *pa = a ? a->params : NULL, *pb = b ? b->params : NULL;
		char key[300], *from, *to;

		if (pa == pb || (pa && pb && json_equal(pa, pb)))
			continue;
		from = pa ? json_dumps(pa, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		to = pb ? json_dumps(pb, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		snprintf(key, sizeof(key), "metrics.%s.params", name);
		refuse_change(errs, key, "the plugin's BPF .rodata is set when it loads",
			      from ? from : "the plugin's defaults",
			      to ? to : "the plugin's defaults");
		free(from);
		free(to);
	}
}

/* "by cgroup, block_subject auto, depth 0, top 20, max_keys 1024, sticky_windows 10, churn_per_hour 80". */
static void attr_text(const struct ktel_attr_cfg *a, char *buf, size_t len)
{
	if (a->by == KTEL_ATTR_BY_NONE) {
		snprintf(buf, len, "by none");
		return;
	}
	snprintf(buf, len,
		 "by %s, block_subject %s, depth %u, top %u, max_keys %u, sticky_windows %u, "
		 "churn_per_hour %u",
		 ktel_attr_by_name(a->by), ktel_attr_subject_name(a->block_subject), a->depth,
		 a->top, a->max_keys, a->sticky_windows, a->churn_per_hour);
}

/*
 * A metric's attribution is set when its plugin loads: the BPF .rodata and
 * the map's size, and the fold made for it. A change is refused, named,
 * rather than left unapplied.
 */
static void check_attribution(struct ktel_daemon *d, const struct ktel_config *cfg,
			      struct ktel_config_errors *errs)
{
	struct ktel_metric *m;

	for_each_metric(&d->plugins, m) {
		const struct ktel_metric_cfg *b = ktel_config__metric(cfg, m->md->name);
		struct ktel_attr_cfg none = {.by = KTEL_ATTR_BY_NONE};
		const struct ktel_attr_cfg *to = b ? &b->attr : &none;
		char key[300], from_s[200], to_s[200];

		const struct ktel_attr_cfg *from = &m->attr_asked;

		if (from->by == KTEL_ATTR_BY_NONE && to->by == KTEL_ATTR_BY_NONE)
			continue;
		/* The export permissions are the config check's alone. */
		if (from->by == to->by && from->block_subject == to->block_subject &&
		    from->depth == to->depth && from->top == to->top &&
		    from->max_keys == to->max_keys && from->sticky_windows == to->sticky_windows &&
		    from->churn_per_hour == to->churn_per_hour)
			continue;
		attr_text(from, from_s, sizeof(from_s));
		attr_text(to, to_s, sizeof(to_s));
		snprintf(key, sizeof(key), "metrics.%s.attribution", m->md->name);
		refuse_change(errs, key,
			      "the plugin's BPF .rodata and map size are set when it loads", from_s,
			      to_s);
	}
}

/*
 * Settings that pinned maps, saved state, the control socket, loaded
 * programs or the process's capabilities hang on: a change is refused (and
 * named) instead of being ignored.
 */
static void check_immutable(struct ktel_daemon *d, const struct ktel_config *old,
			    const struct ktel_config *cfg, struct ktel_config_errors *errs)
{
	check_string(errs, "pin_root", "maps are pinned there", old->pin_root, cfg->pin_root);
	check_gid(errs, "pin_group", "the pins were created with it", old->pin_gid, cfg->pin_gid);
	check_string(errs, "state_file", "the delta state lives there", old->state_file,
		     cfg->state_file);
	check_string(errs, "control_socket", "clients are connected to it", old->control_socket,
		     cfg->control_socket);
	check_gid(errs, "control_group", "the socket was created with it", old->control_gid,
		  cfg->control_gid);
	if (old->drop_privileges != cfg->drop_privileges)
		refuse_change(errs, "drop_privileges", "capabilities are dropped once, at start",
			      old->drop_privileges ? "true" : "false",
			      cfg->drop_privileges ? "true" : "false");
	/* Turning the statistics on needs CAP_SYS_ADMIN, which a daemon that
	 * dropped its privileges no longer has: they are set at start only. */
	if (old->self_bpf_stats != cfg->self_bpf_stats)
		refuse_change(errs, "self_telemetry.bpf_stats",
			      "the kernel's statistics are held "
			      "from start",
			      old->self_bpf_stats ? "true" : "false",
			      cfg->self_bpf_stats ? "true" : "false");
	check_params(d, old, cfg, errs);
	check_attribution(d, cfg, errs);
}

/* ---- sinks ------------------------------------------------------------------- */

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

/* Does the old instance `was` close in this reload (dropped or changed)? */
static bool goes_away(const struct ktel_config *cfg, const struct ktel_sink_cfg *was)
{
	const struct ktel_sink_cfg *now = sink_cfg(cfg, was->name);

	return !now || sink_changed(was, now);
}

/*
 * Options naming something only one instance can hold at a time: a listening
 * TCP port (0 picks a free one, so never shared). Two instances that name the
 * same one cannot run side by side, so the old one closes before the new one
 * opens. A stream sink's socket path is not among them: the new instance
 * binds its socket under another name and takes the path over only once it
 * is complete (sinks/stream), so the old one serves until then and keeps the
 * path when the new one cannot be made.
 */
static const struct {
	const char *type, *key;
} exclusive_options[] = {
	{"prometheus", "port"},
};

/* The value of an option, else its documented default (new reference or NULL). */
static json_t *option_value(const struct ktel_sink_cfg *sc, const char *key)
{
	const struct ktel_sink_ops *ops = ktel_sink_type_find(sc->type);
	json_t *v = json_object_get(sc->options, key);

	if (v)
		return json_incref(v);
	for (const struct ktel_cfg_key *k = ops ? ops->options : NULL; k && k->name; k++)
		if (strcmp(k->name, key) == 0 && k->default_text)
			return json_loads(k->default_text, JSON_DECODE_ANY, NULL);
	return NULL;
}

static bool share_exclusive(const struct ktel_sink_cfg *a, const struct ktel_sink_cfg *b)
{
	bool shared = false;

	if (strcmp(a->type, b->type) != 0)
		return false;
	for (size_t i = 0; !shared && i < sizeof(exclusive_options) / sizeof(exclusive_options[0]);
	     i++) {
		json_t *va, *vb;

		if (strcmp(exclusive_options[i].type, a->type) != 0)
			continue;
		va = option_value(a, exclusive_options[i].key);
		vb = option_value(b, exclusive_options[i].key);
		shared = va && vb && json_equal(va, vb) &&
			 !(json_is_integer(va) && json_integer_value(va) == 0);
		json_decref(va);
		json_decref(vb);
	}
	return shared;
}

/* A sink of the new config that is new or changed, and its prepared instance. */
struct sink_step {
	const struct ktel_sink_cfg *to;
	struct ktel_router_staged *staged;
	/* Shares a listening port with an old instance that closes: it can
	 * only open after that one closed. */
	bool after_close;
};

struct sink_plan {
	struct sink_step steps[KTEL_ROUTER_MAX_SINKS];
	size_t n_steps;
	/* Old instances closed before their successor opened (after_close). */
	const struct ktel_sink_cfg *closed[KTEL_ROUTER_MAX_SINKS];
	size_t n_closed;
	size_t n_failed; /* steps that could not open */
	size_t n_lost;   /* closed old instances that could not open again */
};

/* The steps from old to cfg; cfg has at most KTEL_ROUTER_MAX_SINKS sinks. */
static void plan_sinks(const struct ktel_config *old, const struct ktel_config *cfg,
		       struct sink_plan *p)
{
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i], *was = sink_cfg(old, sc->name);
		struct sink_step *s;

		if (was && !sink_changed(was, sc))
			continue;
		s = &p->steps[p->n_steps++];
		s->to = sc;
		for (size_t j = 0; j < old->n_sinks; j++)
			if (goes_away(cfg, &old->sinks[j]) && share_exclusive(sc, &old->sinks[j]))
				s->after_close = true;
	}
}

/* Open the instances of the steps with after_close == late; every failure is in errs. */
static void prepare_steps(struct ktel_daemon *d, struct sink_plan *p, bool late,
			  struct ktel_config_errors *errs)
{
	for (size_t i = 0; i < p->n_steps; i++) {
		struct sink_step *s = &p->steps[i];
		struct ktel_err err;

		if (s->after_close != late)
			continue;
		if (!ktel_router__prepare_sink(d->router, s->to->name, s->to->type, s->to->options,
					       &s->staged, &err))
			continue;
		p->n_failed++;
		if (sink_cfg(d->cfg, s->to->name))
			ktel_config_errors__add(errs, "%s (kept the previous options)", err.msg);
		else
			ktel_config_errors__add(errs, "%s", err.msg);
	}
}

static void discard_steps(struct sink_plan *p)
{
	for (size_t i = 0; i < p->n_steps; i++) {
		ktel_router__discard_sink(p->steps[i].staged);
		p->steps[i].staged = NULL;
	}
}

/* Close the old instances that hold what an after_close step needs. */
static void close_blocking(struct ktel_daemon *d, const struct ktel_config *cfg,
			   struct sink_plan *p)
{
	const struct ktel_config *old = d->cfg;

	for (size_t j = 0; j < old->n_sinks; j++) {
		const struct ktel_sink_cfg *was = &old->sinks[j];
		bool blocks = false;

		for (size_t i = 0; i < p->n_steps; i++)
			blocks |= p->steps[i].after_close && share_exclusive(p->steps[i].to, was);
		if (!blocks || !goes_away(cfg, was))
			continue;
		ktel_router__remove_sink(d->router, was->name, old->sink_close_timeout_ms, NULL,
					 NULL);
		ktel_log(KTEL_LOG_INFO,
			 "sink %s: closed first: its successor needs its port or "
			 "socket",
			 was->name);
		p->closed[p->n_closed++] = was;
	}
}

/* Open the instances close_blocking closed again, with their old options. */
static void restore_closed(struct ktel_daemon *d, struct sink_plan *p,
			   struct ktel_config_errors *errs)
{
	for (size_t i = 0; i < p->n_closed; i++) {
		const struct ktel_sink_cfg *was = p->closed[i];
		struct ktel_err err;

		if (!ktel_router__add_sink(d->router, was->name, was->type, was->options, &err)) {
			daemon__log_sink_opened(d, was->name, was->type);
			continue;
		}
		p->n_lost++;
		ktel_config_errors__add(errs,
					"sinks.%s: closed so that its new instance could "
					"take its port or socket, and cannot open again with its "
					"previous options: %s: it is not running",
					was->name, err.msg);
	}
}

/* Route to the new instances and close what the new config dropped. */
static void install_steps(struct ktel_daemon *d, const struct ktel_config *cfg, struct sink_plan *p)
{
	const struct ktel_config *old = d->cfg;

	for (size_t i = 0; i < old->n_sinks; i++)
		if (!sink_cfg(cfg, old->sinks[i].name) &&
		    ktel_router__remove_sink(d->router, old->sinks[i].name,
					     old->sink_close_timeout_ms, NULL, NULL) == 0)
			ktel_log(KTEL_LOG_INFO, "sink %s: removed", old->sinks[i].name);
	for (size_t i = 0; i < p->n_steps; i++) {
		struct sink_step *s = &p->steps[i];

		/* Cannot fail: the router holds at most cfg's sinks now. */
		if (ktel_router__install_sink(d->router, s->staged, old->sink_close_timeout_ms)) {
			ktel_router__discard_sink(s->staged);
			ktel_log(KTEL_LOG_ERROR, "sink %s: no room in the router", s->to->name);
		} else {
			daemon__log_sink_opened(d, s->to->name, s->to->type);
		}
		s->staged = NULL;
	}
}

/*
 * Open every sink the new config adds or changes while the old instances
 * keep running; only those that need an old instance's listening port open
 * after it closed. All of them open, or none is installed: on failure every
 * error is in errs and the old instances run (-EINVAL), unless an old
 * instance closed for its successor cannot open again (-EIO, named in errs).
 */
static int apply_sinks(struct ktel_daemon *d, const struct ktel_config *cfg,
		       struct ktel_config_errors *errs)
{
	struct sink_plan *p;
	int rc = 0;

	if (cfg->n_sinks > KTEL_ROUTER_MAX_SINKS) {
		ktel_config_errors__add(errs, "sinks: more than %d sinks", KTEL_ROUTER_MAX_SINKS);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		ktel_config_errors__add(errs, "sinks: out of memory");
		return -EINVAL;
	}
	plan_sinks(d->cfg, cfg, p);
	prepare_steps(d, p, false, errs);
	/* Nothing runs differently yet: with any error so far, stop here. */
	if (errs->n) {
		rc = -EINVAL;
		goto discard;
	}
	close_blocking(d, cfg, p);
	prepare_steps(d, p, true, errs);
	if (p->n_failed) {
		rc = -EINVAL;
		discard_steps(p); /* first: they may hold what the old ones need */
		restore_closed(d, p, errs);
		if (p->n_lost)
			rc = -EIO;
		goto discard;
	}
	install_steps(d, cfg, p);
discard:
	discard_steps(p);
	free(p);
	return rc;
}

/* ---- metrics ----------------------------------------------------------------- */

/* What a config says about one metric (its entry, else the defaults). */
struct metric_setting {
	bool enabled;
	bool emit_zero;
	uint64_t interval_ms;
	uint64_t lease_ms;
};

static void metric_setting(const struct ktel_config *cfg, const char *name,
			   struct metric_setting *ret)
{
	const struct ktel_metric_cfg *mc = ktel_config__metric(cfg, name);

	ret->enabled = ktel_config__metric_enabled(cfg, name);
	ret->emit_zero = mc ? mc->emit_zero : cfg->emit_zero;
	ret->interval_ms = ktel_config__metric_interval(cfg, name);
	ret->lease_ms = mc ? mc->lease_ms : 0;
}

/*
 * Apply to m what changed between the old and the new setting, and nothing
 * else. Sinks need nothing here: records are routed by the installed config.
 * Returns 0, or -errno with err set when the metric cannot be enabled.
 */
static int apply_metric(struct ktel_daemon *d, struct ktel_metric *m,
			const struct metric_setting *was, const struct metric_setting *now,
			struct ktel_err *err)
{
	if (was->emit_zero != now->emit_zero)
		ktel_delta__set_emit_zeros(d->delta, m->md->name, now->emit_zero);
	if (!m->mp && !m->sr)
		return 0;
	if (was->interval_ms != now->interval_ms)
		daemon__set_interval(d, m, now->interval_ms);
	if (was->enabled == now->enabled && was->lease_ms == now->lease_ms)
		return 0;
	if (now->enabled)
		return ktel_daemon__enable(d, m, now->lease_ms, err);
	return ktel_daemon__disable(d, m, err);
}

/* Apply the metric changes from old to the installed config; failures go to errs. */
static size_t apply_metrics(struct ktel_daemon *d, const struct ktel_config *old,
			    struct ktel_config_errors *errs)
{
	struct ktel_metric *m;
	size_t failed = 0;

	for_each_metric(&d->plugins, m) {
		struct metric_setting was, now;
		struct ktel_err err;

		metric_setting(old, m->md->name, &was);
		metric_setting(d->cfg, m->md->name, &now);
		if (!apply_metric(d, m, &was, &now, &err))
			continue;
		failed++;
		ktel_config_errors__add(errs, "metrics.%s: cannot %s: %s", m->md->name,
					now.enabled ? "enable" : "disable", err.msg);
	}
	return failed;
}

/* ---- reload ------------------------------------------------------------------ */

static bool same_dirs(const struct ktel_config *a, const struct ktel_config *b)
{
	if (a->n_plugin_dirs != b->n_plugin_dirs)
		return false;
	for (size_t i = 0; i < a->n_plugin_dirs; i++)
		if (strcmp(a->plugin_dirs[i], b->plugin_dirs[i]) != 0)
			return false;
	return true;
}

/* Install cfg (already validated, its sinks open) and apply the rest of the change. */
static size_t install_config(struct ktel_daemon *d, struct ktel_config *cfg,
			     struct ktel_config_errors *errs)
{
	struct ktel_config *old = daemon__swap_config(d, cfg);
	struct ktel_metric *m;
	size_t failed;

	/* The plugins a rescan loads are checked as they load. */
	for_each_metric(&d->plugins, m)
		ktel_label_check__metric(cfg, m->md, ktel_label_check__log, NULL);
	ktel_label_check__self(cfg, ktel_label_check__log, NULL);
	failed = apply_metrics(d, old, errs);
	daemon_self__configure(&d->self);
	if (!same_dirs(old, cfg)) {
		daemon_plugins__watch(&d->plugins);
		daemon_plugins__rescan(&d->plugins);
	}
	ktel_config__free(old);
	return failed;
}

/* The names of the metrics of the loaded plugins (caller frees the array). */
static const char **loaded_metric_names(const struct ktel_daemon *d, size_t *ret_n)
{
	struct ktel_metric *m;
	const char **names;
	size_t n = 0;

	for_each_metric(&d->plugins, m)
		n++;
	names = calloc(n + 1, sizeof(*names));
	if (!names)
		return NULL;
	n = 0;
	for_each_metric(&d->plugins, m)
		names[n++] = m->md->name;
	*ret_n = n;
	return names;
}

/* Load the new config; metric names are checked against the loaded plugins too. */
static int load_config(struct ktel_daemon *d, const char *path, const char *source,
		       struct ktel_config **ret, struct ktel_config_errors *errs,
		       struct ktel_err *err)
{
	size_t n = 0;
	const char **names = loaded_metric_names(d, &n);
	int rc;

	ktel_config_set_installed_metrics(names, n);
	errs->want_warnings = true; /* logged below; the caller clears errs */
	rc = path ? ktel_config__load_file(path, &d->opts.vars, ret, errs, err)
		  : ktel_config__load_string(d->opts.config_text, source, &d->opts.vars, ret, errs,
					     err);
	ktel_config_set_installed_metrics(NULL, 0);
	free(names);
	return rc;
}

int ktel_daemon__reload(struct ktel_daemon *d, const char *path, struct ktel_config_errors *errs,
			struct ktel_err *err)
{
	struct ktel_config *cfg = NULL;
	const char *source;
	size_t failed;
	int rc;

	if (!path)
		path = d->opts.config_path;
	source = path ? path : "<embedded config>";
	rc = load_config(d, path, source, &cfg, errs, err);
	if (rc)
		return ktel_err_prefix(err, "the running configuration is unchanged: ");
	check_immutable(d, d->cfg, cfg, errs);
	rc = apply_sinks(d, cfg, errs);
	if (rc || errs->n) {
		ktel_config__free(cfg);
		if (rc == -EIO)
			return ktel_err_set(err, EIO,
					    "%s: %zu error%s: the old configuration runs, "
					    "but a sink closed for the reload could not open again "
					    "(named in the errors)",
					    source, errs->n, errs->n == 1 ? "" : "s");
		return ktel_err_set(err, EINVAL,
				    "%s: %zu error%s: the running configuration is "
				    "unchanged",
				    source, errs->n, errs->n == 1 ? "" : "s");
	}
	for (size_t i = 0; i < errs->n_warnings; i++)
		ktel_log(KTEL_LOG_WARN, "reload: %s: %s", source, errs->warnings[i]);
	failed = install_config(d, cfg, errs);
	if (failed)
		return ktel_err_set(err, EIO,
				    "%s: applied, but %zu metric%s could not follow it "
				    "(named in the errors)",
				    source, failed, failed == 1 ? "" : "s");
	ktel_log(KTEL_LOG_INFO, "configuration reloaded from %s", source);
	return 0;
}
