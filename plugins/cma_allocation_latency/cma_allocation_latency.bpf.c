// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * CmaAllocationLatency: time cma_alloc() takes, per CMA heap and outcome, in
 * microseconds. Start and finish fire in the same task, so the start is the
 * task's: kept in task local storage by every program below (no entry per
 * thread, no stale start for a reused tid), and by each one's _hash twin in
 * a hash keyed by thread id, the fallback variant for kernels without task
 * storage. The heap name becomes a small id (ktel_labels.h); the daemon
 * reads the names from cma_heap_names.
 *
 * The tracepoints changed over time, so each hook has variants (the loader
 * picks the first whose prototype matches, see cma_allocation_latency.c):
 *   start:  cma_alloc_start(name, request_count, available_count,
 *                           total_count, align)                 newer kernels
 *           cma_alloc_start(name, count, align)                 6.1
 *           android_vh_cma_alloc_start(s64 *ts)                 Android vendor hook
 *   finish: cma_alloc_finish(name, pfn, page, count, align, errorno)  newer
 *           cma_alloc_finish(name, pfn, page, count, align)           6.1
 *           android_vh_cma_alloc_finish(cma, page, count, align,
 *                                       gfp_mask, ts)           Android vendor hook
 * Every start variant saves the same start and every finish variant reads it,
 * so any mix pairs correctly. The vendor hook's ts is filled by the vendor
 * module's handler, not by the kernel, so it is not used.
 *
 * Attribution (ktel_attr.h): the subject is the allocating task, current at
 * the finish: cma_alloc() runs synchronously in the task that called it,
 * start and finish (and the vendor hooks) alike.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_labels.h>
#include <ktel_attr.h>

#define CMA_MAX_HEAPS 64

enum cma_alloc_result {
	CMA_ALLOC_SUCCESS = 0,
	CMA_ALLOC_FAILURE = 1,
};
KTEL_EXPORT_TYPE(enum cma_alloc_result, cma_alloc_result);

struct cma_alloc_key {
	__u32 heap;   /* id in cma_heap_names */
	__u32 result; /* enum cma_alloc_result */
	__u64 attr;   /* the allocating task (KTEL_DIM_ATTRIBUTION), 0 when off */
};

KTEL_DEFINE_LABEL_MAPS(cma_heap, CMA_MAX_HEAPS);

KTEL_DEFINE_TASK_START_MAP(cma_task_start);

/* The fallback's starts, thread id -> ns, kept in place (bpf_telemetry.h):
 * LRU so that the entries of exited threads cannot fill the map. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} cma_start_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CMA_MAX_HEAPS * 2);
	__type(key, struct cma_alloc_key);
	__type(value, struct accumulator_value_sum);
} cma_alloc_latency_map SEC(".maps");

KTEL_ATTR_SETTINGS(cma_alloc_latency_map);

/* task: the start in the task (else in cma_start_map); a constant, so each
 * program holds one form. */
static __always_inline void cma_start(bool task)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	/* cma_alloc() does not nest: a left-over start is stale, replace it. */
	if (task)
		KTEL_TASK_SAVE_START(cma_task_start, bpf_get_current_task_btf());
	else
		SAVE_START_TIME(cma_start_map, &tid);
}

/* label: the heap name, already read; failed: the allocation's outcome;
 * task: as for cma_start. */
static __always_inline void cma_finish(const struct ktel_label *label, bool failed, bool task)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct cma_alloc_key key = {};
	__u64 us = task ? KTEL_TASK_LATENCY_US(cma_task_start, bpf_get_current_task_btf())
			: GET_LATENCY_US(cma_start_map, &tid);

	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return;
	key.heap = KTEL_LABEL_ID(cma_heap, label);
	key.result = failed ? CMA_ALLOC_FAILURE : CMA_ALLOC_SUCCESS;
	key.attr = ktel_attr_of_current(cma_alloc_latency_map);
	KTEL_ATTR_INCREMENT_SUM(cma_alloc_latency_map, &key, us);
}

/* cma_alloc_start(const char *name, unsigned long request_count,
 *                 unsigned long available_count, unsigned long total_count,
 *                 unsigned int align) */
static __always_inline int cma_alloc_start_v5_body(__u64 *ctx, bool task)
{
	cma_start(task);
	return 0;
}

SEC("tp_btf/cma_alloc_start")
int cma_alloc_start_v5(__u64 *ctx)
{
	return cma_alloc_start_v5_body(ctx, true);
}

SEC("tp_btf/cma_alloc_start")
int cma_alloc_start_v5_hash(__u64 *ctx)
{
	return cma_alloc_start_v5_body(ctx, false);
}

/* cma_alloc_start(const char *name, unsigned long count, unsigned int align).
 * Same body: the variants differ only in the prototype they were written
 * for, so that a kernel with yet another prototype is reported unsupported
 * instead of being measured with changed meaning. */
static __always_inline int cma_alloc_start_v3_body(__u64 *ctx, bool task)
{
	cma_start(task);
	return 0;
}

SEC("tp_btf/cma_alloc_start")
int cma_alloc_start_v3(__u64 *ctx)
{
	return cma_alloc_start_v3_body(ctx, true);
}

SEC("tp_btf/cma_alloc_start")
int cma_alloc_start_v3_hash(__u64 *ctx)
{
	return cma_alloc_start_v3_body(ctx, false);
}

/* android_vh_cma_alloc_start(s64 *ts) */
static __always_inline int cma_alloc_start_vh_body(__u64 *ctx, bool task)
{
	cma_start(task);
	return 0;
}

SEC("tp_btf/android_vh_cma_alloc_start")
int cma_alloc_start_vh(__u64 *ctx)
{
	return cma_alloc_start_vh_body(ctx, true);
}

SEC("tp_btf/android_vh_cma_alloc_start")
int cma_alloc_start_vh_hash(__u64 *ctx)
{
	return cma_alloc_start_vh_body(ctx, false);
}

/* cma_alloc_finish(const char *name, unsigned long pfn,
 *                  const struct page *page, unsigned long count,
 *                  unsigned int align, int errorno) */
static __always_inline int cma_alloc_finish_v6_body(__u64 *ctx, bool task)
{
	struct ktel_label label = {};

	ktel_label_read(&label, (const void *)ctx[0]);
	cma_finish(&label, (int)ctx[5] != 0 || !ctx[2], task);
	return 0;
}

SEC("tp_btf/cma_alloc_finish")
int cma_alloc_finish_v6(__u64 *ctx)
{
	return cma_alloc_finish_v6_body(ctx, true);
}

SEC("tp_btf/cma_alloc_finish")
int cma_alloc_finish_v6_hash(__u64 *ctx)
{
	return cma_alloc_finish_v6_body(ctx, false);
}

/* cma_alloc_finish(const char *name, unsigned long pfn,
 *                  const struct page *page, unsigned long count,
 *                  unsigned int align): a NULL page means failure. */
static __always_inline int cma_alloc_finish_v5_body(__u64 *ctx, bool task)
{
	struct ktel_label label = {};

	ktel_label_read(&label, (const void *)ctx[0]);
	cma_finish(&label, !ctx[2], task);
	return 0;
}

SEC("tp_btf/cma_alloc_finish")
int cma_alloc_finish_v5(__u64 *ctx)
{
	return cma_alloc_finish_v5_body(ctx, true);
}

SEC("tp_btf/cma_alloc_finish")
int cma_alloc_finish_v5_hash(__u64 *ctx)
{
	return cma_alloc_finish_v5_body(ctx, false);
}

/* android_vh_cma_alloc_finish(struct cma *cma, struct page *page,
 *                             unsigned long count, unsigned int align,
 *                             gfp_t gfp_mask, s64 ts) */
static __always_inline int cma_alloc_finish_vh_body(__u64 *ctx, bool task)
{
	struct cma *cma = (struct cma *)ctx[0];
	struct ktel_label label = {};

	/* A kernel with this hook has CONFIG_CMA; the check keeps the program
	 * loadable (and testable) against BTF without struct cma. */
	if (cma && bpf_core_type_exists(struct cma))
		bpf_probe_read_kernel_str(label.name, sizeof(label.name), cma->name);
	if (!label.name[0])
		ktel_label_read(&label, 0);
	cma_finish(&label, !ctx[1], task);
	return 0;
}

SEC("tp_btf/android_vh_cma_alloc_finish")
int cma_alloc_finish_vh(__u64 *ctx)
{
	return cma_alloc_finish_vh_body(ctx, true);
}

SEC("tp_btf/android_vh_cma_alloc_finish")
int cma_alloc_finish_vh_hash(__u64 *ctx)
{
	return cma_alloc_finish_vh_body(ctx, false);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
