// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a per-CPU value with 4-byte counters (see .bpf.c). */
#include <ktelemetry/plugin.h>

#include "fx_percpu_u32.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_percpu_u32", .map_name = "fx_percpu_u32_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "events",
		    .description = "A per-CPU value with 4-byte members"),
};

KTEL_PLUGIN(.name = "fx_percpu_u32",
	    .version = "1.0",
	    .description = "Test fixture: per-CPU value with 4-byte members",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
