// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: value layouts the pull path must read or refuse. No program
 * uses these maps; the unit test needs only their BTF.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct fx_counter_value {
	__u64 count;
};

struct fx_gauge_value {
	__s64 level;
};

/* Per-CPU summing per u64 word would carry a's borrow into b. */
struct fx_narrow_value {
	__s32 a;
	__u32 b;
};

struct fx_wide_value {
	__u64 a;
	__s64 b;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct fx_counter_value);
} fx_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct fx_gauge_value);
} fx_gauges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct fx_narrow_value);
} fx_narrow_percpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct fx_wide_value);
} fx_wide_percpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct accumulator_value_sum);
} fx_hist_percpu SEC(".maps");

/* A histogram without a sum (test_hist_records). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_hist_nosum SEC(".maps");

/* Attributed keys (test_run_keys): a CPU and an attribution id. */
struct fx_attr_key {
	__u32 cpu;
	__u32 pad;
	__u64 attr;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct fx_attr_key);
	__type(value, struct accumulator_value_sum);
} fx_attr_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct fx_attr_key);
	__type(value, struct fx_wide_value);
} fx_attr_wide SEC(".maps");

char LICENSE[] SEC("license") = "Dual BSD/GPL";
