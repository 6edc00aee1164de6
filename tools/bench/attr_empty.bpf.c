// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Empty programs on the block layer's submit tracepoints, for
 * ktel-bench-attr-cost's `empty` configuration: attached beside the block
 * plugin with attribution off, they cost what one more program per request
 * costs when it does nothing (the tracepoint's dispatch and the program's
 * call), the least that any way of seeing the submitter at submit pays.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>

SEC("tp_btf/block_io_start")
int empty_submit(__u64 *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_insert")
int empty_insert(__u64 *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
