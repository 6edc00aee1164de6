// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test fixture: a plugin built against ABI 1.0: minor 0, and struct sizes that end before dim_flags.
 * Written without KTEL_PLUGIN()/KTEL_METRIC() so the version can be old.
 */
#include <ktelemetry/plugin.h>

#include "fx_dim_flags_v10.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {{.name = "major"}, {.name = "minor"}};
/* A major without its minor: refused when read as ABI 1.1 flags. */
static const uint32_t flags[] = {KTEL_DIM_DEV_MAJOR, 0};

static const struct ktel_metric_desc metrics[] = {
	{.struct_size = offsetof(struct ktel_metric_desc, dim_flags),
	 .name = "fx_dim_flags_v10", .map_name = "fx_dim_flags_map",
	 .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2,
	 .dims = dims, .n_dims = 2, .dim_flags = flags},
};

KTEL_PLUGIN_EXPORT const struct ktel_plugin_desc ktel_plugin = {
	.abi_major = 1,
	.abi_minor = 0,
	.struct_size = offsetof(struct ktel_plugin_desc, n_params) + sizeof(uint32_t),
	.name = "fx_dim_flags_v10",
	.version = "1.0",
	.bpf_object = ktel_bpf_object,
	.bpf_object_size = sizeof(ktel_bpf_object),
	.metrics = metrics,
	.n_metrics = KTEL_ARRAY_SIZE(metrics),
};
/* clang-format on */
