// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test fixture: a descriptor of plugin ABI major 2, which this daemon does not speak.
 * Written without KTEL_PLUGIN() so the header fields can be wrong.
 */
#include <ktelemetry/plugin.h>

#include "fx_abi_major.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_abi_major", .map_name = "fx_abi_major_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2),
};

KTEL_PLUGIN_EXPORT const struct ktel_plugin_desc ktel_plugin = {
	.abi_major = 2,
	.abi_minor = 0,
	.struct_size = sizeof(struct ktel_plugin_desc),
	.name = "fx_abi_major",
	.version = "1.0",
	.bpf_object = ktel_bpf_object,
	.bpf_object_size = sizeof(ktel_bpf_object),
	.metrics = metrics,
	.n_metrics = KTEL_ARRAY_SIZE(metrics),
};
/* clang-format on */
