// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: reads past the end of a map value (word 40 of a 32-word
 * value). The verifier refuses the program at load ("invalid access to map
 * value, value_size=256 off=320 size=8"); nothing else is wrong with it.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_verifier_map SEC(".maps");

SEC("tp_btf/sys_enter")
int fx_verifier_prog(__u64 *ctx)
{
	struct accumulator_value *v;
	__u32 key = 0;

	v = bpf_map_lookup_elem(&fx_verifier_map, &key);
	if (!v)
		return 0;
	/* Out of bounds: this is the bug the verifier must name. */
	return (int)((__u64 *)v)[40];
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
