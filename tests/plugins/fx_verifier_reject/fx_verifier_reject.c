// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a program the verifier rejects. */
#include <ktelemetry/plugin.h>

#include "fx_verifier_reject.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_verifier_reject", .map_name = "fx_verifier_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "events", .scheme = KTEL_HIST_LOG2),
};

KTEL_PLUGIN(.name = "fx_verifier_reject", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
