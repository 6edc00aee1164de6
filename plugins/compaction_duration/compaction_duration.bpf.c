// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * CompactionDuration: time spent compacting one zone (compact_zone(), between
 * the mm_compaction_begin and mm_compaction_end tracepoints), system-wide, in
 * microseconds. Both tracepoints fire in the same task, so the start is keyed
 * by thread id.
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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
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

SEC("tp_btf/mm_compaction_begin")
int compaction_begin(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	SAVE_FIRST_START_TIME(compaction_start_map, &tid);
	return 0;
}

SEC("tp_btf/mm_compaction_end")
int compaction_end(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct compaction_key key = {};
	__u64 us = GET_LATENCY_US(compaction_start_map, &tid);

	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return 0;
	key.attr = ktel_attr_of_current(compaction_duration_map);
	KTEL_ATTR_INCREMENT_SUM(compaction_duration_map, &key, us);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
