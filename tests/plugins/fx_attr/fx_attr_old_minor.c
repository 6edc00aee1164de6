// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test fixture: ABI 1.1 with the bit ABI 1.2 gave KTEL_DIM_ATTRIBUTION set twice: it meant nothing then, so the plugin loads with the bit cleared.
 * Written without KTEL_PLUGIN() so the minor can be old.
 */
#include <ktelemetry/plugin.h>

#include "fx_attr_old_minor.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "cpu"}, {.name = "attr"}, {.name = "attr2"}};
static const uint32_t flags[] = {0, KTEL_DIM_ATTRIBUTION, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	{.struct_size = sizeof(struct ktel_metric_desc),
	 .name = "fx_attr_old_minor", .map_name = "fx_attr_map",
	 .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2,
	 .dims = dims, .n_dims = 3, .dim_flags = flags},
};

KTEL_PLUGIN_EXPORT const struct ktel_plugin_desc ktel_plugin = {
	.abi_major = 1,
	.abi_minor = 1,
	.struct_size = sizeof(struct ktel_plugin_desc),
	.name = "fx_attr_old_minor",
	.version = "1.0",
	.bpf_object = ktel_bpf_object,
	.bpf_object_size = sizeof(ktel_bpf_object),
	.metrics = metrics,
	.n_metrics = KTEL_ARRAY_SIZE(metrics),
};
/* clang-format on */
