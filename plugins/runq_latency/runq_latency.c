// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Run-queue latency: wakeup-to-run time of tasks, per CPU, in microseconds.
 */
#include <ktelemetry/plugin.h>

#include "runq_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "cpu"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {0, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "runq_latency",
		    .atom_name = "RunqLatency",
		    .atom_id = 100007, /* OEM range; see docs/atoms.proto */
		    .map_name = "runq_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Scheduler run-queue latency (runnable to running), per CPU",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/*
 * Three forms, the cheapest first (runq_latency.bpf.c says how each
 * measures). The scheduler's stamp needs only its switch: runq_switch_si is
 * listed in the wakeup groups too, and stands for them where it is
 * selected; where it is not (a kernel without sched_info, without a CFS run
 * queue's rq, or without task storage: the verifier refuses it), the wakeup
 * hooks come back. Then the start in task storage, then in a hash (kernels
 * without task storage refuse the task programs, and every group falls back
 * alike). sched_switch gained prev_state as its 4th argument in 5.18; the
 * start forms read it, so their prototype is pinned down.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "runq_switch", .prog = "runq_switch_si", .nr_args = -1},
	{.group = "runq_switch", .prog = "runq_switch", .nr_args = 4},
	{.group = "runq_switch", .prog = "runq_switch_hash", .nr_args = 4},
	{.group = "runq_wakeup", .prog = "runq_switch_si", .nr_args = -1},
	{.group = "runq_wakeup", .prog = "runq_wakeup", .nr_args = -1},
	{.group = "runq_wakeup", .prog = "runq_wakeup_hash", .nr_args = -1},
	{.group = "runq_wakeup_new", .prog = "runq_switch_si", .nr_args = -1},
	{.group = "runq_wakeup_new", .prog = "runq_wakeup_new", .nr_args = -1},
	{.group = "runq_wakeup_new", .prog = "runq_wakeup_new_hash", .nr_args = -1},
};

KTEL_PLUGIN(.name = "runq_latency",
	    .version = "1.3", /* 1.1: the histogram keeps the sum; 1.2: attribution;
			     * 1.3: the scheduler's stamp */
	    .description = "Scheduler run-queue latency (wakeup to run), per CPU",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
