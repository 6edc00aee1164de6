// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a variant group (vendor hook first) and a .rodata param. */
#include <ktelemetry/plugin.h>

#include "fx_variants.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_variants", .map_name = "fx_variants_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "events", .scheme = KTEL_HIST_LOG2),
};

static const struct ktel_prog_variant variants[] = {
	{.group = "compaction_end", .prog = "fx_variants_vh", .nr_args = -1},
	{.group = "compaction_end", .prog = "fx_variants_tp", .nr_args = -1},
};

static const struct ktel_param_desc params[] = {
	{.name = "fx_variants_weight", .description = "added per event", .default_value = 1},
};

KTEL_PLUGIN(.name = "fx_variants", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants, .n_variants = KTEL_ARRAY_SIZE(variants),
	    .params = params, .n_params = KTEL_ARRAY_SIZE(params));
/* clang-format on */
