// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test fixture: one ring buffer event per syscall number fx_syscall_nr made
 * by thread fx_target_tid (both .rodata params), so a test or benchmark
 * produces exactly as many events as it makes such syscalls. fx_use_big
 * picks the ring: 4 KiB (a burst overflows it) or 1 MiB. fx_burst (1..16)
 * events are emitted per such syscall, so one producer thread can outrun a
 * consumer even where a syscall is slow (a paravirtualized guest: ~1.4 us
 * per getppid()); events then come in runs of fx_burst with consecutive
 * seq. Every event carries
 * every field kind the stream decoder supports; fx_produced counts the
 * events the program tried to emit.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_labels.h>

const volatile __s32 fx_target_tid = -1;
const volatile __s64 fx_syscall_nr = -1;
const volatile __u32 fx_use_big = 0;
const volatile __u32 fx_burst = 1;

__u64 fx_produced = 0;

enum fx_color {
	FX_RED = 0,
	FX_GREEN = 1,
	FX_BLUE = 2,
};

struct fx_inner {
	__u16 a;
	__s8 b;
};

struct fx_stream_event {
	__u64 ts_ns; /* bpf_ktime_get_ns(): the record's time */
	__u64 seq;   /* 1-based: which event of fx_produced */
	__s32 tid;
	enum fx_color color;   /* seq % 3, labelled */
	__u32 label_id;        /* id of the thread's comm in fx_label_names */
	bool odd;              /* seq is odd */
	__s8 neg;              /* -(seq % 100) */
	struct fx_inner inner; /* a = seq & 0xffff, b = -1 */
	char comm[16];
	__u8 bytes[4]; /* {1, 2, 3, seq & 0xff} */
};
KTEL_EXPORT_TYPE(struct fx_stream_event, fx_stream_event);

KTEL_DEFINE_LABEL_MAPS(fx_label, 8);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} fx_small_rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} fx_big_rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fx_small_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fx_big_lost SEC(".maps");

#define FX_BURST_MAX 16

/* One event into the chosen ring, or one more lost. */
static __always_inline void emit(__u32 tid)
{
	struct ktel_label l = {};
	struct fx_stream_event *e;
	__u64 seq, *lost;
	__u32 key = 0;

	seq = __sync_fetch_and_add(&fx_produced, 1) + 1;
	e = bpf_ringbuf_reserve(fx_use_big ? (void *)&fx_big_rb : (void *)&fx_small_rb, sizeof(*e),
				0);
	if (!e) {
		lost = bpf_map_lookup_elem(fx_use_big ? (void *)&fx_big_lost
						      : (void *)&fx_small_lost,
					   &key);
		if (lost)
			__sync_fetch_and_add(lost, 1);
		return;
	}
	bpf_get_current_comm(l.name, sizeof(l.name));
	e->ts_ns = bpf_ktime_get_ns();
	e->seq = seq;
	e->tid = (__s32)tid;
	e->color = (enum fx_color)(seq % 3);
	e->label_id = KTEL_LABEL_ID(fx_label, &l);
	e->odd = seq & 1;
	e->neg = -(__s8)(seq % 100);
	e->inner.a = (__u16)seq;
	e->inner.b = -1;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->bytes[0] = 1;
	e->bytes[1] = 2;
	e->bytes[2] = 3;
	e->bytes[3] = (__u8)seq;
	bpf_ringbuf_submit(e, 0);
}

/* sys_enter(struct pt_regs *regs, long id) */
SEC("tp_btf/sys_enter")
int fx_stream_enter(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if ((__s32)tid != fx_target_tid || (__s64)ctx[1] != fx_syscall_nr)
		return 0;
	for (int i = 0; i < FX_BURST_MAX; i++) {
		if (i > 0 && (__u32)i >= fx_burst)
			break;
		emit(tid);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
