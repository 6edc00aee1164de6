// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Test fixture: counts every syscall entry in bucket 0, so it always collects. */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_constructor_map SEC(".maps");

SEC("tp_btf/sys_enter")
int fx_constructor_tp(__u64 *ctx)
{
	struct accumulator_value *v;
	__u32 key = 0;

	v = bpf_map_lookup_elem(&fx_constructor_map, &key);
	if (v)
		__sync_fetch_and_add(&v->buckets[0], 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
