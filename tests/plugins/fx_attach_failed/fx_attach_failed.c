// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a start hook that attaches, an end hook that cannot. */
#include <ktelemetry/plugin.h>

#include "fx_attach_failed.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_attach_failed", .map_name = "fx_attach_failed_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2),
};

static const struct ktel_prog_variant variants[] = {
	{.group = "start", .prog = "fx_attach_failed_start", .nr_args = 2},
	{.group = "end", .prog = "fx_attach_failed_end", .nr_args = -1},
};

KTEL_PLUGIN(.name = "fx_attach_failed", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants, .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
