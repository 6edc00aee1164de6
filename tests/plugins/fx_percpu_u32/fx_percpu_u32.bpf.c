// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: the object loads and attaches, but its per-CPU map's value
 * has two __u32 counters. The daemon sums per-CPU copies per 8-byte word,
 * so `errors` would carry into `events`: it refuses the metric, naming the
 * member, and inspect must as well.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>

struct fx_percpu_u32_value {
	__u32 events;
	__u32 errors;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fx_percpu_u32_value);
} fx_percpu_u32_map SEC(".maps");

SEC("tp_btf/mm_compaction_end")
int fx_percpu_u32_end(__u64 *ctx)
{
	struct fx_percpu_u32_value *v;
	__u32 key = 0;

	v = bpf_map_lookup_elem(&fx_percpu_u32_map, &key);
	if (v)
		v->events++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
