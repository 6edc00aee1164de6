// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: compaction counted through a variant group. The vendor hook
 * variant comes first in the table but exists in no kernel, so the loader
 * must skip it and pick the upstream tracepoint. Every event adds
 * fx_variants_weight (a .rodata param) to bucket 0, so a test can tell the
 * param reached the kernel.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

const volatile __u32 fx_variants_weight = 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_variants_map SEC(".maps");

static __always_inline void count(void)
{
	struct accumulator_value *v;
	__u32 key = 0;

	v = bpf_map_lookup_elem(&fx_variants_map, &key);
	if (v)
		__sync_fetch_and_add(&v->buckets[0], fx_variants_weight);
}

SEC("tp_btf/android_vh_ktel_test_compaction")
int fx_variants_vh(__u64 *ctx)
{
	count();
	return 0;
}

SEC("tp_btf/mm_compaction_end")
int fx_variants_tp(__u64 *ctx)
{
	count();
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
