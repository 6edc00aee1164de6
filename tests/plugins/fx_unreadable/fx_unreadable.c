// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a histogram metric whose map value has a bitfield member. */
#include <ktelemetry/plugin.h>

#include "fx_unreadable.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_unreadable", .map_name = "fx_unreadable_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2,
		    .description = "A value the generic decoder refuses (bitfield)"),
};

KTEL_PLUGIN(.name = "fx_unreadable",
	    .version = "1.0",
	    .description = "Test fixture: map value with a bitfield",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
