// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Configured labels against metric dimensions; see label_check.h. */
#include "label_check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "prom_series.h"

/*
 * The dimensions the daemon's own records carry (router.c: "sink";
 * daemon_self.c: "program", "metric", "plugin"; the stream readers'
 * counters: "metric"), each with the self-telemetry metric that names it
 * in a warning.
 */
static const struct {
	const char *metric, *dim;
} self_dims[] = {
	{"ktel_sink_*", "sink"},
	{"ktel_prog_*", "program"},
	{"ktel_pull_*", "metric"},
	{"ktel_invalid_durations", "plugin"},
	{"ktel_map_write_failures", "plugin"},
	{"ktel_unpaired_events", "plugin"},
	{"ktel_events_counted", "plugin"},
};

static bool routed(const char *const *names, size_t n, const char *sink)
{
	if (!names || !n)
		return true;
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], sink) == 0)
			return true;
	return false;
}

/* The names of the labels sink sc configures (pointing into its options)
 * in *ret_names (malloc'd) and their count in *ret_n: 0 or -ENOMEM. */
static int sink_labels(const struct ktel_sink_cfg *sc, const char ***ret_names, uint32_t *ret_n)
{
	const json_t *labels = json_object_get(sc->options, "labels");
	const char **names, *key;
	uint32_t n = 0;
	json_t *v;

	names = malloc((json_object_size(labels) + 1) * sizeof(*names));
	if (!names)
		return -ENOMEM;
	json_object_foreach((json_t *)labels, key, v)
		names[n++] = key;
	*ret_names = names;
	*ret_n = n;
	return 0;
}

/* fn for each of the n dims that the labels of the sinks named in route[]
 * rename. */
static int check_dims(const struct ktel_config *cfg, const char *const *route, size_t n_route,
		      const char *metric, const char *const *dims, uint32_t n,
		      ktel_label_collision_fn fn, void *ctx)
{
	uint32_t off[KTEL_PROM_MAX_DIM_NAMES], n_labels;
	bool renamed[KTEL_PROM_MAX_DIM_NAMES];
	struct ktel_textbuf b = {0};
	const char **labels;
	int ret = 0;

	for (size_t s = 0; s < cfg->n_sinks && !ret; s++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[s];

		if (!routed(route, n_route, sc->name))
			continue;
		ret = sink_labels(sc, &labels, &n_labels);
		if (ret)
			break;
		ret = ktel_prom_label_names(dims, n, labels, n_labels, &b, off, renamed);
		for (uint32_t i = 0; i < n && !ret; i++)
			if (renamed[i])
				fn(ctx, sc->name, metric, dims[i], b.p + off[i]);
		free(labels);
	}
	free(b.p);
	return ret;
}

int ktel_label_check__metric(const struct ktel_config *cfg, const struct ktel_metric_desc *md,
			     ktel_label_collision_fn fn, void *ctx)
{
	const char *dims[KTEL_PROM_MAX_DIM_NAMES];
	const struct ktel_metric_cfg *mc = NULL;
	uint32_t n = 0, flags = 0;

	if (md->model == KTEL_MODEL_STREAM)
		return 0;
	for (uint32_t i = 0; i < md->n_dims && n < KTEL_PROM_MAX_DIM_NAMES - 1; i++) {
		dims[n++] = md->dims[i].name;
		flags |= md->dim_flags ? md->dim_flags[i] : 0;
	}
	/* The block-device name the pull adds (metric_pull.c). */
	if ((flags & KTEL_DIM_DEV_T) ||
	    ((flags & KTEL_DIM_DEV_MAJOR) && (flags & KTEL_DIM_DEV_MINOR)))
		dims[n++] = KTEL_DEVICE_DIM;
	for (size_t i = 0; i < cfg->n_metrics; i++)
		if (strcmp(cfg->metrics[i].name, md->name) == 0)
			mc = &cfg->metrics[i];
	return check_dims(cfg, mc ? (const char *const *)mc->sinks : NULL, mc ? mc->n_sinks : 0,
			  md->name, dims, n, fn, ctx);
}

int ktel_label_check__self(const struct ktel_config *cfg, ktel_label_collision_fn fn, void *ctx)
{
	int ret = 0;

	if (!cfg->self_enabled)
		return 0;
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(self_dims) && !ret; i++)
		ret = check_dims(cfg, (const char *const *)cfg->self_sinks, cfg->n_self_sinks,
				 self_dims[i].metric, &self_dims[i].dim, 1, fn, ctx);
	return ret;
}

void ktel_label_check__log(void *ctx, const char *sink, const char *metric, const char *dim,
			   const char *exported)
{
	(void)ctx;
	ktel_log(KTEL_LOG_WARN,
		 "sinks.%s.labels: metric %s has a dimension \"%s\" too: the configured label "
		 "keeps the name, the dimension is sent as \"%s\" (docs/sinks.md, "
		 "\"Configured labels\")",
		 sink, metric, dim, exported);
}
