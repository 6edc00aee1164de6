// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: read() calls of one process, counted through a variant
 * group. The first variant is a perf-event tracepoint that no kernel has:
 * a test whose fake tracefs lists it gets past the target check, the
 * program loads (a tracepoint program names its event only at attach), and
 * only the attach fails. The loader must then fall back to the tp_btf
 * variant on raw_syscalls:sys_enter. Either variant adds one to bucket 0 per
 * read() of the process whose tgid is fx_attach_tgid (a .rodata param).
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

const volatile __u32 fx_attach_tgid = 0;
/* The read syscall's number on this architecture, for the tp_btf variant. */
const volatile __u32 fx_attach_read_nr = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct accumulator_value);
} fx_attach_map SEC(".maps");

static __always_inline void count(void)
{
	struct accumulator_value *v;
	__u32 key = 0;

	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != fx_attach_tgid)
		return;
	v = bpf_map_lookup_elem(&fx_attach_map, &key);
	if (v)
		__sync_fetch_and_add(&v->buckets[0], 1);
}

SEC("tracepoint/ktel_test/ktel_no_such_event")
int fx_attach_tracepoint(void *ctx)
{
	count();
	return 0;
}

/* TP_PROTO(struct pt_regs *regs, long id) */
SEC("tp_btf/sys_enter")
int fx_attach_tp(__u64 *ctx)
{
	if ((long)ctx[1] == (long)fx_attach_read_nr)
		count();
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
