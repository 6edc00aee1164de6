// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Run-queue stalls: an event for every wait for a CPU of at least
 * threshold_us (config: metrics.runq_stall_events.params.threshold_us).
 */
#include <ktelemetry/plugin.h>

#include "runq_stall_events.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "cpu"},
};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "runq_stall_events",
		    .atom_name = "RunqStallEvent",
		    .atom_id = 100012, /* OEM range; see docs/atoms.proto */
		    .map_name = "runq_stall_rb",
		    .model = KTEL_MODEL_STREAM,
		    .unit = "events",
		    .description = "Run-queue waits of at least threshold_us: task, CPU, wait, "
				   "and the task switched out for it",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .event_type = "runq_stall_event",
		    .lost_map = "runq_stall_lost"),
};

/*
 * Three forms, the cheapest first (runq_stall_events.bpf.c says how each
 * measures), chosen by the loader as runq_latency's are. The scheduler's
 * stamp needs only its switch: runq_stall_switch_si is listed in the wakeup
 * groups too, and stands for them where it is selected; where it is not (a
 * kernel without sched_info, without a CFS run queue's rq, or without task
 * storage: the verifier refuses it), the wakeup hooks come back. Then the
 * start in task storage, then in a hash (kernels without task storage
 * refuse the task programs, and every group falls back alike).
 * sched_switch gained prev_state as its 4th argument in 5.18; the start
 * forms read it, so their prototype is pinned down.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "runq_switch", .prog = "runq_stall_switch_si", .nr_args = -1},
	{.group = "runq_switch", .prog = "runq_stall_switch", .nr_args = 4},
	{.group = "runq_switch", .prog = "runq_stall_switch_hash", .nr_args = 4},
	{.group = "runq_wakeup", .prog = "runq_stall_switch_si", .nr_args = -1},
	{.group = "runq_wakeup", .prog = "runq_stall_wakeup", .nr_args = -1},
	{.group = "runq_wakeup", .prog = "runq_stall_wakeup_hash", .nr_args = -1},
	{.group = "runq_wakeup_new", .prog = "runq_stall_switch_si", .nr_args = -1},
	{.group = "runq_wakeup_new", .prog = "runq_stall_wakeup_new", .nr_args = -1},
	{.group = "runq_wakeup_new", .prog = "runq_stall_wakeup_new_hash", .nr_args = -1},
};

/*
 * 100 ms by default: a wait a person notices (an input answered that late
 * reads as a hang) and one a scheduler does not make on its own. EEVDF's
 * base slice is 0.75 ms x (1 + log2 CPUs), so on a busy box a task waits a
 * few slices behind the others on its CPU: 10 ms waits are routine at load
 * 2-3 per CPU, and a 10 ms threshold wrote thousands of events a minute
 * there (docs/benchmarks.md, "Default output"). A 100 ms wait needs dozens
 * of runnable tasks per CPU, or something that keeps the CPU from
 * scheduling (a real-time hog, a long non-preemptible section, an
 * interrupt storm): a stall worth an event. runq_latency keeps the whole
 * distribution whatever this is.
 */
static const struct ktel_param_desc params[] = {
	{.name = "threshold_us",
	 .description = "shortest run-queue wait reported, in microseconds (0: every wait)",
	 .default_value = 100000},
};

KTEL_PLUGIN(.name = "runq_stall_events",
	    .version = "1.1", /* 1.1: the scheduler's stamp */
	    .description = "Run-queue waits above a threshold, as events",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants),
	    .params = params,
	    .n_params = KTEL_ARRAY_SIZE(params));
/* clang-format on */
