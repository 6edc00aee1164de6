// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: read() calls of one process, counted through a variant
 * group. The fentry variant comes first in the table; its target exists in
 * every kernel, so only the kernel's refusal at load time (EPERM where
 * function tracing is locked down) can make the loader fall back to the
 * tp_btf variant on raw_syscalls:sys_enter. Either variant adds one to
 * bucket 0 per read() of the process whose tgid is fx_refused_tgid (a
 * .rodata param), so a test can tell the selected one runs.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

const volatile __u32 fx_refused_tgid = 0;
/* The read syscall's number on this architecture, for the tp_btf variant. */
const volatile __u32 fx_refused_read_nr = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_refused_map SEC(".maps");

static __always_inline void count(void)
{
	struct accumulator_value *v;
	__u32 key = 0;

	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != fx_refused_tgid)
		return;
	v = bpf_map_lookup_elem(&fx_refused_map, &key);
	if (v)
		__sync_fetch_and_add(&v->buckets[0], 1);
}

SEC("fentry/vfs_read")
int fx_refused_fentry(__u64 *ctx)
{
	count();
	return 0;
}

/* TP_PROTO(struct pt_regs *regs, long id) */
SEC("tp_btf/sys_enter")
int fx_refused_tp(__u64 *ctx)
{
	if ((long)ctx[1] == (long)fx_refused_read_nr)
		count();
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
