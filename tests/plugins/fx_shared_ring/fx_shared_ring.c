// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: two stream metrics naming the same ring buffer map. */
#include <ktelemetry/plugin.h>

#include "fx_shared_ring.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_ring_a", .map_name = "fx_shared_rb",
		    .model = KTEL_MODEL_STREAM, .unit = "events", .event_type = "fx_ring_event"),
	KTEL_METRIC(.name = "fx_ring_b", .map_name = "fx_shared_rb",
		    .model = KTEL_MODEL_STREAM, .unit = "events", .event_type = "fx_ring_event"),
};

KTEL_PLUGIN(.name = "fx_shared_ring", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
