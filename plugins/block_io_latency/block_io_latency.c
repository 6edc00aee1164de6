// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Block I/O latency: request issue to completion, per disk (major, minor of
 * the whole disk) and operation, in microseconds.
 */
#include <ktelemetry/plugin.h>

#include "block_io_latency.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
/* Labels users join on (docs/sinks.md "Label conventions"): device="nvme0n1"
 * next to major and minor, operation="read" (BLOCK_OP_READ shortened). */
static const struct ktel_dimension_desc dims[] = {
	{.name = "major"},
	{.name = "minor"},
	{.name = "operation", .key_member = "op", .label_enum = "block_op"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {KTEL_DIM_DEV_MAJOR, KTEL_DIM_DEV_MINOR,
				     KTEL_DIM_ENUM_SHORT, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "block_io_latency",
		    .atom_name = "BlockIoLatency",
		    .atom_id = 100008, /* OEM range; see docs/atoms.proto */
		    .map_name = "block_io_latency_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "us",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Block request latency (issue to completion), per disk and operation",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/* block_rq_issue lost its request_queue argument in 5.11; pin down the
 * prototypes the programs read. */
static const struct ktel_prog_variant variants[] = {
	{.group = "block_issue", .prog = "block_issue", .nr_args = 1},
	{.group = "block_complete", .prog = "block_complete", .nr_args = 3},
	/* The submitter: block_io_start where the kernel has it (6.5). */
	{.group = "block_submit", .prog = "block_submit", .nr_args = 1},
	{.group = "block_submit", .prog = "block_insert", .nr_args = 1},
};

/* The submitter is recorded only for attribution: with it off, the submit
 * programs are not loaded and block_issue makes the start entry. By cgroup
 * with the charged cgroup as subject (attribution.block_subject), which
 * needs the io controller on cgroup v2, block_issue reads the cgroup the
 * kernel put in the bio instead (KTEL_ATTR_PROG_BLKCG). */
static const struct ktel_attr_prog attr_progs[] = {
	{.prog = "block_submit", .metric = "block_io_latency"},
	{.prog = "block_insert", .metric = "block_io_latency"},
};
static const uint32_t attr_prog_flags[] = {KTEL_ATTR_PROG_BLKCG, KTEL_ATTR_PROG_BLKCG};

KTEL_PLUGIN(.name = "block_io_latency",
	    .version = "1.4", /* 1.1: the histogram keeps the sum; 1.2: attribution;
			       * 1.3: submit programs only with attribution;
			       * 1.4: by cgroup from the bio where io is on v2 */
	    .description = "Block I/O latency per disk and operation",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants),
	    .attr_progs = attr_progs,
	    .n_attr_progs = KTEL_ARRAY_SIZE(attr_progs),
	    .attr_prog_flags = attr_prog_flags);
/* clang-format on */
