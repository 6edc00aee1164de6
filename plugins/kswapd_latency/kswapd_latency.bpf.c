// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * KswapdLatency: how long kswapd works per wakeup, per NUMA node, in
 * microseconds: from mm_vmscan_kswapd_wake to the next mm_vmscan_kswapd_sleep
 * of the same node.
 *
 * kswapd traces "wake" before every balance_pgdat() run, and may run it again
 * without sleeping in between, so wake can fire several times before one
 * sleep: the first start is kept (SAVE_FIRST_START_TIME).
 *
 * Variants (see kswapd_latency.c):
 *   kswapd_begin: tp_btf/mm_vmscan_kswapd_wake  | kprobe/balance_pgdat
 *   kswapd_end:   tp_btf/mm_vmscan_kswapd_sleep | kretprobe/balance_pgdat
 * The kprobe pair is for kernels whose tracepoints or BTF differ. Every
 * variant keeps its start keyed by node id and also records which node the
 * current kswapd thread serves (kretprobe has no arguments), so any mix the
 * loader picks pairs correctly: a start with no matching end is simply never
 * counted.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>

#define KSWAPD_MAX_NODES 64

struct kswapd_key {
	__u32 nid;
};

/* Node id -> first wake time (ns). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KSWAPD_MAX_NODES);
	__type(key, __u32);
	__type(value, __u64);
} kswapd_start_map SEC(".maps");

/* kswapd thread id -> node it serves, for the kretprobe variant. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KSWAPD_MAX_NODES);
	__type(key, __u32);
	__type(value, __u32);
} kswapd_node_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KSWAPD_MAX_NODES);
	__type(key, struct kswapd_key);
	__type(value, struct accumulator_value_sum);
} kswapd_latency_map SEC(".maps");

static __always_inline void kswapd_begin(__u32 nid)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_update_elem(&kswapd_node_map, &tid, &nid, BPF_ANY);
	SAVE_FIRST_START_TIME(kswapd_start_map, &nid);
}

static __always_inline void kswapd_end(__u32 nid)
{
	struct kswapd_key key = {.nid = nid};
	__u64 us = GET_LATENCY_US(kswapd_start_map, &nid);

	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return;
	INCREMENT_ACCUMULATOR_SUM(kswapd_latency_map, &key, us);
}

/* mm_vmscan_kswapd_wake(int nid, int zid, int order) */
SEC("tp_btf/mm_vmscan_kswapd_wake")
int kswapd_wake(__u64 *ctx)
{
	kswapd_begin((__u32)ctx[0]);
	return 0;
}

/* mm_vmscan_kswapd_sleep(int nid) */
SEC("tp_btf/mm_vmscan_kswapd_sleep")
int kswapd_sleep(__u64 *ctx)
{
	kswapd_end((__u32)ctx[0]);
	return 0;
}

#ifndef KTEL_KPROBE_UNSUPPORTED_ARCH
/* balance_pgdat(pg_data_t *pgdat, int order, int highest_zoneidx) */
SEC("kprobe/balance_pgdat")
int kswapd_balance_enter(struct pt_regs *ctx)
{
	struct pglist_data *pgdat = (struct pglist_data *)KTEL_KPROBE_ARG1(ctx);

	kswapd_begin((__u32)BPF_CORE_READ(pgdat, node_id));
	return 0;
}

SEC("kretprobe/balance_pgdat")
int kswapd_balance_exit(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 *nid = bpf_map_lookup_elem(&kswapd_node_map, &tid);

	if (nid)
		kswapd_end(*nid);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";
