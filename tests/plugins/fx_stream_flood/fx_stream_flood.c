// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: counted ring buffer events on demand (see the .bpf.c). */
#include <ktelemetry/plugin.h>

#include "fx_stream_flood.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "label_id", .label_map = "fx_label_names"},
	{.name = "color"},
};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_stream_small", .map_name = "fx_small_rb",
		    .model = KTEL_MODEL_STREAM, .unit = "events",
		    .dims = dims, .n_dims = KTEL_ARRAY_SIZE(dims),
		    .event_type = "fx_stream_event", .lost_map = "fx_small_lost"),
	KTEL_METRIC(.name = "fx_stream_big", .map_name = "fx_big_rb",
		    .model = KTEL_MODEL_STREAM, .unit = "events",
		    .dims = dims, .n_dims = KTEL_ARRAY_SIZE(dims),
		    .event_type = "fx_stream_event", .lost_map = "fx_big_lost"),
};

static const struct ktel_param_desc params[] = {
	{.name = "fx_target_tid", .description = "thread whose syscalls emit", .default_value = -1},
	{.name = "fx_syscall_nr", .description = "syscall that emits", .default_value = -1},
	{.name = "fx_use_big", .description = "1: the 1 MiB ring, 0: the 4 KiB one",
	 .default_value = 0},
	{.name = "fx_burst", .description = "events per syscall (1-16)", .default_value = 1},
};

KTEL_PLUGIN(.name = "fx_stream_flood", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .params = params, .n_params = KTEL_ARRAY_SIZE(params));
/* clang-format on */
