// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a valid plugin whose hooks do not exist in any kernel. */
#include <ktelemetry/plugin.h>

#include "fx_missing_tp.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_missing_tp", .map_name = "fx_missing_tp_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2),
};

KTEL_PLUGIN(.name = "fx_missing_tp", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
