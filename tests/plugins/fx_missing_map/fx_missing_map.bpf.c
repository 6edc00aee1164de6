// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Test fixture: a valid object; fx_missing_map's descriptor is what the loader refuses. */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_missing_map_map SEC(".maps");

SEC("tp_btf/mm_compaction_end")
int fx_missing_map_end(__u64 *ctx)
{
	__u32 key = 0;

	INCREMENT_ACCUMULATOR(fx_missing_map_map, &key, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
