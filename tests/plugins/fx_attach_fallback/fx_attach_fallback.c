// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a variant that loads but cannot attach, a tp_btf fallback. */
#include <ktelemetry/plugin.h>

#include "fx_attach_fallback.bpf.h"

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_attach_fallback", .map_name = "fx_attach_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "events", .scheme = KTEL_HIST_LOG2),
};

static const struct ktel_prog_variant variants[] = {
	{.group = "read", .prog = "fx_attach_tracepoint", .nr_args = -1},
	{.group = "read", .prog = "fx_attach_tp", .nr_args = 2},
};

static const struct ktel_param_desc params[] = {
	{.name = "fx_attach_tgid", .description = "process whose reads count"},
	{.name = "fx_attach_read_nr", .description = "the read syscall's number"},
};

KTEL_PLUGIN(.name = "fx_attach_fallback", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics),
	    .variants = variants, .n_variants = KTEL_ARRAY_SIZE(variants),
	    .params = params, .n_params = KTEL_ARRAY_SIZE(params));
/* clang-format on */
