// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Block I/O latency: time from issuing a request to the driver
 * (block_rq_issue) to its completion (block_rq_complete), in microseconds,
 * per device (major, minor) and operation. The start is kept per request
 * from issue to completion: they run in different contexts (the completion
 * usually in an interrupt).
 *
 * A requeued request is issued again: the start is overwritten, so its time
 * counts from the last issue. A request completed in parts completes here at
 * the first part.
 *
 * The start lives in a slot of block_slots, an array indexed by a hash of
 * the request's queue, hardware queue and tag (unique among a queue's
 * requests from their allocation to their end): the request claims its
 * slot with a compare and swap of its address and gives it back at
 * completion. That is an array element and one atomic operation at each
 * end; a hash map's insert and delete take locks and cost several hundred
 * nanoseconds per request. A request whose slot another request in flight
 * holds (4096 slots; a device has at most its queue depth in flight) keeps
 * its start in block_start_map instead. A slot whose completion was never
 * seen (the program was detached, or the kernel ran no program for it)
 * stays with its request until that request, whose address the block layer
 * reuses for its tag, is made or issued again.
 *
 * Attribution (ktel_attr.h): the subject is the task that submitted the I/O,
 * recorded when the request is made from its bio (block_io_start, in the
 * submitter's context, 6.5 and later; block_rq_insert before) and carried to
 * the completion, which runs in an interrupt or another task's context. A
 * request neither saw (issued directly on an older kernel) takes the task
 * that issues it, which for a direct issue is the submitter. The submitter
 * rides in the request's start, claimed at submit and given its time at
 * issue: one slot per request, claimed and given back once, as with
 * attribution off, where the submit programs are not loaded at all (the
 * descriptor marks them as needed only while the metric is attributed). A
 * request made by the block layer without a bio seen at submit that reuses
 * the address of a request whose completion was not seen takes that
 * request's submitter.
 *
 * By cgroup the operator chooses the subject (the metric's
 * attribution.block_subject): the submitter as above, or the cgroup the
 * kernel charges the I/O to, which it has already recorded in the bio
 * (bio->bi_blkg) and io.stat counts; by default the charged cgroup where
 * the io controller is enabled below the cgroup v2 root, the submitter
 * elsewhere. The charged cgroup is read only where the io controller is on
 * cgroup v2, as a v1 blkcg's id names no v2 cgroup. block_issue reads it
 * from the request's first bio (the block layer merges only bios of one
 * blkg into a request), and the daemon then loads no submit program
 * (block_io_latency_map_attr_blkcg is 1; the descriptor flags them
 * KTEL_ATTR_PROG_BLKCG). The bio is read at issue, where every request with
 * data has it, and its cgroup rides in the start as the submitter does
 * otherwise, so block_complete is the same in both ways. That cgroup is the
 * nearest one with the io controller enabled at or above the submitter's
 * (coarser than the submitter's where io is enabled only near the root, as
 * systemd does), and for writeback the owner of the dirty pages, where the
 * submitter is the flusher; a request without a bio (a flush the block
 * layer makes) takes the task that issues it, as above.
 */
#include <ktel_kernel_types.h>
#include <ktel_kernel_types_ext.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>
#include <ktel_attr.h>

#define BLOCK_MAX_REQUESTS 10240
#define BLOCK_MAX_KEYS 1024

/* Operation dimension: REQ_OP_* folded into the few that matter. */
enum block_op {
	BLOCK_OP_READ = 0,
	BLOCK_OP_WRITE = 1,
	BLOCK_OP_FLUSH = 2,
	BLOCK_OP_DISCARD = 3,
	BLOCK_OP_OTHER = 4,
};
KTEL_EXPORT_TYPE(enum block_op, block_op);

struct block_io_key {
	__u32 major;
	__u32 minor;
	__u32 op;   /* enum block_op */
	__u32 pad;  /* explicit: a key's bytes must all be written */
	__u64 attr; /* the submitter (KTEL_DIM_ATTRIBUTION), 0 when off */
};

/* A request in flight. */
struct block_start {
	__u64 ns;   /* issue time; 0 while submitted and not yet issued */
	__u64 attr; /* its submitter (attribution on), else 0 */
};

/* A request's slot: its owner and its start; 32 bytes, two to a cache line. */
struct block_slot {
	__u64 rq; /* the owning request's address; 0 when free */
	struct block_start st;
	__u64 pad;
};

#define BLOCK_SLOTS 4096

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BLOCK_SLOTS);
	__type(key, __u32);
	__type(value, struct block_slot);
} block_slots SEC(".maps");

/* The slots in use, less one (a power of two less one, below BLOCK_SLOTS).
 * Tests set 0: requests in flight together then share one slot, and all but
 * one take block_start_map, which is how that path is shown to count. */
const volatile __u32 block_slot_mask = BLOCK_SLOTS - 1;

/*
 * Request -> its start, for a request whose slot another one holds. LRU: a
 * request the driver never completes through this tracepoint (or one issued
 * before we attached and completed after we detached) must not hold an
 * entry forever.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, BLOCK_MAX_REQUESTS);
	__type(key, __u64);
	__type(value, struct block_start);
} block_start_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BLOCK_MAX_KEYS);
	__type(key, struct block_io_key);
	__type(value, struct accumulator_value_sum);
} block_io_latency_map SEC(".maps");

KTEL_ATTR_SETTINGS(block_io_latency_map);

#ifdef KTEL_BPF_AUDIT
/*
 * Audit builds only (KTEL_BPF_AUDIT): what each device's requests went
 * through, per (major, minor, operation), so that a total that comes out
 * short for one device says at which step its requests left the count.
 * ktel_events_counted covers every device; this is one device's. Read by
 * tests through the map's name, never by the daemon.
 */
struct block_audit_key {
	__u32 major;
	__u32 minor;
	__u32 op;
	__u32 pad;
};

struct block_audit_value {
	__u64 submitted;     /* block_io_start or block_rq_insert */
	__u64 issued;        /* block_rq_issue */
	__u64 issued_unseen; /* issued without a start entry (attribution on) */
	__u64 completed;     /* block_rq_complete */
	__u64 no_start;      /* completed without a start entry */
	__u64 not_issued;    /* completed with a start entry but no issue time */
	__u64 invalid;       /* completed with a duration that ran backwards */
	__u64 counted;       /* completed and handed to the accumulator */
	__u64 overflow;      /* of those, counted under the overflow key */
	__u64 complete_seen; /* block_rq_complete, seen by a second program */
	__u64 io_done;       /* block_io_done: the device's own count's point */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct block_audit_key);
	__type(value, struct block_audit_value);
} block_audit SEC(".maps");

#define BLOCK_AUDIT(rq, field)                                      \
	({                                                          \
		struct block_audit_value *__a = block_audit_of(rq); \
		if (__a)                                            \
			__sync_fetch_and_add(&__a->field, 1);       \
	})
#else
#define BLOCK_AUDIT(rq, field) \
	do {                   \
	} while (0)
#endif

/*
 * Request rq's slot, from its queue, hardware queue and tag: the scheduler's
 * tag where there is a scheduler (the driver's is taken only at dispatch),
 * else the driver's, either held from the request's allocation to its end;
 * a Fibonacci hash spreads them over the slots. (The address is owned, not
 * hashed: the verifier allows no arithmetic on a request pointer.)
 */
static __always_inline struct block_slot *block_slot_of(const struct request *rq)
{
	int tag = rq->internal_tag >= 0 ? rq->internal_tag : rq->tag;
	__u64 h = (__u64)(__u32)rq->q->id << 32 | (__u64)(rq->mq_hctx->queue_num & 0xffff) << 16 |
		  (__u16)tag;
	__u32 idx = (__u32)((h * 0x9E3779B97F4A7C15ULL) >> 32) & block_slot_mask;

	return bpf_map_lookup_elem(&block_slots, &idx);
}

/*
 * Request rq's slot, claimed for it: one that was free, or rq's already (its
 * submit claimed it, it is issued again, or the completion of an earlier use
 * of the request was not seen). NULL when another request in flight holds
 * it: block_start_map then.
 */
static __always_inline struct block_slot *block_slot_claim(const struct request *req, __u64 rq)
{
	struct block_slot *s = block_slot_of(req);
	__u64 old;

	if (!s)
		return NULL;
	old = __sync_val_compare_and_swap(&s->rq, 0, rq);
	return old == 0 || old == rq ? s : NULL;
}

/* Keep the start st of request req (rq its address): in its slot, or in the
 * map. */
static __always_inline void block_start_keep(const struct request *req, __u64 rq,
					     const struct block_start *st)
{
	struct block_slot *s = block_slot_claim(req, rq);

	if (s) {
		s->st = *st;
		return;
	}
	if (bpf_map_update_elem(&block_start_map, &rq, st, BPF_ANY))
		__sync_fetch_and_add(&ktel_map_write_failures, 1);
}

/* Record current as the submitter of request rq: its start, not yet
 * issued. A reused request's stale start is overwritten. */
static __always_inline void block_note_submitter(__u64 *ctx)
{
	struct block_start st = {.attr = ktel_attr_of_current(block_io_latency_map)};

	block_start_keep((struct request *)ctx[0], ctx[0], &st);
}

static __always_inline __u32 block_op_of(unsigned int cmd_flags)
{
	switch (cmd_flags & KTEL_REQ_OP_MASK) {
	case KTEL_REQ_OP_READ:
		return BLOCK_OP_READ;
	case KTEL_REQ_OP_WRITE:
		return BLOCK_OP_WRITE;
	case KTEL_REQ_OP_FLUSH:
		return BLOCK_OP_FLUSH;
	case KTEL_REQ_OP_DISCARD:
		return BLOCK_OP_DISCARD;
	default:
		return BLOCK_OP_OTHER;
	}
}

/*
 * The request's disk: q->disk since 5.15 (rq_disk went away in 5.16); the
 * old member only where it still exists. Plain loads, as every caller's
 * request is a tp_btf argument (a BTF pointer, whose loads the verifier
 * makes fault-safe): no helper call per pointer.
 */
static __always_inline struct gendisk *block_disk_of(struct request *rq)
{
	struct request___rq_disk *old = (void *)rq;

	if (bpf_core_field_exists(old->rq_disk))
		return old->rq_disk;
	return rq->q->disk;
}

#ifdef KTEL_BPF_AUDIT
static __always_inline struct block_audit_value *block_audit_of(struct request *rq)
{
	struct block_audit_key key = {};
	struct block_audit_value zero = {}, *v;
	struct gendisk *disk = block_disk_of(rq);

	if (disk) {
		key.major = (__u32)disk->major;
		key.minor = (__u32)disk->first_minor;
	}
	key.op = block_op_of(rq->cmd_flags);
	v = bpf_map_lookup_elem(&block_audit, &key);
	if (v)
		return v;
	bpf_map_update_elem(&block_audit, &key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&block_audit, &key);
}
#endif

/* block_rq_issue(struct request *rq) (5.11 and later) */
SEC("tp_btf/block_rq_issue")
int block_issue(__u64 *ctx)
{
	__u64 rq = ctx[0];
	struct block_start st = {.ns = bpf_ktime_get_ns()};
	struct block_start *cur;
	struct block_slot *s;

	BLOCK_AUDIT((struct request *)ctx[0], issued);
	if (block_io_latency_map_attr_by != KTEL_ATTR_BY_NONE) {
		/* Tested only here, so that attribution off reads one
		 * switch, as before the bio's cgroup was read. */
		if (block_io_latency_map_attr_blkcg) {
			/* No submit program: the bio names the cgroup. */
			st.attr = ktel_attr_blkcg_of_btf(((struct request *)ctx[0])->bio,
							 block_io_latency_map_attr_depth);
		} else {
			/* Its submit made the start: the time goes in. A
			 * requeued request is issued again: its time counts
			 * from the last issue. The slot is rq's until its
			 * completion gives it back, so a plain load tells. */
			s = block_slot_of((struct request *)ctx[0]);
			if (s && s->rq == rq) {
				s->st.ns = st.ns;
				return 0;
			}
			cur = bpf_map_lookup_elem(&block_start_map, &rq);
			if (cur) {
				cur->ns = st.ns;
				return 0;
			}
		}
		/* A request without a bio, or one neither block_io_start
		 * nor block_rq_insert saw: the task that issues it. */
		if (!st.attr) {
			if (!block_io_latency_map_attr_blkcg)
				BLOCK_AUDIT((struct request *)ctx[0], issued_unseen);
			st.attr = ktel_attr_of_current(block_io_latency_map);
		}
	}
	block_start_keep((struct request *)ctx[0], rq, &st);
	return 0;
}

/* block_io_start(struct request *rq) (6.5 and later): the request is made
 * from its first bio, in the submitter's context. */
SEC("tp_btf/block_io_start")
int block_submit(__u64 *ctx)
{
	BLOCK_AUDIT((struct request *)ctx[0], submitted);
	block_note_submitter(ctx);
	return 0;
}

/* block_rq_insert(struct request *rq): before 6.5, the submitter inserting
 * the request into the scheduler's queue (a plug flushed by it, mostly). */
SEC("tp_btf/block_rq_insert")
int block_insert(__u64 *ctx)
{
	BLOCK_AUDIT((struct request *)ctx[0], submitted);
	block_note_submitter(ctx);
	return 0;
}

/* block_rq_complete(struct request *rq, blk_status_t error,
 *                   unsigned int nr_bytes) */
SEC("tp_btf/block_rq_complete")
int block_complete(__u64 *ctx)
{
	struct request *rq = (struct request *)ctx[0];
	__u64 rq_key = ctx[0];
	struct block_io_key key = {};
	struct block_start *st;
	struct block_slot *s;
	struct gendisk *disk;
	__u64 ns, now, us;

	BLOCK_AUDIT(rq, completed);
	now = bpf_ktime_get_ns();
	s = block_slot_of(rq);
	if (s && s->rq == rq_key) {
		ns = s->st.ns;
		key.attr = s->st.attr;
		/* Given back after its start is read: the compare and swap
		 * is a full barrier, and the next owner writes the start. */
		__sync_val_compare_and_swap(&s->rq, rq_key, 0);
	} else {
		st = bpf_map_lookup_elem(&block_start_map, &rq_key);
		if (!st) {
			BLOCK_AUDIT(rq, no_start);
			__sync_fetch_and_add(&ktel_unpaired_events, 1);
			return 0;
		}
		ns = st->ns;
		key.attr = st->attr;
		/* A delete the map refused leaves a stale entry, which the
		 * request's next start overwrites: counted, nothing lost. */
		if (bpf_map_delete_elem(&block_start_map, &rq_key))
			__sync_fetch_and_add(&ktel_map_write_failures, 1);
	}
	/* Submitted, completed without an issue seen (ended with an error
	 * before it reached the driver): no latency of ours. */
	if (!ns) {
		BLOCK_AUDIT(rq, not_issued);
		__sync_fetch_and_add(&ktel_unpaired_events, 1);
		return 0;
	}
	us = ktel_duration_us(ns, now);
	if (us == BPF_TELEMETRY_INVALID_DURATION) {
		BLOCK_AUDIT(rq, invalid);
		return 0;
	}
	disk = block_disk_of(rq);
	if (disk) {
		key.major = (__u32)disk->major;
		key.minor = (__u32)disk->first_minor;
	}
	key.op = block_op_of(rq->cmd_flags);
	KTEL_ATTR_INCREMENT_SUM(block_io_latency_map, &key, us);
	BLOCK_AUDIT(rq, counted);
	if (key.attr == KTEL_ATTR_OVERFLOW)
		BLOCK_AUDIT(rq, overflow);
	return 0;
}

#ifdef KTEL_BPF_AUDIT
/* Audit builds only: the same completion tracepoint seen by a program of
 * its own (a run block_complete did not get shows here or not), and the
 * end of the request's accounting, where the device's own statistics count
 * it (6.5 and later). */
SEC("tp_btf/block_rq_complete")
int block_complete_seen(__u64 *ctx)
{
	BLOCK_AUDIT((struct request *)ctx[0], complete_seen);
	return 0;
}

SEC("tp_btf/block_io_done")
int block_io_done_seen(__u64 *ctx)
{
	BLOCK_AUDIT((struct request *)ctx[0], io_done);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";
