// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Memcg reclaim latency: time a task spends reclaiming from its memory
 * cgroup because the cgroup hit its limit (try_to_free_mem_cgroup_pages(),
 * between mm_vmscan_memcg_reclaim_begin and _end), in microseconds, by the
 * process state its oom_score_adj maps to - as DirectReclaimLatency does for
 * global direct reclaim. Both tracepoints fire in the reclaiming task, so the
 * start is the task's: kept in task local storage (memcg_reclaim_begin/_end:
 * no entry per thread, no stale start for a reused tid, per event the cost
 * of a hash start kept in place), with a hash keyed by thread id as the
 * fallback variant for kernels without task storage
 * (memcg_reclaim_begin_hash/_end_hash; the loader picks, see
 * memcg_reclaim_latency.c). The programs read no
 * tracepoint argument, so the prototype changes of these events do not
 * matter.
 *
 * Attribution (ktel_attr.h): the subject is the reclaiming task, which is
 * current: the reclaim runs synchronously in the task that charged memory.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_attr.h>

struct memcg_reclaim_key {
	__u32 process_state; /* enum process_state */
	__u32 pad;           /* explicit: a key's bytes must all be written */
	__u64 attr;          /* the reclaiming task (KTEL_DIM_ATTRIBUTION), 0 when off */
};

/* Memcg reclaim does not nest, so a begin replaces any start a missed end
 * left behind. */
KTEL_DEFINE_TASK_START_MAP(memcg_reclaim_task_start);

/* The fallback's starts, thread id -> ns, kept in place (bpf_telemetry.h):
 * LRU so that the entries of exited threads cannot fill the map. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} memcg_reclaim_start_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct memcg_reclaim_key);
	__type(value, struct accumulator_value_sum);
} memcg_reclaim_latency_map SEC(".maps");

KTEL_ATTR_SETTINGS(memcg_reclaim_latency_map);

/* us: a duration macro's result. */
static __always_inline void memcg_reclaim_record(__u64 us)
{
	struct memcg_reclaim_key key = {};
	struct task_struct *task;

	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return;
	task = (struct task_struct *)bpf_get_current_task();
	key.process_state = get_process_state(BPF_CORE_READ(task, signal, oom_score_adj));
	key.attr = ktel_attr_of_current(memcg_reclaim_latency_map);
	KTEL_ATTR_INCREMENT_SUM(memcg_reclaim_latency_map, &key, us);
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int memcg_reclaim_begin(__u64 *ctx)
{
	KTEL_TASK_SAVE_START(memcg_reclaim_task_start, bpf_get_current_task_btf());
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int memcg_reclaim_end(__u64 *ctx)
{
	memcg_reclaim_record(
		KTEL_TASK_LATENCY_US(memcg_reclaim_task_start, bpf_get_current_task_btf()));
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int memcg_reclaim_begin_hash(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	SAVE_START_TIME(memcg_reclaim_start_map, &tid);
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int memcg_reclaim_end_hash(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	memcg_reclaim_record(GET_LATENCY_US(memcg_reclaim_start_map, &tid));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
