// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * SignalDeliveryLatency: time from a signal being sent to a process
 * (signal:signal_generate, result "delivered" to its pending set) to a
 * thread of that process taking it (signal:signal_deliver, in get_signal()),
 * per signal number, in microseconds. A long tail means the target did not
 * get to run, or ran with the signal blocked.
 *
 * Start and end meet on (tgid, signal): signal_generate names the target
 * task, signal_deliver runs in the thread that dequeues the signal, which for
 * a process-wide signal may be any thread of the group. A standard signal
 * sent again while pending is not queued twice, and the first send is the
 * one the latency counts from (SAVE_FIRST_START_TIME). A real-time signal
 * queued several times counts from its first send.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>

/* include/trace/events/signal.h: enum trace_signal_result. */
#define TRACE_SIGNAL_DELIVERED 0
#define TRACE_SIGNAL_LOSE_INFO 4

struct signal_start_key {
	__u32 tgid;
	__u32 sig;
};

struct signal_key {
	__u32 sig;
};

/* A process may exit with a signal pending: LRU, so orphans age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct signal_start_key);
	__type(value, __u64);
} signal_start_map SEC(".maps");

/* One histogram per signal number (1..64). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65);
	__type(key, struct signal_key);
	__type(value, struct accumulator_value_sum);
} signal_delivery_latency_map SEC(".maps");

/* TP_PROTO(int sig, struct kernel_siginfo *info, struct task_struct *task,
 *          int group, int result) */
SEC("tp_btf/signal_generate")
int signal_generate(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[2];
	int result = (int)ctx[4];
	struct signal_start_key key = {.sig = (__u32)ctx[0]};

	/* Ignored, already pending or dropped: no delivery will follow. */
	if (result != TRACE_SIGNAL_DELIVERED && result != TRACE_SIGNAL_LOSE_INFO)
		return 0;
	key.tgid = (__u32)BPF_CORE_READ(task, tgid);
	SAVE_FIRST_START_TIME(signal_start_map, &key);
	return 0;
}

/* TP_PROTO(int sig, struct kernel_siginfo *info, struct k_sigaction *ka) */
SEC("tp_btf/signal_deliver")
int signal_deliver(__u64 *ctx)
{
	struct signal_start_key start = {
		.tgid = (__u32)(bpf_get_current_pid_tgid() >> 32),
		.sig = (__u32)ctx[0],
	};
	struct signal_key key = {.sig = start.sig};
	__u64 us = GET_LATENCY_US(signal_start_map, &start);

	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return 0;
	INCREMENT_ACCUMULATOR_SUM(signal_delivery_latency_map, &key, us);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
