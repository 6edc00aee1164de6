// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: both programs hook a tracepoint no kernel has, so the loader
 * must report the plugin unsupported (with the reason) instead of failing.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_missing_tp_map SEC(".maps");

SEC("tp_btf/ktel_no_such_tracepoint")
int fx_missing_tp_prog(__u64 *ctx)
{
	__u32 key = 0;

	INCREMENT_ACCUMULATOR(fx_missing_tp_map, &key, 0);
	return 0;
}

SEC("fentry/ktel_no_such_function")
int fx_missing_fn_prog(__u64 *ctx)
{
	__u32 key = 0;

	INCREMENT_ACCUMULATOR(fx_missing_tp_map, &key, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
