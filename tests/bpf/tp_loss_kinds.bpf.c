// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * One block completion as each kind of BPF program sees it, driven by
 * tests/integration/test_tp_attach_loss.c: the reads of one loop device
 * counted on block_rq_complete by a tp_btf program reading the request with
 * bpf_probe_read_kernel (as the block plugin does), a tp_btf program reading
 * it with direct loads, a raw_tp program and a classic tracepoint program
 * (the perf path: the kernel's own record of the event, no read of the
 * request at all), and by a tp_btf program on block_io_done.
 *
 * The classic program runs after the tp_btf programs on the same tracepoint
 * call when it is attached after them (a tracepoint calls its probes in the
 * order they were registered), so it can tell which reads the tp_btf program
 * did not count: each CPU keeps how many of the device's reads either has
 * counted, and a classic run that finds the tp_btf count behind its own is a
 * read the tp_btf program missed. For those the classic program logs the
 * sector, CPU, context (hard irq, softirq, task) and task.
 *
 * recurse and kick check that a program's skipped runs are counted where the
 * test reads them: kick, run once by BPF_PROG_TEST_RUN, calls bpf_printk,
 * whose tracepoint runs recurse, whose own bpf_printk fires the tracepoint
 * again while recurse is running on that CPU: a run the kernel must skip and
 * count in recurse's recursion_misses.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "loop_device_map.h"

/* The classic tracepoint's record of block_rq_complete on 6.x kernels that
 * carry ioprio (tracefs events/block/block_rq_complete/format); the test
 * checks the running kernel's format before it attaches classic_complete. */
struct block_rq_complete_record {
	__u64 header; /* the kernel's registers pointer, not the program's */
	__u32 dev;
	__u32 pad;
	__u64 sector;
	__u32 nr_sector;
	__s32 error;
	__u16 ioprio;
	char rwbs[10];
};

enum slot {
	S_BTF,            /* tp_btf, bpf_probe_read_kernel: reads of the device */
	S_BTF_DIRECT,     /* tp_btf, direct loads */
	S_RAW,            /* raw_tp */
	S_CLASSIC,        /* classic tracepoint */
	S_DONE,           /* tp_btf on block_io_done */
	S_BTF_ALL,        /* runs of the tp_btf program for any device */
	S_RAW_ALL,        /* runs of the raw_tp program for any device */
	S_CLASSIC_ALL,    /* runs of the classic program for any device */
	S_BTF_READ_FAIL,  /* tp_btf runs whose reads of the request failed */
	S_MISSED_BY_BTF,  /* device reads the classic program saw and tp_btf not */
	S_CLASSIC_AHEAD,  /* classic runs that found tp_btf already ahead */
	S_RECURSE_RUNS,   /* runs of recurse */
	S_MISSED_BTF_RAN, /* of S_MISSED_BY_BTF, those tp_btf ran for */
	S_OTHER_OP,       /* the device's completions whose record is not a read */
	S_NSLOTS = 16,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, S_NSLOTS);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

/* The context of a read of the device as the classic program saw it: index
 * 0 on the task's stack, 1 on the irq stack (context_of); 0..1 for every
 * read, 8..9 for the reads tp_btf missed. (The record's header, which says
 * hard irq or softirq, is not the program's to read: the kernel puts its
 * registers there.) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} contexts SEC(".maps");

#define KTEL_LOSS_CPUS 64
/* Per CPU (index cpu % 64): reads the classic program saw, then (index
 * 64 + cpu) those tp_btf missed. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * KTEL_LOSS_CPUS);
	__type(key, __u32);
	__type(value, __u64);
} cpus SEC(".maps");

/* Each CPU's counts of the device's reads by the tp_btf and the classic
 * program, to find the reads one of them missed. */
struct seq {
	__u64 btf;         /* the device's reads tp_btf counted */
	__u64 classic;     /* and the classic program */
	__u64 btf_all;     /* runs of tp_btf for any device */
	__u64 classic_all; /* and of the classic program */
	__u64 scratch;
	/* What tp_btf read in its last run on this CPU. */
	__u64 last_sector;
	__u32 last_dev;
	__u32 last_flags;
	__s32 last_ret;
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct seq);
} seqs SEC(".maps");

/* The first reads the tp_btf program missed, as the classic program saw
 * them; entry 0's sector field holds how many were logged. */
struct missed {
	__u64 sector;
	__u32 cpu;
	__u32 context;
	__s32 pid;
	__u32 btf_ran; /* tp_btf ran for this completion (runs on the CPU even) */
	__u64 ns;
	/* What tp_btf read in its last run on the CPU. */
	__u64 seen_sector;
	__u32 seen_dev;
	__u32 seen_flags;
	__s32 seen_ret;
	__u32 pad;
};
#define KTEL_LOSS_LOG 64
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KTEL_LOSS_LOG + 1);
	__type(key, __u32);
	__type(value, struct missed);
} missed_log SEC(".maps");

/* The next entry of missed_log to fill, or NULL once it is full. */
static __always_inline struct missed *log_next(void)
{
	__u32 k = 0, slot;
	struct missed *head = bpf_map_lookup_elem(&missed_log, &k);

	if (!head)
		return NULL;
	slot = (__u32)__sync_fetch_and_add(&head->sector, 1) + 1;
	if (slot > KTEL_LOSS_LOG)
		return NULL;
	return bpf_map_lookup_elem(&missed_log, &slot);
}

/* The request's start sector. */
struct request___sector {
	__u64 __sector;
} __attribute__((preserve_access_index));

/* Reads of the device per 4 KiB block (the test reads blocks 0..1023):
 * [block] as the tp_btf program counted them, [1024 + block] as the classic
 * program did; which blocks tp_btf missed reads of, whatever the order the
 * two programs run in. */
#define KTEL_LOSS_BLOCKS 1024
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * KTEL_LOSS_BLOCKS);
	__type(key, __u32);
	__type(value, __u64);
} blocks SEC(".maps");

/* The task's kernel stack (THREAD_SIZE bytes from stack). */
struct task_struct___stack {
	void *stack;
} __attribute__((preserve_access_index));

/* x86-64's THREAD_SIZE without KASAN (16 KiB). */
#define KTEL_LOSS_THREAD_SIZE (16U * 1024)

static __always_inline void add(void *map, __u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(map, &slot);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/*
 * Where the program runs: 0 on the current task's own kernel stack (task
 * context, or a softirq run by ksoftirqd), 1 off it (x86-64 runs hard irqs,
 * and the softirqs that follow them, on the CPU's own irq stack). The BPF
 * stack is the kernel stack the program runs on, so the address of a local
 * tells which; it goes through the map value (scratch) to become a number.
 */
static __always_inline __u32 context_of(struct seq *s)
{
	struct task_struct___stack *t = (void *)bpf_get_current_task();
	__u64 base = (__u64)BPF_CORE_READ(t, stack), sp;
	__u32 here = 0;

	*(volatile __u64 *)&s->scratch = (__u64)(long)&here;
	sp = *(volatile __u64 *)&s->scratch;
	return sp >= base && sp < base + KTEL_LOSS_THREAD_SIZE ? 0 : 1;
}

/* Whether rq is a read of the device, reading it with bpf_probe_read_kernel;
 * -1 when a read of the request failed. */
/* Whether rq is a read of the device, reading it with bpf_probe_read_kernel;
 * -1 when a read of the request failed or found no disk. What it read goes
 * to s, where there is one. */
static __always_inline int ours_probe_read(struct request *rq, struct seq *s)
{
	struct request_queue *q = NULL;
	struct gendisk *disk = NULL;
	unsigned int flags = 0;
	int major = 0, first_minor = 0, ret;

	if (bpf_core_read(&q, sizeof(q), &rq->q) || !q ||
	    bpf_core_read(&disk, sizeof(disk), &q->disk) || !disk ||
	    bpf_core_read(&major, sizeof(major), &disk->major) ||
	    bpf_core_read(&first_minor, sizeof(first_minor), &disk->first_minor) ||
	    bpf_core_read(&flags, sizeof(flags), &rq->cmd_flags))
		ret = -1;
	else
		ret = is_device((__u32)major, (__u32)first_minor) &&
		      (flags & KTEL_REQ_OP_MASK) == 0;
	if (s) {
		s->last_dev = ((__u32)major << KTEL_MINORBITS) | (__u32)first_minor;
		s->last_flags = flags;
		s->last_ret = ret;
		s->last_sector = BPF_CORE_READ((struct request___sector *)rq, __sector);
	}
	return ret;
}

SEC("tp_btf/block_rq_complete")
int btf_complete(__u64 *ctx)
{
	__u32 k = 0;
	struct seq *s = bpf_map_lookup_elem(&seqs, &k);
	int ours = ours_probe_read((struct request *)ctx[0], s);

	add(&counts, S_BTF_ALL);
	if (s)
		s->btf_all++;
	if (ours < 0)
		add(&counts, S_BTF_READ_FAIL);
	if (ours <= 0)
		return 0;
	add(&counts, S_BTF);
	add(&blocks, (__u32)(BPF_CORE_READ((struct request___sector *)ctx[0], __sector) / 8) %
			     KTEL_LOSS_BLOCKS);
	if (s)
		s->btf++;
	return 0;
}

SEC("tp_btf/block_rq_complete")
int btf_direct_complete(__u64 *ctx)
{
	struct request *rq = (struct request *)ctx[0];
	struct gendisk *disk = rq->q->disk;

	if (!disk)
		return 0;
	if (is_device((__u32)disk->major, (__u32)disk->first_minor) &&
	    (rq->cmd_flags & KTEL_REQ_OP_MASK) == 0)
		add(&counts, S_BTF_DIRECT);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int raw_complete(__u64 *ctx)
{
	add(&counts, S_RAW_ALL);
	if (ours_probe_read((struct request *)ctx[0], NULL) > 0)
		add(&counts, S_RAW);
	return 0;
}

SEC("tp_btf/block_io_done")
int btf_done(__u64 *ctx)
{
	if (ours_probe_read((struct request *)ctx[0], NULL) > 0)
		add(&counts, S_DONE);
	return 0;
}

/* Returns 1: a classic program's 0 would keep the event from the perf events
 * on the tracepoint, and the test counts it with one of those too. */
SEC("tracepoint/block/block_rq_complete")
int classic_complete(struct block_rq_complete_record *r)
{
	__u32 k = 0, cpu = bpf_get_smp_processor_id(), ctxi, btf_ran;
	struct missed *m;
	struct seq *s;

	add(&counts, S_CLASSIC_ALL);
	s = bpf_map_lookup_elem(&seqs, &k);
	if (!s)
		return 1;
	/* Whether tp_btf ran for this completion: on each call of the
	 * tracepoint it runs first and counts one run, so its runs on this CPU
	 * equal the classic program's here. Set equal again for the next. */
	s->classic_all++;
	btf_ran = s->btf_all == s->classic_all;
	s->btf_all = s->classic_all;
	if (!is_device(r->dev >> KTEL_MINORBITS, r->dev & KTEL_MINORMASK))
		return 1;
	if (r->rwbs[0] != 'R') {
		/* The device's, but not a read by its record: log it. */
		add(&counts, S_OTHER_OP);
		m = log_next();
		if (!m)
			return 1;
		m->sector = r->sector;
		m->cpu = cpu;
		m->pid = (__s32)(bpf_get_current_pid_tgid() & 0xffffffff);
		m->seen_sector = r->nr_sector;
		m->seen_ret = r->error;
		__builtin_memcpy(&m->seen_dev, r->rwbs, 8);
		return 1;
	}
	add(&counts, S_CLASSIC);
	add(&blocks, KTEL_LOSS_BLOCKS + (__u32)(r->sector / 8) % KTEL_LOSS_BLOCKS);
	ctxi = context_of(s);
	add(&contexts, ctxi);
	add(&cpus, cpu % KTEL_LOSS_CPUS);
	s->classic++;
	if (s->btf >= s->classic) {
		if (s->btf > s->classic)
			add(&counts, S_CLASSIC_AHEAD);
		return 1;
	}
	/* tp_btf did not count this read: note it, and count from here. */
	s->btf = s->classic;
	add(&counts, S_MISSED_BY_BTF);
	if (btf_ran)
		add(&counts, S_MISSED_BTF_RAN);
	add(&contexts, 8 + ctxi);
	add(&cpus, KTEL_LOSS_CPUS + cpu % KTEL_LOSS_CPUS);
	m = log_next();
	if (!m)
		return 1;
	m->sector = r->sector;
	m->cpu = cpu;
	m->context = ctxi;
	m->pid = (__s32)(bpf_get_current_pid_tgid() & 0xffffffff);
	m->ns = bpf_ktime_get_ns();
	m->btf_ran = btf_ran;
	m->seen_sector = s->last_sector;
	m->seen_dev = s->last_dev;
	m->seen_flags = s->last_flags;
	m->seen_ret = s->last_ret;
	return 1;
}

SEC("tp_btf/bpf_trace_printk")
int recurse(__u64 *ctx)
{
	add(&counts, S_RECURSE_RUNS);
	bpf_printk("ktelemetry recursion check");
	return 0;
}

SEC("raw_tp")
int kick(void *ctx)
{
	bpf_printk("ktelemetry recursion check: kick");
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
