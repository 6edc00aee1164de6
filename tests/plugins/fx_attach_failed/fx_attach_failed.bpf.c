// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: a start/end pair whose end hook cannot attach. The start
 * (tp_btf on raw_syscalls:sys_enter) loads and attaches anywhere; the end is
 * a perf-event tracepoint no kernel has, which a test's fake tracefs lists,
 * so it loads and only its attach fails. It has no other variant, so the
 * plugin must be reported unsupported with nothing left running or pinned,
 * rather than run its start alone.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} fx_attach_failed_start_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_attach_failed_map SEC(".maps");

SEC("tp_btf/sys_enter")
int fx_attach_failed_start(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&fx_attach_failed_start_map, &tid, &now, BPF_ANY);
	return 0;
}

SEC("tracepoint/ktel_test/ktel_no_such_end")
int fx_attach_failed_end(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 bucket = GET_LATENCY_BUCKET(fx_attach_failed_start_map, &tid);
	__u32 key = 0;

	if (bucket == BPF_TELEMETRY_INVALID_BUCKET)
		return 0;
	INCREMENT_ACCUMULATOR(fx_attach_failed_map, &key, bucket);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
