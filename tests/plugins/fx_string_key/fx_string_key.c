// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a string dimension and an inverted label map (see .bpf.c). */
#include <ktelemetry/plugin.h>

#include "fx_string_key.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc string_dims[] = {
	{.name = "heap"},
	{.name = "result"},
};

static const struct ktel_dimension_desc id_dims[] = {
	{.name = "heap", .label_map = "fx_inverted_names"},
};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_string_key", .map_name = "fx_string_key_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "events",
		    .description = "A dimension that is a char array in the key",
		    .dims = string_dims, .n_dims = KTEL_ARRAY_SIZE(string_dims)),
	KTEL_METRIC(.name = "fx_inverted_label_map", .map_name = "fx_id_key_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "events",
		    .description = "A label map keyed by the name instead of the id",
		    .dims = id_dims, .n_dims = KTEL_ARRAY_SIZE(id_dims)),
};

KTEL_PLUGIN(.name = "fx_string_key",
	    .version = "1.0",
	    .description = "Test fixture: string dimension and inverted label map",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
