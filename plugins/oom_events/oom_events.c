// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * OOM kill events: one event per OOM victim with its pid, command, uid,
 * oom_score_adj, memory cgroup and size.
 */
#include <ktelemetry/plugin.h>

#include "oom_events.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
/* process_state is an enum member: labelled from its own BTF enum. */
static const struct ktel_dimension_desc dims[] = {
	{.name = "process_state"},
};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "oom_events",
		    .atom_name = "OomEvent",
		    .atom_id = 100011, /* OEM range; see docs/atoms.proto */
		    .map_name = "oom_events_rb",
		    .model = KTEL_MODEL_STREAM,
		    .unit = "events",
		    .description = "OOM victims (global and memory cgroup OOM killer): pid, comm, "
				   "uid, oom_score_adj, memory cgroup inode, total_vm and RSS pages",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .event_type = "oom_event",
		    .lost_map = "oom_events_lost"),
};

/*
 * The tracepoint with the victim's task first (6.8+), then the function
 * itself, then the 6.1 tracepoint that only has a thread id. nr_args counts
 * TP_PROTO arguments, or the function's parameters for fentry.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "oom_victim", .prog = "oom_event_task", .nr_args = 2},
	{.group = "oom_victim", .prog = "oom_event_fentry", .nr_args = 1},
	{.group = "oom_victim", .prog = "oom_event_kprobe", .nr_args = -1},
	{.group = "oom_victim", .prog = "oom_event_pid", .nr_args = 1},
};

KTEL_PLUGIN(.name = "oom_events",
	    .version = "1.0",
	    .description = "OOM kill events (victim pid, comm, memcg, oom_score_adj, pages)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
