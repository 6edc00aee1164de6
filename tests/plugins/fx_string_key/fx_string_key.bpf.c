// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: the object loads and attaches, but its layouts break the
 * generic decoder's dimension rules:
 * - fx_string_key_map's key carries the heap name as `char heap[32]`, and the
 *   descriptor makes it a dimension: dimensions must be integers or enums
 *   (strings travel as ids through a label map);
 * - fx_inverted_names, the label map of the second metric, is keyed by the
 *   name and holds the id, the other way round from what the daemon reads
 *   (integer key, char-array value).
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>

struct fx_string_key {
	char heap[32];
	__u32 result;
};

struct fx_string_value {
	__u64 count;
};

struct fx_id_key {
	__u32 heap;
};

struct fx_inverted_name {
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct fx_string_key);
	__type(value, struct fx_string_value);
} fx_string_key_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct fx_id_key);
	__type(value, struct fx_string_value);
} fx_id_key_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct fx_inverted_name);
	__type(value, __u32);
} fx_inverted_names SEC(".maps");

SEC("tp_btf/mm_compaction_end")
int fx_string_key_end(__u64 *ctx)
{
	struct fx_string_value one = {.count = 1};
	struct fx_string_key key = {.heap = "system"};
	struct fx_inverted_name name = {.name = "system"};
	struct fx_id_key id = {.heap = 0};

	bpf_map_update_elem(&fx_string_key_map, &key, &one, BPF_ANY);
	bpf_map_update_elem(&fx_inverted_names, &name, &id.heap, BPF_ANY);
	bpf_map_update_elem(&fx_id_key_map, &id, &one, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
