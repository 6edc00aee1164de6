// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test fixture: attr_prog_flags (ABI 1.4) with KTEL_ATTR_PROG_BLKCG and a bit
 * no minor knows yet: it loads, the unknown bit cleared.
 */
#include <ktelemetry/plugin.h>

#include "fx_attr_flags.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "cpu"}, {.name = "attr"}, {.name = "attr2"}};
static const uint32_t flags[] = {0, KTEL_DIM_ATTRIBUTION, 0};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_attr_flags", .map_name = "fx_attr_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2,
		    .dims = dims, .n_dims = 3, .dim_flags = flags),
};

static const struct ktel_attr_prog attr_progs[] = {
	{.prog = "fx_attr_end", .metric = "fx_attr_flags"},
};
static const uint32_t attr_prog_flags[] = {KTEL_ATTR_PROG_BLKCG | 1u << 30};

KTEL_PLUGIN(.name = "fx_attr_flags",
	    .version = "1.0",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .attr_progs = attr_progs,
	    .n_attr_progs = KTEL_ARRAY_SIZE(attr_progs),
	    .attr_prog_flags = attr_prog_flags);
/* clang-format on */
