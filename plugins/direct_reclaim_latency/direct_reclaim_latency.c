// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * DirectReclaimLatency: time a task spends in direct reclaim, in microseconds,
 * by the process state its oom_score_adj maps to. The BPF program is the
 * example from Android's documentation, with two changes: it keeps the sum
 * of the microseconds too (GET_LATENCY_US, INCREMENT_ACCUMULATOR_SUM and
 * struct accumulator_value_sum where Android has GET_LATENCY_BUCKET,
 * INCREMENT_ACCUMULATOR and struct accumulator_value, which keep no sum),
 * and the end's recording is a function both end programs share. Built with
 * ktelemetry's headers it also attributes each reclaim to the reclaiming
 * task and has a variant keeping the start in the task; a guard on
 * ktel_attr.h keeps Android's build of it to the example.
 */
#include <ktelemetry/plugin.h>

#include "direct_reclaim_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "process_state", .label_enum = "process_state"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {0, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "direct_reclaim_latency",
		    .atom_name = "DirectReclaimLatency",
		    .atom_id = 100001, /* OEM range; see docs/atoms.proto */
		    .map_name = "direct_reclaim_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Direct reclaim duration per task, by process state",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/*
 * The start is kept in the task where the kernel has
 * task storage; a kernel without it cannot create the task map, the loader
 * leaves it out and refuses the programs that use it, and both groups fall
 * back to Android's programs, whose start map is a hash keyed by thread id.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "direct_reclaim_begin", .prog = "direct_reclaim_begin_task", .nr_args = -1},
	{.group = "direct_reclaim_begin", .prog = "tracepoint_vmscan_mm_vmscan_direct_reclaim_begin", .nr_args = -1},
	{.group = "direct_reclaim_end", .prog = "direct_reclaim_end_task", .nr_args = -1},
	{.group = "direct_reclaim_end", .prog = "tracepoint_vmscan_mm_vmscan_direct_reclaim_end", .nr_args = -1},
};

KTEL_PLUGIN(.name = "direct_reclaim_latency",
	    .version = "1.2", /* 1.1: the histogram keeps the sum; 1.2: attribution */
	    .description = "Direct reclaim latency (Android DirectReclaimLatency atom)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
