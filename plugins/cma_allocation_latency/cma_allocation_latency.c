// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CmaAllocationLatency: cma_alloc() duration per CMA heap and outcome, in
 * microseconds. Heap names travel as ids labelled by the cma_heap_names map.
 * Attributable to the allocating task.
 */
#include <ktelemetry/plugin.h>

#include "cma_allocation_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "heap", .label_map = "cma_heap_names"},
	{.name = "result", .label_enum = "cma_alloc_result"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {0, 0, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "cma_allocation_latency",
		    .atom_name = "CmaAllocationLatency",
		    .atom_id = 100004, /* OEM range; see docs/atoms.proto */
		    .map_name = "cma_alloc_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "CMA allocation latency per heap and result",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/*
 * Upstream tracepoints first, newest prototype first; the Android vendor
 * hooks only when the upstream tracepoint is missing. nr_args counts the
 * TP_PROTO arguments (not the hidden void *__data). Each keeps the start in
 * the task; on a kernel without task storage the loader leaves the task map
 * out and refuses the programs that use it, and the groups fall back to the
 * _hash twins, in the same order.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "cma_alloc_start", .prog = "cma_alloc_start_v5", .nr_args = 5},
	{.group = "cma_alloc_start", .prog = "cma_alloc_start_v3", .nr_args = 3},
	{.group = "cma_alloc_start", .prog = "cma_alloc_start_vh", .nr_args = 1},
	{.group = "cma_alloc_start", .prog = "cma_alloc_start_v5_hash", .nr_args = 5},
	{.group = "cma_alloc_start", .prog = "cma_alloc_start_v3_hash", .nr_args = 3},
	{.group = "cma_alloc_start", .prog = "cma_alloc_start_vh_hash", .nr_args = 1},
	{.group = "cma_alloc_finish", .prog = "cma_alloc_finish_v6", .nr_args = 6},
	{.group = "cma_alloc_finish", .prog = "cma_alloc_finish_v5", .nr_args = 5},
	{.group = "cma_alloc_finish", .prog = "cma_alloc_finish_vh", .nr_args = 6},
	{.group = "cma_alloc_finish", .prog = "cma_alloc_finish_v6_hash", .nr_args = 6},
	{.group = "cma_alloc_finish", .prog = "cma_alloc_finish_v5_hash", .nr_args = 5},
	{.group = "cma_alloc_finish", .prog = "cma_alloc_finish_vh_hash", .nr_args = 6},
};

KTEL_PLUGIN(.name = "cma_allocation_latency",
	    .version = "1.2", /* 1.1: the histogram keeps the sum; 1.2: attribution */
	    .description = "CMA allocation latency (Android CmaAllocationLatency atom)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
