// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The maps tools/bench/attr_pull.c reads: runq_latency's shape (a CPU, the
 * attribution id, a histogram with its sum), one for the unattributed pull
 * and one for the attributed one. attr_pull sets max_entries before load
 * and fills them from user space; no program is needed.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct attr_key {
	__u32 cpu;
	__u32 pad;
	__u64 attr;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10);
	__type(key, struct attr_key);
	__type(value, struct accumulator_value_sum);
} plain_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10);
	__type(key, struct attr_key);
	__type(value, struct accumulator_value_sum);
} attr_map SEC(".maps");

char LICENSE[] SEC("license") = "Dual BSD/GPL";
