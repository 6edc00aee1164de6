// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include <android_bpf_defs.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>
#include <stdint.h>

/*
 * Attribution to the reclaiming task (current: direct reclaim runs
 * synchronously in the task whose allocation needed it), when ktelemetry's
 * ktel_attr.h is there. Android's build has no such header: there this
 * guard is false and what compiles is exactly Android's example, with its
 * key of one member. The key's extra members exist only here, and the
 * descriptor (direct_reclaim_latency.c), which only ktelemetry builds,
 * declares them.
 */
#ifdef __has_include
#if __has_include(<ktel_attr.h>)
#include <ktel_attr.h>
#define DIRECT_RECLAIM_ATTR 1
#endif
#endif

struct direct_reclaim_key {
	uint32_t process_state;
#ifdef DIRECT_RECLAIM_ATTR
	uint32_t pad;  /* explicit: a key's bytes must all be written */
	uint64_t attr; /* the reclaiming task (KTEL_DIM_ATTRIBUTION), 0 when off */
#endif
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
#ifdef DIRECT_RECLAIM_ATTR
KTEL_ATTR_SETTINGS(direct_reclaim_latency_map);
#endif

// Add the reclaim that took us microseconds (a GET_LATENCY_US result) to the
// histogram of the current task's process state.
static inline __attribute__((always_inline)) void direct_reclaim_record(uint64_t us)
{
	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return;

	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	int oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
	enum process_state state = get_process_state(oom_score_adj);

	struct direct_reclaim_key key = {.process_state = (uint32_t)state};
#ifdef DIRECT_RECLAIM_ATTR
	key.attr = ktel_attr_of_current(direct_reclaim_latency_map);
	KTEL_ATTR_INCREMENT_SUM(direct_reclaim_latency_map, &key, us);
#else
	INCREMENT_ACCUMULATOR_SUM(direct_reclaim_latency_map, &key, us);
#endif
}

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
	direct_reclaim_record(GET_LATENCY_US(direct_reclaim_start_map, &pid));
	return 0;
}

#ifdef DIRECT_RECLAIM_ATTR
/*
 * ktelemetry's build keeps the start in the reclaiming task (no entry per
 * thread, no stale start for a reused tid): the same macro calls on a start
 * map declared as a task map (the key is then ignored). These programs come first in the descriptor's variant
 * groups; the two above, whose hash start map every kernel can create, are
 * the fallback for kernels without task storage.
 */
DEFINE_BPF_MAP_GRO(direct_reclaim_task_start, TASK_STORAGE, uint32_t, uint64_t, 0, AID_SYSTEM);

DEFINE_BPF_PROG("tp_btf/mm_vmscan_direct_reclaim_begin", AID_ROOT, AID_SYSTEM,
		direct_reclaim_begin_task)
(uint64_t *args)
{
	(void)args;
	uint32_t pid = (uint32_t)bpf_get_current_pid_tgid();
	SAVE_FIRST_START_TIME(direct_reclaim_task_start, &pid);
	return 0;
}

DEFINE_BPF_PROG("tp_btf/mm_vmscan_direct_reclaim_end", AID_ROOT, AID_SYSTEM,
		direct_reclaim_end_task)
(uint64_t *args)
{
	(void)args;
	uint32_t pid = (uint32_t)bpf_get_current_pid_tgid();
	direct_reclaim_record(GET_LATENCY_US(direct_reclaim_task_start, &pid));
	return 0;
}
#endif
