// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: fx_replace version 1 (metric fx_replace_old only). */
#include <ktelemetry/plugin.h>

#include "fx_replace_v1.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_replace_old", .map_name = "fx_replace_old_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2),
};

KTEL_PLUGIN(.name = "fx_replace", .version = "1",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
