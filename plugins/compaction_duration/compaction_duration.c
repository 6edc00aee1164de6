// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CompactionDuration: per-zone compaction time, system-wide, in microseconds;
 * attributable to the compacting task.
 */
#include <ktelemetry/plugin.h>

#include "compaction_duration.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "compaction_duration",
		    .atom_name = "CompactionDuration",
		    .atom_id = 100002, /* OEM range; see docs/atoms.proto */
		    .map_name = "compaction_duration_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Memory compaction duration per zone, system-wide",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/*
 * The start is kept in the task where the kernel has
 * task storage; a kernel without it cannot create the task map, the loader
 * leaves it out and refuses the programs that use it, and each group falls
 * back to its hash variant. Both groups fall back together, as both task
 * programs use the map.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "compaction_begin", .prog = "compaction_begin", .nr_args = -1},
	{.group = "compaction_begin", .prog = "compaction_begin_hash", .nr_args = -1},
	{.group = "compaction_end", .prog = "compaction_end", .nr_args = -1},
	{.group = "compaction_end", .prog = "compaction_end_hash", .nr_args = -1},
};

KTEL_PLUGIN(.name = "compaction_duration",
	    .version = "1.2", /* 1.1: the histogram keeps the sum; 1.2: attribution */
	    .description = "Memory compaction duration (Android CompactionDuration atom)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
