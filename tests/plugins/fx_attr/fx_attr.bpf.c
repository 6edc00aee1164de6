// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Test fixture: a valid object with two u64 key members; the fx_attr_*
 * descriptors are what the loader checks. */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct fx_attr_key {
	__u32 cpu;
	__u32 pad;
	__u64 attr;
	__u64 attr2;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct fx_attr_key);
	__type(value, struct accumulator_value);
} fx_attr_map SEC(".maps");

SEC("tp_btf/mm_compaction_end")
int fx_attr_end(__u64 *ctx)
{
	struct fx_attr_key key = {0};

	INCREMENT_ACCUMULATOR(fx_attr_map, &key, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
