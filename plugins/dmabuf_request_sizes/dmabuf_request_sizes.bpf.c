// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * DmabufRequestSizes: size in bytes of each successfully exported dma-buf,
 * per exporter (the exporter's exp_name, e.g. "system" or "vgem", as an id
 * labelled by dmabuf_exporter_names). The value keeps the byte sum too, so a
 * record carries the total exported as well as the distribution.
 *
 * Variants (group dmabuf_export, see dmabuf_request_sizes.c):
 *   tp_btf/dma_buf_export(struct dma_buf *dmabuf)    Linux 7.0 and later
 *   fexit/dma_buf_export(const struct dma_buf_export_info *exp_info)
 *                                                    before 7.0
 *   kretprobe/dma_buf_export                         where fexit cannot
 *                                                    attach: arm64 before 6.4
 *                                                    has no ftrace direct
 *                                                    calls (-ENOTSUPP)
 * The tracepoint fires only for a successful export; the fexit and
 * kretprobe programs check the returned pointer themselves.
 *
 * Attribution (ktel_attr.h): the subject is the allocating task, current in
 * all three: dma_buf_export() runs synchronously in the task that asked the
 * exporter for the buffer (a dma-heap or driver ioctl). Where an allocator
 * service allocates on behalf of an app (Android's gralloc), that service is
 * the subject: the kernel does not know whom it serves.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_labels.h>
#include <ktel_attr.h>

#define DMABUF_MAX_EXPORTERS 64

struct dmabuf_key {
	__u32 exporter; /* id in dmabuf_exporter_names */
	__u32 pad;      /* explicit: a key's bytes must all be written */
	__u64 attr;     /* the allocating task (KTEL_DIM_ATTRIBUTION), 0 when off */
};

KTEL_DEFINE_LABEL_MAPS(dmabuf_exporter, DMABUF_MAX_EXPORTERS);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DMABUF_MAX_EXPORTERS);
	__type(key, struct dmabuf_key);
	__type(value, struct accumulator_value_sum);
} dmabuf_size_map SEC(".maps");

KTEL_ATTR_SETTINGS(dmabuf_size_map);

static __always_inline void dmabuf_record(const char *exp_name, __u64 size)
{
	struct ktel_label label = {};
	struct dmabuf_key key = {};

	ktel_label_read(&label, exp_name);
	key.exporter = KTEL_LABEL_ID(dmabuf_exporter, &label);
	key.attr = ktel_attr_of_current(dmabuf_size_map);
	KTEL_ATTR_INCREMENT_SUM(dmabuf_size_map, &key, size);
}

/* dma_buf_export(struct dma_buf *dmabuf), Linux 7.0+. */
SEC("tp_btf/dma_buf_export")
int dmabuf_export_tp(__u64 *ctx)
{
	struct dma_buf *buf = (struct dma_buf *)ctx[0];

	if (!buf)
		return 0;
	dmabuf_record(BPF_CORE_READ(buf, exp_name), BPF_CORE_READ(buf, size));
	return 0;
}

/*
 * struct dma_buf *dma_buf_export(const struct dma_buf_export_info *exp_info):
 * ctx[0] is exp_info, ctx[1] the return value (an ERR_PTR on failure).
 */
SEC("fexit/dma_buf_export")
int dmabuf_export_fexit(__u64 *ctx)
{
	const struct dma_buf_export_info *info = (const void *)ctx[0];
	__u64 ret = ctx[1];

	if (!info || !ret || KTEL_IS_ERR_VALUE(ret))
		return 0;
	dmabuf_record(BPF_CORE_READ(info, exp_name), BPF_CORE_READ(info, size));
	return 0;
}

#ifndef KTEL_KPROBE_UNSUPPORTED_ARCH
/*
 * The return value only (a kretprobe has no arguments left): the struct
 * dma_buf it returns carries the same size and exp_name the export info had.
 */
SEC("kretprobe/dma_buf_export")
int dmabuf_export_kretprobe(struct pt_regs *ctx)
{
	__u64 ret = KTEL_KPROBE_RET(ctx);
	struct dma_buf *buf = (struct dma_buf *)ret;

	if (!ret || KTEL_IS_ERR_VALUE(ret))
		return 0;
	dmabuf_record(BPF_CORE_READ(buf, exp_name), BPF_CORE_READ(buf, size));
	return 0;
}
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";
