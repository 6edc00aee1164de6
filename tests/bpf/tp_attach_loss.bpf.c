// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Completions of one block device as two tracepoints see them, driven by
 * tests/integration/test_tp_attach_loss.c: count_complete on
 * block_rq_complete and count_done on block_io_done (where the device's own
 * statistics count a request) add up the device's reads in counts; churn,
 * a program that does nothing, is attached to block_rq_complete and
 * detached again in a loop by the test, as another tool's programs come and
 * go on a shared machine.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "loop_device_map.h"

/* Key 0: reads seen at block_rq_complete, key 1: at block_io_done. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void count_if_ours(struct request *rq, __u32 slot)
{
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	__u64 *n;

	if (!disk)
		return;
	if (!is_device((__u32)BPF_CORE_READ(disk, major),
		       (__u32)BPF_CORE_READ(disk, first_minor)) ||
	    (BPF_CORE_READ(rq, cmd_flags) & 0xff) != 0 /* REQ_OP_READ */)
		return;
	n = bpf_map_lookup_elem(&counts, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("tp_btf/block_rq_complete")
int count_complete(__u64 *ctx)
{
	count_if_ours((struct request *)ctx[0], 0);
	return 0;
}

SEC("tp_btf/block_io_done")
int count_done(__u64 *ctx)
{
	count_if_ours((struct request *)ctx[0], 1);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int churn(__u64 *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
