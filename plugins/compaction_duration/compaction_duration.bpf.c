// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * CompactionDuration: time spent compacting one zone (compact_zone(), between
 * the mm_compaction_begin and mm_compaction_end tracepoints), system-wide, in
 * microseconds. Both tracepoints fire in the same task, so the start is the
 * task's: kept in task local storage (compaction_begin/_end), which leaves no
 * entry per thread and no stale start for a reused tid and per event costs
 * what a hash start kept in place does; a task's first compaction allocates
 * its slot (kcompactd pays it once). A hash keyed by thread id is the
 * fallback variant for kernels without task storage
 * (compaction_begin_hash/_end_hash; the loader picks, see
 * compaction_duration.c). docs/benchmarks.md, "Start forms under real
 * events", has the figures.
 *
 * Attribution (ktel_attr.h): the subject is the compacting task, which is
 * current, taken at the end (compact_zone() runs synchronously in it): the
 * allocating task in direct compaction, the writer of
 * /proc/sys/vm/compact_memory, or kcompactd (a kernel thread in the root
 * cgroup, uid 0) for background and proactive compaction, which no one task
 * asked for.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_attr.h>

struct compaction_key {
	__u32 reserved; /* system-wide: always 0 */
	__u32 pad;      /* explicit: a key's bytes must all be written */
	__u64 attr;     /* the compacting task (KTEL_DIM_ATTRIBUTION), 0 when off */
};

KTEL_DEFINE_TASK_START_MAP(compaction_task_start);

/* The fallback's starts, thread id -> ns: kept in place (bpf_telemetry.h), so
 * LRU lets the entries of exited threads go. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} compaction_start_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct compaction_key);
	__type(value, struct accumulator_value_sum);
} compaction_duration_map SEC(".maps");

KTEL_ATTR_SETTINGS(compaction_duration_map);

/* us: a duration macro's result. */
static __always_inline void compaction_record(__u64 us)
{
	struct compaction_key key = {};

	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return;
	key.attr = ktel_attr_of_current(compaction_duration_map);
	KTEL_ATTR_INCREMENT_SUM(compaction_duration_map, &key, us);
}

SEC("tp_btf/mm_compaction_begin")
int compaction_begin(__u64 *ctx)
{
	KTEL_TASK_SAVE_FIRST_START(compaction_task_start, bpf_get_current_task_btf());
	return 0;
}

SEC("tp_btf/mm_compaction_end")
int compaction_end(__u64 *ctx)
{
	compaction_record(KTEL_TASK_LATENCY_US(compaction_task_start, bpf_get_current_task_btf()));
	return 0;
}

SEC("tp_btf/mm_compaction_begin")
int compaction_begin_hash(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	SAVE_FIRST_START_TIME(compaction_start_map, &tid);
	return 0;
}

SEC("tp_btf/mm_compaction_end")
int compaction_end_hash(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	compaction_record(GET_LATENCY_US(compaction_start_map, &tid));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
