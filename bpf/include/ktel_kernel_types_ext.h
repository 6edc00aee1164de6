/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * More kernel declarations for the built-in plugins, on top of
 * ktel_kernel_types.h (include that one first).
 *
 * Same rules: CO-RE types with preserve_access_index that list only the
 * members a program reads, so offsets here do not matter. Members that exist
 * only on some kernels are declared in a "___flavor" struct and read after a
 * bpf_core_field_exists() check; libbpf matches a flavor to the kernel type
 * of the same name without the suffix.
 */
#ifndef KTEL_KERNEL_TYPES_EXT_H
#define KTEL_KERNEL_TYPES_EXT_H

#ifndef KTEL_KERNEL_TYPES_H
#include <ktel_kernel_types.h>
#endif

typedef __u32 dev_t;

/* Block layer (block_io_latency). */
struct gendisk {
	int major;
	int first_minor;
} __ktel_core;

struct block_device {
	dev_t bd_dev;
} __ktel_core;

struct request_queue {
	struct gendisk *disk; /* 5.15 and later */
	int id;               /* unique among the machine's queues */
} __ktel_core;

struct blk_mq_hw_ctx {
	unsigned int queue_num; /* the hardware queue's index in its queue */
} __ktel_core;

struct bio;

struct request {
	struct request_queue *q;
	struct blk_mq_hw_ctx *mq_hctx;
	int tag;                /* driver tag; -1 until the driver's tag is taken */
	int internal_tag;       /* the I/O scheduler's tag; -1 without a scheduler */
	struct bio *bio;        /* its first bio; NULL for a request without data */
	unsigned int cmd_flags; /* blk_opf_t on 6.x; low byte is the REQ_OP */
	struct block_device *part;
} __ktel_core;

/* Before 5.16 a request named its disk directly; kept for older backports. */
struct request___rq_disk {
	struct gendisk *rq_disk;
} __ktel_core;

/* REQ_OP_* (include/linux/blk_types.h): stable since 4.10. */
#define KTEL_REQ_OP_MASK 0xffU
#define KTEL_REQ_OP_READ 0U
#define KTEL_REQ_OP_WRITE 1U
#define KTEL_REQ_OP_FLUSH 2U
#define KTEL_REQ_OP_DISCARD 3U

/* The kernel's dev_t: 12 bits major, 20 bits minor (MINORBITS). */
#define KTEL_MINORBITS 20
#define KTEL_MINORMASK ((1U << KTEL_MINORBITS) - 1)

/* CMA (cma_allocation_latency, Android vendor hook variant). */
#define KTEL_CMA_MAX_NAME 64
struct cma {
	char name[KTEL_CMA_MAX_NAME]; /* an array since 5.10 */
} __ktel_core;

/* dma-buf (dmabuf_request_sizes). */
struct dma_buf_export_info {
	const char *exp_name;
	size_t size;
} __ktel_core;

struct dma_buf {
	size_t size;
	const char *exp_name;
} __ktel_core;

/* Memory nodes (kswapd_latency, kprobe variant). */
struct pglist_data {
	int node_id;
} __ktel_core;

/*
 * Registers at a kprobe, for the kprobe variants. We do not use
 * bpf_tracing.h's PT_REGS_PARM*: outside a vmlinux.h build it expects the
 * UAPI register names (rdi...) on x86, which the kernel's struct pt_regs does
 * not have.
 */
#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long di;
	unsigned long si;
	unsigned long dx;
	unsigned long ax;
} __ktel_core;
#define KTEL_KPROBE_ARG1(ctx) ((ctx)->di)
#define KTEL_KPROBE_ARG2(ctx) ((ctx)->si)
#define KTEL_KPROBE_RET(ctx) ((ctx)->ax)
#elif defined(__TARGET_ARCH_arm64)
/* struct pt_regs starts with the UAPI struct user_pt_regs (fixed layout). */
struct pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
#define KTEL_KPROBE_ARG1(ctx) ((ctx)->regs[0])
#define KTEL_KPROBE_ARG2(ctx) ((ctx)->regs[1])
#define KTEL_KPROBE_RET(ctx) ((ctx)->regs[0])
#else
struct pt_regs;
#define KTEL_KPROBE_UNSUPPORTED_ARCH 1
#endif

/* Scheduler: TASK_RUNNING, the prev_state of a preempted task. */
#define KTEL_TASK_RUNNING 0U

/* IS_ERR() for a kernel pointer returned to an fexit program. */
#define KTEL_MAX_ERRNO 4095UL
#define KTEL_IS_ERR_VALUE(x) ((unsigned long)(x) >= (unsigned long)-KTEL_MAX_ERRNO)

#endif /* KTEL_KERNEL_TYPES_EXT_H */
