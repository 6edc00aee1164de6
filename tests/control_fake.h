/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A fake daemon behind struct ktel_control_ops (core/daemon/control.h), so the
 * control server and protocol can be driven without a kernel, plugins or
 * privileges: unit tests, the control fuzz target, and integration tests
 * that only need a server to exist. One copy, here; include it, never copy.
 *
 * It knows a few metrics by name (ctl_fake_init), records what it was asked
 * (which operation, the name, the lease), answers like the daemon does in
 * shape (docs/control.md) and can be told to fail its next operation. It
 * never grows: any bytes can be thrown at it.
 */
#ifndef KTEL_CONTROL_FAKE_H
#define KTEL_CONTROL_FAKE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "control.h"
#include "record.h"

#define CTL_FAKE_METRICS 4

struct ctl_fake {
	const char *metrics[CTL_FAKE_METRICS]; /* known names; NULL ends them */
	bool enabled[CTL_FAKE_METRICS];
	uint64_t lease_ms[CTL_FAKE_METRICS];
	const char *reload_errors[3]; /* reload appends these and fails */
	int fail;                     /* >0: the next operation fails with -fail */
	unsigned calls;               /* operations run */
	unsigned pulls;               /* of them, pulls */
	char last_op[16];
	char last_name[128]; /* "" with last_name_null when the name was absent */
	bool last_name_null;
	uint64_t last_lease_ms;
	size_t reopened;
	/* status's attribution: null (false) or a daemon naming cgroups by
	 * walks, as where the kernel's cgroup events cannot load. */
	bool attributes;
};

static inline void ctl_fake_init(struct ctl_fake *f)
{
	memset(f, 0, sizeof(*f));
	f->metrics[0] = "compaction_duration";
	f->metrics[1] = "runq_latency";
	f->enabled[0] = true;
}

/* Count the call; -fail when a failure was asked for (then it is spent). */
static inline int ctl_fake_enter(struct ctl_fake *f, const char *op, const char *name,
				 struct ktel_err *err)
{
	int fail = f->fail;

	f->calls++;
	snprintf(f->last_op, sizeof(f->last_op), "%s", op);
	snprintf(f->last_name, sizeof(f->last_name), "%s", name ? name : "");
	f->last_name_null = !name;
	if (!fail)
		return 0;
	f->fail = 0;
	return ktel_err_set(err, fail, "fake %s failed", op);
}

/* The index of metric name, or -ENOENT with the daemon's message. */
static inline int ctl_fake_find(struct ctl_fake *f, const char *name, struct ktel_err *err)
{
	for (int i = 0; name && i < CTL_FAKE_METRICS && f->metrics[i]; i++)
		if (strcmp(f->metrics[i], name) == 0)
			return i;
	return ktel_err_set(err, ENOENT, "no metric named \"%s\" (\"list\" shows them)",
			    name ? name : "");
}

static inline json_t *ctl_fake_metrics(const struct ctl_fake *f)
{
	json_t *a = json_array();

	for (int i = 0; i < CTL_FAKE_METRICS && f->metrics[i]; i++)
		json_array_append_new(a,
				      json_pack("{s:s, s:s, s:b, s:s, s:s, s:I, s:I, s:n}", "name",
						f->metrics[i], "plugin", "fake", "enabled",
						f->enabled[i], "model", "accumulator", "unit", "ns",
						"interval_ms", (json_int_t)1000, "lease_ms",
						(json_int_t)f->lease_ms[i], "problem"));
	return a;
}

static inline int ctl_fake_status(void *ctx, json_t *resp, struct ktel_err *err)
{
	struct ctl_fake *f = ctx;
	int r = ctl_fake_enter(f, "status", NULL, err);

	if (r)
		return r;
	json_object_set_new(resp, "daemon",
			    json_pack("{s:i, s:s, s:s}", "pid", 1, "config", "fake",
				      "control_socket", "configured"));
	json_object_set_new(resp, "plugins", json_array());
	json_object_set_new(resp, "refused", json_array());
	json_object_set_new(resp, "metrics", ctl_fake_metrics(f));
	json_object_set_new(resp, "sinks", json_array());
	json_object_set_new(resp, "router", json_pack("{s:i, s:i}", "batches", 0, "unrouted", 0));
	json_object_set_new(
		resp, "attribution",
		f->attributes
			? json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}",
				    "naming", "walk", "naming_problem",
				    "cgroup events: no BTF for cgroup_mkdir", "cgroups", 412,
				    "walks", 7, "misses", 3, "truncated", 0, "released", 10007,
				    "released_by_event", 0, "events", 0, "events_lost", 0,
				    "events_malformed", 0, "events_path_cut", 2)
			: json_null());
	return 0;
}

static inline int ctl_fake_list(void *ctx, json_t *resp, struct ktel_err *err)
{
	struct ctl_fake *f = ctx;
	int r = ctl_fake_enter(f, "list", NULL, err);

	if (r)
		return r;
	json_object_set_new(resp, "refused", json_array());
	json_object_set_new(resp, "metrics", ctl_fake_metrics(f));
	return 0;
}

static inline int ctl_fake_toggle(struct ctl_fake *f, const char *op, const char *name, bool on,
				  uint64_t lease_ms, json_t *resp, struct ktel_err *err)
{
	int r = ctl_fake_enter(f, op, name, err), i;

	if (r)
		return r;
	i = ctl_fake_find(f, name, err);
	if (i < 0)
		return i;
	f->last_lease_ms = lease_ms;
	f->enabled[i] = on;
	f->lease_ms[i] = on ? lease_ms : 0;
	json_object_set_new(resp, "metric", json_string(f->metrics[i]));
	json_object_set_new(resp, "enabled", json_boolean(on));
	json_object_set_new(resp, "lease_ms", json_integer((json_int_t)f->lease_ms[i]));
	json_object_set_new(resp, "programs", json_array());
	return 0;
}

static inline int ctl_fake_enable(void *ctx, const char *name, uint64_t lease_ms, json_t *resp,
				  struct ktel_err *err)
{
	return ctl_fake_toggle(ctx, "enable", name, true, lease_ms, resp, err);
}

static inline int ctl_fake_disable(void *ctx, const char *name, json_t *resp, struct ktel_err *err)
{
	return ctl_fake_toggle(ctx, "disable", name, false, 0, resp, err);
}

/* One counter record for metric i, its value the pulls so far. */
static inline json_t *ctl_fake_record(const struct ctl_fake *f, int i)
{
	struct ktel_record rec = {
		.type = KTEL_RECORD_COUNTER,
		.metric = f->metrics[i],
		.unit = "ns",
		.boot_id = "fake",
		.seq = f->pulls,
	};

	rec.counter.delta = 1;
	rec.counter.total = f->pulls;
	return ktel_control_record_json(&rec);
}

static inline int ctl_fake_pull(void *ctx, const char *name, json_t *resp, struct ktel_err *err)
{
	struct ctl_fake *f = ctx;
	json_t *records = json_array();
	int r = ctl_fake_enter(f, "pull", name, err), i, pulled = 0;

	json_object_set_new(resp, "records", records);
	json_object_set_new(resp, "errors", json_array());
	if (r)
		return r;
	f->pulls++;
	if (name) {
		i = ctl_fake_find(f, name, err);
		if (i < 0)
			return i;
		json_array_append_new(records, ctl_fake_record(f, i));
		json_object_set_new(resp, "pulled", json_integer(1));
		return 0;
	}
	for (i = 0; i < CTL_FAKE_METRICS && f->metrics[i]; i++) {
		if (!f->enabled[i])
			continue;
		json_array_append_new(records, ctl_fake_record(f, i));
		pulled++;
	}
	json_object_set_new(resp, "pulled", json_integer(pulled));
	return 0;
}

static inline int ctl_fake_show(void *ctx, const char *name, json_t *resp, struct ktel_err *err)
{
	struct ctl_fake *f = ctx;
	int r = ctl_fake_enter(f, "show", name, err), i;

	if (r)
		return r;
	i = ctl_fake_find(f, name, err);
	if (i < 0)
		return i;
	json_object_set_new(resp, "metric", json_string(f->metrics[i]));
	json_object_set_new(resp, "unit", json_string("ns"));
	json_object_set_new(resp, "enabled", json_boolean(f->enabled[i]));
	json_object_set_new(resp, "last_pull", json_null());
	json_object_set_new(resp, "totals", json_array());
	json_object_set_new(resp, "window", json_array());
	return 0;
}

static inline int ctl_fake_reload(void *ctx, json_t *errors, struct ktel_err *err)
{
	struct ctl_fake *f = ctx;
	int r = ctl_fake_enter(f, "reload", NULL, err);
	size_t n = 0;

	if (r)
		return r;
	for (; n < 3 && f->reload_errors[n]; n++)
		json_array_append_new(errors, json_string(f->reload_errors[n]));
	if (n)
		return ktel_err_set(err, EINVAL,
				    "%zu error(s) in the new config; the running "
				    "configuration is kept",
				    n);
	return 0;
}

static inline int ctl_fake_watch(void *ctx, json_t *resp, struct ktel_err *err)
{
	struct ctl_fake *f = ctx;
	int r = ctl_fake_enter(f, "watch", NULL, err);

	json_object_set_new(resp, "sockets", json_array());
	if (r)
		return r;
	return ktel_err_set(err, ENOENT,
			    "no sink of type \"stream\" with a \"socket\" in the "
			    "config (fake)");
}

static inline size_t ctl_fake_reopen(void *ctx)
{
	struct ctl_fake *f = ctx;

	ctl_fake_enter(f, "reopen", NULL, NULL);
	return ++f->reopened;
}

static const struct ktel_control_ops ctl_fake_ops = {
	.status = ctl_fake_status,
	.list = ctl_fake_list,
	.enable = ctl_fake_enable,
	.disable = ctl_fake_disable,
	.pull = ctl_fake_pull,
	.show = ctl_fake_show,
	.reload = ctl_fake_reload,
	.watch = ctl_fake_watch,
	.reopen = ctl_fake_reopen,
};

#endif /* KTEL_CONTROL_FAKE_H */
