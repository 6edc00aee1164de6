// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Programs for tools/bench/overhead.c: the per-event cost of a program on the
 * syscall entry/exit tracepoints, measured from a tight getppid() loop.
 *
 * Two dispatch flavours of each shape, so that every comparison is made on
 * the same hook type:
 *   tp_btf/sys_enter|sys_exit            BTF raw tracepoint (what plugins use)
 *   tracepoint/raw_syscalls/sys_enter|…  classic tracepoint (what bpftrace
 *                                        0.17 attaches to: it has no
 *                                        rawtracepoint probe type)
 * Shapes:
 *   empty_*   return 0: the floor, the cost of the dispatch alone.
 *   acc_*     the Android macros, the accumulator shape of every latency
 *             plugin: start time per thread on enter (SAVE_FIRST_START_TIME),
 *             on exit the log2 bucket of the elapsed microseconds
 *             (GET_LATENCY_BUCKET) added to a histogram
 *             (INCREMENT_ACCUMULATOR), the start map an LRU hash keyed by
 *             tid whose entry the macros keep in place. Filtered on the
 *             benchmark's tgid, exactly like the bpftrace one-liner's
 *             /pid == X/.
 *   atask_*   acc_* with the start map declared as a task map
 *             (DEFINE_BPF_MAP(..., TASK_STORAGE, ...)): the same macro calls,
 *             the start kept in the current task.
 *   adel_*    acc_* with the start inserted on enter and deleted on exit,
 *             written out: what the macros did before they kept the start in
 *             place, and what Android's own header does.
 *   task_*    acc_* with the start in task local storage through the
 *             bpf_telemetry.h macros (KTEL_TASK_SAVE_FIRST_START and
 *             KTEL_TASK_LATENCY_BUCKET): runq_latency's shape before 1.1.
 *   tsum_*    task_* keeping the sum too (KTEL_TASK_LATENCY_US and
 *             INCREMENT_ACCUMULATOR_SUM into acc_sum_map, a struct
 *             accumulator_value_sum): the shape runq_latency uses now.
 *   x_*       variants of acc_* (tp_btf only) that show where its time goes:
 *             x_start  the start map alone (no histogram update);
 *             x_inpl   the in-place start of acc_* written out by hand:
 *                      the hash entry per tid is written and zeroed,
 *                      inserted only when missing (the macros' code);
 *             x_task   the start in task local storage by hand (atask_*);
 *             x_clock  the filter and the two clock reads alone.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>
#include <android_bpf_defs.h>

/* The benchmark process; set before load. */
const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __u64);
} start_map SEC(".maps");

/* The macros keep a start in place in an LRU hash (a plain hash's is deleted
 * at the end: bpf_telemetry.h, KTEL_START_DELETED). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __u64);
} lru_start_map SEC(".maps");

/* One histogram, like bpftrace's keyless @h = hist(...). */
struct acc_key {
	__u32 id;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct acc_key);
	__type(value, struct accumulator_value);
} acc_map SEC(".maps");

/* acc_map with the sum after the buckets (the tsum_* programs). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct acc_key);
	__type(value, struct accumulator_value_sum);
} acc_sum_map SEC(".maps");

static __always_inline int acc_enter(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	SAVE_FIRST_START_TIME(lru_start_map, &tid);
	return 0;
}

static __always_inline int acc_exit(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, bucket;
	struct acc_key key = {};

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	bucket = GET_LATENCY_BUCKET(lru_start_map, &tid);
	if (bucket == BPF_TELEMETRY_INVALID_BUCKET)
		return 0;
	INCREMENT_ACCUMULATOR(acc_map, &key, bucket);
	return 0;
}

KTEL_DEFINE_TASK_START_MAP(task_start);

static __always_inline bool is_target(void)
{
	return (__u32)(bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline void hist_add(__u64 begin)
{
	struct acc_key key = {};
	__u64 end = bpf_ktime_get_ns();

	if (end < begin)
		return;
	INCREMENT_ACCUMULATOR(acc_map, &key, GET_BUCKET((end - begin) / 1000));
}

/* The Android macros' start map declared as a task map. */
DEFINE_BPF_MAP(atask_start_map, TASK_STORAGE, __u32, __u64, 0);

SEC("tp_btf/sys_enter")
int atask_btf_enter(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	SAVE_FIRST_START_TIME(atask_start_map, &tid);
	return 0;
}

SEC("tp_btf/sys_exit")
int atask_btf_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, bucket;
	struct acc_key key = {};

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	bucket = GET_LATENCY_BUCKET(atask_start_map, &tid);
	if (bucket == BPF_TELEMETRY_INVALID_BUCKET)
		return 0;
	INCREMENT_ACCUMULATOR(acc_map, &key, bucket);
	return 0;
}

SEC("tp_btf/sys_enter")
int adel_btf_enter(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 now;

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&start_map, &tid, &now, BPF_NOEXIST);
	return 0;
}

SEC("tp_btf/sys_exit")
int adel_btf_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 *start, begin;

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	start = bpf_map_lookup_elem(&start_map, &tid);
	if (!start)
		return 0;
	begin = *start;
	bpf_map_delete_elem(&start_map, &tid);
	hist_add(begin);
	return 0;
}

SEC("tp_btf/sys_enter")
int x_start_enter(void *ctx)
{
	return acc_enter();
}

SEC("tp_btf/sys_exit")
int x_start_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	volatile __u32 bucket;

	if (!is_target())
		return 0;
	bucket = GET_LATENCY_BUCKET(lru_start_map, &tid);
	(void)bucket;
	return 0;
}

SEC("tp_btf/sys_enter")
int x_inpl_enter(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now, *start;

	if (!is_target())
		return 0;
	now = bpf_ktime_get_ns();
	start = bpf_map_lookup_elem(&lru_start_map, &tid);
	if (!start)
		bpf_map_update_elem(&lru_start_map, &tid, &now, BPF_NOEXIST);
	else if (!*start)
		*start = now;
	return 0;
}

SEC("tp_btf/sys_exit")
int x_inpl_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *start, begin;

	if (!is_target())
		return 0;
	start = bpf_map_lookup_elem(&lru_start_map, &tid);
	if (!start || !*start)
		return 0;
	begin = *start;
	*start = 0;
	hist_add(begin);
	return 0;
}

SEC("tp_btf/sys_enter")
int x_task_enter(void *ctx)
{
	__u64 *start;

	if (!is_target())
		return 0;
	start = bpf_task_storage_get(&task_start, bpf_get_current_task_btf(), NULL,
				     BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (start && !*start)
		*start = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int x_task_exit(void *ctx)
{
	__u64 *start, begin;

	if (!is_target())
		return 0;
	start = bpf_task_storage_get(&task_start, bpf_get_current_task_btf(), NULL, 0);
	if (!start || !*start)
		return 0;
	begin = *start;
	*start = 0;
	hist_add(begin);
	return 0;
}

SEC("tp_btf/sys_enter")
int task_btf_enter(void *ctx)
{
	if (!is_target())
		return 0;
	KTEL_TASK_SAVE_FIRST_START(task_start, bpf_get_current_task_btf());
	return 0;
}

SEC("tp_btf/sys_exit")
int task_btf_exit(void *ctx)
{
	struct acc_key key = {};
	__u32 bucket;

	if (!is_target())
		return 0;
	bucket = KTEL_TASK_LATENCY_BUCKET(task_start, bpf_get_current_task_btf());
	if (bucket == BPF_TELEMETRY_INVALID_BUCKET)
		return 0;
	INCREMENT_ACCUMULATOR(acc_map, &key, bucket);
	return 0;
}

SEC("tp_btf/sys_enter")
int tsum_btf_enter(void *ctx)
{
	if (!is_target())
		return 0;
	KTEL_TASK_SAVE_FIRST_START(task_start, bpf_get_current_task_btf());
	return 0;
}

SEC("tp_btf/sys_exit")
int tsum_btf_exit(void *ctx)
{
	struct acc_key key = {};
	__u64 us;

	if (!is_target())
		return 0;
	us = KTEL_TASK_LATENCY_US(task_start, bpf_get_current_task_btf());
	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return 0;
	INCREMENT_ACCUMULATOR_SUM(acc_sum_map, &key, us);
	return 0;
}

__u64 clock_sink = 0;

SEC("tp_btf/sys_enter")
int x_clock_enter(void *ctx)
{
	if (is_target())
		clock_sink = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int x_clock_exit(void *ctx)
{
	if (is_target())
		clock_sink = bpf_ktime_get_ns() - clock_sink;
	return 0;
}

SEC("tp_btf/sys_enter")
int empty_btf_enter(void *ctx)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int empty_btf_exit(void *ctx)
{
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_enter")
int empty_tp_enter(void *ctx)
{
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int empty_tp_exit(void *ctx)
{
	return 0;
}

SEC("tp_btf/sys_enter")
int acc_btf_enter(void *ctx)
{
	return acc_enter();
}

SEC("tp_btf/sys_exit")
int acc_btf_exit(void *ctx)
{
	return acc_exit();
}

SEC("tracepoint/raw_syscalls/sys_enter")
int acc_tp_enter(void *ctx)
{
	return acc_enter();
}

SEC("tracepoint/raw_syscalls/sys_exit")
int acc_tp_exit(void *ctx)
{
	return acc_exit();
}

/* The object's license string comes from android_bpf_defs.h. */
