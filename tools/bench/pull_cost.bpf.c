// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The map tools/bench/pull_cost.c reads: a histogram accumulator with a
 * two-member key, as the built-in plugins have. pull_cost sets max_entries
 * before load and fills the map from user space; no program is needed.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct bench_key {
	__u32 id;
	__u32 cpu;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10);
	__type(key, struct bench_key);
	__type(value, struct accumulator_value);
} bench_hist_map SEC(".maps");

char LICENSE[] SEC("license") = "Dual BSD/GPL";
