// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * DmabufRequestSizes: sizes of exported dma-bufs in bytes, per exporter.
 * Exporter names travel as ids labelled by the dmabuf_exporter_names map.
 * Attributable to the allocating task.
 */
#include <ktelemetry/plugin.h>

#include "dmabuf_request_sizes.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_dimension_desc dims[] = {
	{.name = "exporter", .label_map = "dmabuf_exporter_names"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {0, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "dmabuf_request_sizes",
		    .atom_name = "DmabufRequestSizes",
		    .atom_id = 100005, /* OEM range; see docs/atoms.proto */
		    .map_name = "dmabuf_size_map",
		    .model = KTEL_MODEL_ACCUMULATOR,
		    .unit = "bytes",
		    .scheme = KTEL_HIST_LOG2,
		    .description = "Size of each successful dma-buf export, per exporter",
		    .dims = dims,
		    .n_dims = KTEL_ARRAY_SIZE(dims),
		    .dim_flags = dim_flags),
};

/*
 * The 7.0 tracepoint first; fexit on the function before it; a kretprobe
 * where fexit does not attach (arm64 6.1: no BPF trampoline on kernel
 * functions, found by tools/vm-test --arch arm64). All targets are named
 * dma_buf_export: the loader checks btf_trace_dma_buf_export for the first
 * and the FUNC dma_buf_export for the others.
 */
static const struct ktel_prog_variant variants[] = {
	{.group = "dmabuf_export", .prog = "dmabuf_export_tp", .nr_args = 1},
	{.group = "dmabuf_export", .prog = "dmabuf_export_fexit", .nr_args = 1},
	{.group = "dmabuf_export", .prog = "dmabuf_export_kretprobe", .nr_args = -1},
};

KTEL_PLUGIN(.name = "dmabuf_request_sizes",
	    .version = "1.1", /* 1.1: attribution */
	    .description = "dma-buf export sizes (Android DmabufRequestSizes atom)",
	    .bpf_object = ktel_bpf_object,
	    .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics,
	    .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants,
	    .n_variants = KTEL_ARRAY_SIZE(variants));
/* clang-format on */
