// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include <android_bpf_defs.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>
#include <stdint.h>

struct direct_reclaim_key {
	uint32_t process_state;
};

#define DIRECT_RECLAIM_START_MAP_ENTRIES 128
#define DIRECT_RECLAIM_OUTPUT_MAP_ENTRIES 8

// Temporary map to store start time. Key: pid (thread_id), Value: start_time_ns
DEFINE_BPF_MAP_GRO(direct_reclaim_start_map, HASH, uint32_t, uint64_t,
		   DIRECT_RECLAIM_START_MAP_ENTRIES, AID_SYSTEM);

// Output map. Key: direct_reclaim_key, Value: accumulator_value_sum (32 log2
// buckets of microseconds and their sum)
DEFINE_BPF_MAP_GRO(direct_reclaim_latency_map, HASH, struct direct_reclaim_key,
		   struct accumulator_value_sum, DIRECT_RECLAIM_OUTPUT_MAP_ENTRIES, AID_SYSTEM);

DEFINE_BPF_PROG("tp_btf/mm_vmscan_direct_reclaim_begin", AID_ROOT, AID_SYSTEM,
		tracepoint_vmscan_mm_vmscan_direct_reclaim_begin)
(uint64_t *args)
{
	(void)args;
	uint32_t pid = (uint32_t)bpf_get_current_pid_tgid();
	SAVE_FIRST_START_TIME(direct_reclaim_start_map, &pid);
	return 0;
}

DEFINE_BPF_PROG("tp_btf/mm_vmscan_direct_reclaim_end", AID_ROOT, AID_SYSTEM,
		tracepoint_vmscan_mm_vmscan_direct_reclaim_end)
(uint64_t *args)
{
	(void)args;
	uint32_t pid = (uint32_t)bpf_get_current_pid_tgid();
	uint64_t us = GET_LATENCY_US(direct_reclaim_start_map, &pid);
	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return 0;

	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	int oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
	enum process_state state = get_process_state(oom_score_adj);

	struct direct_reclaim_key key = {.process_state = (uint32_t)state};
	INCREMENT_ACCUMULATOR_SUM(direct_reclaim_latency_map, &key, us);
	return 0;
}
