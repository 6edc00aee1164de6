/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Collisions between a sink's configured labels (its "labels" option: the
 * machine's identity) and the dimensions of the metrics routed to it. The
 * sinks rename such a dimension by one rule (sinks/prom_series.h,
 * ktel_prom_label_names(): exported_<name>, as Prometheus does); this says
 * which ones, from the descriptors alone, so that the daemon can warn once
 * at start and reload and --check-config can tell before any start.
 */
#ifndef KTEL_LABEL_CHECK_H
#define KTEL_LABEL_CHECK_H

#include <ktelemetry/plugin.h>

#include "config.h"

/* One collision: records of metric reaching sink carry dimension dim,
 * which the sink sends as exported. */
typedef void (*ktel_label_collision_fn)(void *ctx, const char *sink, const char *metric,
					const char *dim, const char *exported);

/*
 * Call fn for each dimension of md (the declared ones, and "device" when
 * its flags add it) that a configured label of a sink md's records reach
 * (the metric's "sinks", or every sink) renames. Stream metrics (events,
 * which no sink with labels carries) have none. 0 or -ENOMEM.
 */
int ktel_label_check__metric(const struct ktel_config *cfg, const struct ktel_metric_desc *md,
			     ktel_label_collision_fn fn, void *ctx);

/* The same for the daemon's own records (self-telemetry, routed to
 * self_telemetry.sinks), when self-telemetry is enabled. */
int ktel_label_check__self(const struct ktel_config *cfg, ktel_label_collision_fn fn, void *ctx);

/* A ktel_label_collision_fn that logs one warning (ctx unused): what the
 * daemon says at start and reload. */
void ktel_label_check__log(void *ctx, const char *sink, const char *metric, const char *dim,
			   const char *exported);

#endif /* KTEL_LABEL_CHECK_H */
