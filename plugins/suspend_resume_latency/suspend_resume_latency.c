// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * SuspendResumeLatency: duration of each suspend/resume phase, in
 * microseconds. Phase names travel as ids labelled by suspend_phase_names.
 */
#include <ktelemetry/plugin.h>

#include "suspend_resume_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "phase", .label_map = "suspend_phase_names"},
};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "suspend_resume_latency",
		    .atom_name = "SuspendResumeLatency",
		    .atom_id = 100006, /* OEM range; see docs/atoms.proto */
		    .map_name = "suspend_resume_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Duration of each suspend/resume phase",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims)),
};

/* One program; the variant entry pins down the prototype it reads. */
static const struct ktel_prog_variant variants[] = {
	{.group = "suspend_resume", .prog = "suspend_resume", .nr_args = 3},
};

KTEL_PLUGIN(.name = "suspend_resume_latency",
	    .version = "1.1", /* 1.1: the histogram keeps the sum */
	    .description = "Suspend/resume phase latency (Android SuspendResumeLatency atom)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
