// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Memcg reclaim latency: time tasks spend reclaiming from their memory
 * cgroup at its limit, by process state, in microseconds.
 */
#include <ktelemetry/plugin.h>

#include "memcg_reclaim_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "process_state", .label_enum = "process_state"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {0, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "memcg_reclaim_latency",
		    .atom_name = "MemcgReclaimLatency",
		    .atom_id = 100009, /* OEM range; see docs/atoms.proto */
		    .map_name = "memcg_reclaim_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Memory cgroup limit reclaim duration per task, by process state",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/*
 * The start is kept in the task where the kernel has
 * task storage; a kernel without it cannot create the task map, the loader
 * leaves it out and refuses the programs that use it, and both groups fall
 * back to their hash variants.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "memcg_reclaim_begin", .prog = "memcg_reclaim_begin", .nr_args = -1},
	{.group = "memcg_reclaim_begin", .prog = "memcg_reclaim_begin_hash", .nr_args = -1},
	{.group = "memcg_reclaim_end", .prog = "memcg_reclaim_end", .nr_args = -1},
	{.group = "memcg_reclaim_end", .prog = "memcg_reclaim_end_hash", .nr_args = -1},
};

KTEL_PLUGIN(.name = "memcg_reclaim_latency",
	    .version = "1.2", /* 1.1: the histogram keeps the sum; 1.2: attribution */
	    .description = "Memory cgroup reclaim latency",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
