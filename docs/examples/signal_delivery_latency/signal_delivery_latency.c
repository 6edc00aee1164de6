// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* SignalDeliveryLatency: signal sent to signal taken, per signal, in microseconds. */
#include <ktelemetry/plugin.h>

#include "signal_delivery_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "signal", .key_member = "sig"},
};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "signal_delivery_latency",
		    .atom_name = "SignalDeliveryLatency",
		    .atom_id = 100501, /* see signal_delivery_latency.proto */
		    .map_name = "signal_delivery_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Signal sent to signal taken by the target process, per signal",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims)),
};

/* Both programs read arguments by position: pin the prototypes down, so a
 * kernel that changed them reports the plugin unsupported instead of
 * misreading them. */
static const struct ktel_prog_variant variants[] = {
	{.group = "signal_generate", .prog = "signal_generate", .nr_args = 5},
	{.group = "signal_deliver", .prog = "signal_deliver", .nr_args = 3},
};

KTEL_PLUGIN(.name = "signal_delivery_latency",
	    .version = "1.0",
	    .description = "Signal delivery latency (signal_generate to signal_deliver)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
