// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * SuspendResumeLatency: duration of each suspend/resume phase, in
 * microseconds, per phase. power:suspend_resume(const char *action, int val,
 * bool start) marks the start (start=true) and end (start=false) of a phase
 * such as "dpm_suspend", "suspend_enter", "machine_suspend" or "CPU_OFF".
 * The action string becomes an id labelled by suspend_phase_names.
 *
 * Pairs are matched by (phase, val): val is the CPU number for CPU_ON/OFF
 * and the PM event or state elsewhere, so one CPU's phase never ends
 * another's. Suspend runs its phases on several CPUs, so the start is not
 * keyed by thread.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_labels.h>

#define SUSPEND_MAX_PHASES 64

struct suspend_key {
	__u32 phase; /* id in suspend_phase_names */
};

struct suspend_start_key {
	__u32 phase;
	__s32 val;
};

KTEL_DEFINE_LABEL_MAPS(suspend_phase, SUSPEND_MAX_PHASES);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct suspend_start_key);
	__type(value, __u64);
} suspend_start_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SUSPEND_MAX_PHASES);
	__type(key, struct suspend_key);
	__type(value, struct accumulator_value_sum);
} suspend_resume_latency_map SEC(".maps");

/* suspend_resume(const char *action, int val, bool start) */
SEC("tp_btf/suspend_resume")
int suspend_resume(__u64 *ctx)
{
	struct suspend_start_key skey = {};
	struct suspend_key key = {};
	struct ktel_label label = {};
	__u64 us;

	ktel_label_read(&label, (const void *)ctx[0]);
	skey.phase = KTEL_LABEL_ID(suspend_phase, &label);
	skey.val = (__s32)ctx[1];
	if ((__u8)ctx[2]) {
		/* A start always opens a new phase: a start whose end was
		 * missed must not stretch the next one. */
		__u64 now = bpf_ktime_get_ns();

		bpf_map_update_elem(&suspend_start_map, &skey, &now, BPF_ANY);
		return 0;
	}
	us = GET_LATENCY_US(suspend_start_map, &skey);
	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return 0;
	key.phase = skey.phase;
	INCREMENT_ACCUMULATOR_SUM(suspend_resume_latency_map, &key, us);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
