// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * OOM kills: a counter of OOM victims by the victim's process state.
 */
#include <ktelemetry/plugin.h>

#include "oom_kills.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "process_state", .label_enum = "process_state"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {0, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "oom_kills",
		    .atom_name = "OomKills",
		    .atom_id = 100010, /* OEM range; see docs/atoms.proto */
		    .map_name = "oom_kills_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "kills",
		    .scheme = KTEL_HIST_NONE,
		    .value_kind = KTEL_VALUE_COUNTER,
		    .description = "OOM victims (global and memory cgroup OOM killer), by process state",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/*
 * The tracepoint with the victim's task first (6.8+), then the function
 * itself, then the 6.1 tracepoint that only has a pid. nr_args counts
 * TP_PROTO arguments, or the function's parameters for fentry.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "oom_victim", .prog = "oom_mark_victim_task", .nr_args = 2},
	{.group = "oom_victim", .prog = "oom_mark_victim_fentry", .nr_args = 1},
	{.group = "oom_victim", .prog = "oom_mark_victim_kprobe", .nr_args = -1},
	{.group = "oom_victim", .prog = "oom_mark_victim_pid", .nr_args = 1},
};

KTEL_PLUGIN(.name = "oom_kills",
	    .version = "1.1", /* 1.1: attribution */
	    .description = "OOM kill counter by victim process state",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
