// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: the object loads and attaches, but its map value carries a
 * bitfield (`flags`), which the generic BTF decoder refuses: inspect and the
 * daemon must say so, naming the member.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>

struct fx_unreadable_value {
	__u64 buckets[32];
	__u32 flags : 3;
	__u32 spare : 29;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fx_unreadable_value);
} fx_unreadable_map SEC(".maps");

SEC("tp_btf/mm_compaction_end")
int fx_unreadable_end(__u64 *ctx)
{
	struct fx_unreadable_value zero = {}, *v;
	__u32 key = 0;

	v = bpf_map_lookup_elem(&fx_unreadable_map, &key);
	if (!v) {
		bpf_map_update_elem(&fx_unreadable_map, &key, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&fx_unreadable_map, &key);
	}
	if (v)
		__sync_fetch_and_add(&v->buckets[0], 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
