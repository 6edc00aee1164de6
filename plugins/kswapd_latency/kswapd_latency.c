// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * KswapdLatency: time kswapd works per wakeup, per NUMA node, in
 * microseconds. Tracepoints first; the kprobe pair on balance_pgdat() is the
 * fallback for kernels whose tracepoints are missing or changed.
 */
#include <ktelemetry/plugin.h>

#include "kswapd_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "node", .key_member = "nid"},
};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "kswapd_latency",
		    .atom_name = "KswapdLatency",
		    .atom_id = 100003, /* OEM range; see docs/atoms.proto */
		    .map_name = "kswapd_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "kswapd run time from wakeup to sleep, per NUMA node",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims)),
};

/* nr_args counts the tracepoint's TP_PROTO arguments (not the hidden
 * void *__data); kprobes take any. */
static const struct ktel_prog_variant variants[] = {
	{.group = "kswapd_begin", .prog = "kswapd_wake", .nr_args = 3},
	{.group = "kswapd_begin", .prog = "kswapd_balance_enter", .nr_args = -1},
	{.group = "kswapd_end", .prog = "kswapd_sleep", .nr_args = 1},
	{.group = "kswapd_end", .prog = "kswapd_balance_exit", .nr_args = -1},
};

KTEL_PLUGIN(.name = "kswapd_latency",
	    .version = "1.1", /* 1.1: the histogram keeps the sum */
	    .description = "kswapd latency (Android KswapdLatency atom)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
