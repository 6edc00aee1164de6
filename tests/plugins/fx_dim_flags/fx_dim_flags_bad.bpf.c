// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Test fixture: a valid object; the fx_dim_flags_* descriptors are what the
 * loader checks (dim_flags of ABI 1.1, and 1.0 plugins that have none). */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct fx_dev_key {
	__u32 major;
	__u32 minor;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct fx_dev_key);
	__type(value, struct accumulator_value);
} fx_dim_flags_map SEC(".maps");

SEC("tp_btf/mm_compaction_end")
int fx_dim_flags_end(__u64 *ctx)
{
	struct fx_dev_key key = {0};

	INCREMENT_ACCUMULATOR(fx_dim_flags_map, &key, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
