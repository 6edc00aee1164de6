/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ktel_attr.h - attribution for ktelemetry BPF programs: which cgroup, user,
 * app or process an event belongs to, bounded exactly in the kernel.
 *
 * A metric that attributes has one u64 member in its key (by convention
 * `attr`), declared with KTEL_DIM_ATTRIBUTION in the plugin's descriptor,
 * and declares its settings next to its map:
 *
 *   struct my_key { __u32 cpu; __u64 attr; };
 *   struct { ... } my_map SEC(".maps");
 *   KTEL_ATTR_SETTINGS(my_map);
 *
 * The daemon sets the settings from the config's
 * metrics.<name>.attribution before the object loads. With attribution off
 * (the default) they stay 0: every branch on them is dead code the verifier
 * prunes, attr stays 0, and the program costs what it did without.
 *
 * The subject of an event is the task it belongs to, which is not always
 * `current`: the woken task of a wakeup, the issuer of an I/O whose
 * completion runs in an interrupt, the victim of an OOM kill. Fill attr
 * with ktel_attr_of(map, task) from that task (ktel_attr_of_btf(map, task)
 * where task is a tp_btf or fentry argument: cheaper); ktel_attr_of_current(map)
 * only where the subject is the running task (a synchronous path).
 *
 * The bound: at most <map>_attr_limit attributed keys enter the map. An
 * event whose key is new once that many were admitted (or whose insert
 * fails) is counted under attr = KTEL_ATTR_OVERFLOW with its other
 * dimensions unchanged, so no count is lost. The daemon sizes the map to
 * the plugin's max_entries (which bounds the other dimensions' combinations,
 * so each has room for its overflow key) plus the limit, and the overflow
 * key of a combination is made before any key of it is admitted, so it
 * always finds its room. Only KTEL_ATTR_ADMIT and the macros built on it
 * insert attributed keys: a key that entered the map otherwise would hold
 * a place the count does not know of.
 *
 * Not in Android's bpf_telemetry.h: that header stays as it is, so programs
 * written for it keep compiling unchanged.
 */
#ifndef KTEL_ATTR_H
#define KTEL_ATTR_H

#ifndef KTEL_KERNEL_TYPES_H
#include <ktel_kernel_types.h>
#endif
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf_telemetry.h>

/* Values of <map>_attr_by (enum ktel_attr_by in ktelemetry/plugin.h). */
#define KTEL_ATTR_BY_NONE 0
#define KTEL_ATTR_BY_CGROUP 1
#define KTEL_ATTR_BY_USER 2
#define KTEL_ATTR_BY_APP 3
#define KTEL_ATTR_BY_PROCESS 4

/* The attribution value of events past the bound (KTEL_ATTR_OVERFLOW_ID). */
#define KTEL_ATTR_OVERFLOW ((__u64)-1)
/* The subject could not be told (a request whose submitter was not seen):
 * KTEL_ATTR_UNKNOWN_ID, named "unknown" like an id that does not resolve. */
#define KTEL_ATTR_UNKNOWN ((__u64)-2)

/* Kernel types read here, as flavors so they never clash with a plugin's own
 * declarations of the same structs: CO-RE drops the ___ktel_attr suffix. */
struct kernfs_node___ktel_attr {
	__u64 id;
} __ktel_core;

struct cgroup___ktel_attr {
	struct kernfs_node___ktel_attr *kn;
	int level;
	struct cgroup___ktel_attr *ancestors[]; /* 5.19 and later */
} __ktel_core;

/* Before 5.19 a cgroup kept its ancestors' ids, not pointers. */
struct cgroup___ktel_attr_old {
	int level;
	__u64 ancestor_ids[];
} __ktel_core;

struct css_set___ktel_attr {
	struct cgroup___ktel_attr *dfl_cgrp;
} __ktel_core;

/* The cgroup a bio is charged to: bio->bi_blkg->blkcg->css.cgroup (only
 * with CONFIG_BLK_CGROUP). */
struct cgroup_subsys_state___ktel_attr {
	struct cgroup___ktel_attr *cgroup;
} __ktel_core;

struct blkcg___ktel_attr {
	struct cgroup_subsys_state___ktel_attr css;
} __ktel_core;

struct blkcg_gq___ktel_attr {
	struct blkcg___ktel_attr *blkcg;
} __ktel_core;

struct bio___ktel_attr {
	struct blkcg_gq___ktel_attr *bi_blkg;
} __ktel_core;

typedef struct {
	__u32 val;
} kuid_t___ktel_attr;

struct cred___ktel_attr {
	kuid_t___ktel_attr uid;
} __ktel_core;

struct task_struct___ktel_attr {
	int tgid;
	struct css_set___ktel_attr *cgroups;
	const struct cred___ktel_attr *real_cred;
	__u64 start_time;
} __ktel_core;

/*
 * Settings of map's attribution, set by the daemon before load:
 *   <map>_attr_by     KTEL_ATTR_BY_*
 *   <map>_attr_depth  cgroup roll-up: 0 the task's own cgroup, n its
 *                     ancestor at level n (root = level 0), the task's own
 *                     when it is at level n or above
 *   <map>_attr_limit  attributed keys admitted into the map
 *   <map>_attr_blkcg  1: by cgroup, read the cgroup the kernel charges a
 *                     bio to (ktel_attr_blkcg_of_btf) instead of running
 *                     the programs the descriptor flags KTEL_ATTR_PROG_BLKCG;
 *                     set only where the io controller is on cgroup v2
 * and <map>_attr_used, the count of admitted keys (one u64, atomics). The
 * daemon maps that count (it makes it BPF_F_MMAPABLE before load) and, when
 * it deletes the keys of a released id, gives their slots back with an
 * atomic of its own, once per key deleted, so the kernel admits new ids
 * again. A key deleted this way that an event makes again is admitted as
 * a new one and takes a slot of its own.
 */
#define KTEL_ATTR_SETTINGS(map)                    \
	const volatile __u32 map##_attr_by = 0;    \
	const volatile __u32 map##_attr_depth = 0; \
	const volatile __u64 map##_attr_limit = 0; \
	const volatile __u32 map##_attr_blkcg = 0; \
	struct {                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY);  \
		__uint(max_entries, 1);            \
		__type(key, __u32);                \
		__type(value, __u64);              \
	} map##_attr_used SEC(".maps")

/*
 * Id of cgroup cg (a pointer read with BPF_CORE_READ, not a BTF-typed one),
 * rolled up to depth: its ancestor at level depth, or its own id when depth
 * is 0 or cg is at that level or above. 0 for no cgroup.
 */
static __always_inline __u64 ktel_attr_cgroup_rollup(struct cgroup___ktel_attr *cg, __u32 depth)
{
	struct cgroup___ktel_attr *anc = NULL;
	struct cgroup___ktel_attr_old *old;
	__u64 id = 0;
	int level;

	if (!cg)
		return 0;
	if (depth) {
		level = BPF_CORE_READ(cg, level);
		if (level > 0 && depth < (__u32)level && depth < 256) {
			if (bpf_core_field_exists(cg->ancestors)) {
				bpf_probe_read_kernel(&anc, sizeof(anc),
						      (void *)cg +
							      bpf_core_field_offset(cg->ancestors) +
							      (__u64)depth * sizeof(anc));
				if (anc)
					return BPF_CORE_READ(anc, kn, id);
			} else {
				old = (void *)cg;
				if (bpf_core_field_exists(old->ancestor_ids)) {
					bpf_probe_read_kernel(&id, sizeof(id),
							      (void *)cg +
								      bpf_core_field_offset(
									      old->ancestor_ids) +
								      (__u64)depth * sizeof(id));
					return id;
				}
			}
		}
	}
	return BPF_CORE_READ(cg, kn, id);
}

/* Id of task's cgroup in the v2 (default) hierarchy, rolled up to depth. */
static __always_inline __u64 ktel_attr_cgroup_of(struct task_struct *task, __u32 depth)
{
	struct task_struct___ktel_attr *t = (void *)task;

	return ktel_attr_cgroup_rollup(BPF_CORE_READ(t, cgroups, dfl_cgrp), depth);
}

/*
 * Id of the cgroup the kernel charges bio to, rolled up to depth, for a
 * bio pointer the verifier knows by its BTF type (read from a tp_btf or
 * fentry argument, as rq->bio): 0 when there is no bio, no cgroup in it,
 * or no CONFIG_BLK_CGROUP. That cgroup is the one io.stat counts the bio
 * in: the nearest ancestor of the submitter's cgroup (itself included)
 * with the io controller enabled, and for writeback the owner of the
 * dirty pages, not the flusher. Its id is a v2 id only where the io
 * controller is on the v2 hierarchy: the daemon sets <map>_attr_blkcg
 * there alone. Depth 0 takes plain loads, as ktel_attr_cgroup_of_btf.
 */
static __always_inline __u64 ktel_attr_blkcg_of_btf(const void *bio, __u32 depth)
{
	const struct bio___ktel_attr *b = bio;
	struct cgroup___ktel_attr *cg;

	if (!b || !bpf_core_field_exists(b->bi_blkg))
		return 0;
	if (depth)
		return ktel_attr_cgroup_rollup(BPF_CORE_READ(b, bi_blkg, blkcg, css.cgroup), depth);
	cg = b->bi_blkg->blkcg->css.cgroup;
	return cg ? cg->kn->id : 0;
}

/* task's real uid, in the initial user namespace (kuid_t is global). */
static __always_inline __u64 ktel_attr_uid_of(struct task_struct *task)
{
	struct task_struct___ktel_attr *t = (void *)task;

	return BPF_CORE_READ(t, real_cred, uid.val);
}

/*
 * The process: tgid in the high half, the low 32 bits of the thread group
 * leader's start time in seconds in the low half, so a reused pid is another
 * process. task's own start_time: a thread's differs from its leader's by
 * the time between them, which the daemon does not need (it names the
 * process by tgid).
 */
static __always_inline __u64 ktel_attr_process_of(struct task_struct *task)
{
	struct task_struct___ktel_attr *t = (void *)task;
	__u64 start_s = BPF_CORE_READ(t, start_time) / 1000000000ULL;

	return (__u64)(__u32)BPF_CORE_READ(t, tgid) << 32 | (start_s & 0xffffffffULL);
}

/*
 * The same reads for a task pointer the verifier knows by its BTF type (an
 * argument of a tp_btf or fentry program, not a u64 from a helper or from
 * memory): plain loads, which the JIT makes fault-safe, instead of a
 * bpf_probe_read_kernel call per pointer (four for a cgroup id, the most of
 * what attribution added per event to the run-queue switch; see
 * docs/benchmarks.md, "Attribution cost"). A rolled-up cgroup (depth) indexes
 * an array, which only the helper read can, so it takes the path above.
 */
static __always_inline __u64 ktel_attr_cgroup_of_btf(struct task_struct *task, __u32 depth)
{
	struct task_struct___ktel_attr *t = (void *)task;
	struct cgroup___ktel_attr *cg;

	if (depth)
		return ktel_attr_cgroup_of(task, depth);
	cg = t->cgroups->dfl_cgrp;
	return cg ? cg->kn->id : 0;
}

static __always_inline __u64 ktel_attr_uid_of_btf(struct task_struct *task)
{
	struct task_struct___ktel_attr *t = (void *)task;

	return t->real_cred->uid.val;
}

/* KTEL_ATTR_UNKNOWN for map, or 0 with attribution off (which the member
 * must then be). */
#define ktel_attr_unknown(map) (map##_attr_by != KTEL_ATTR_BY_NONE ? KTEL_ATTR_UNKNOWN : 0)

/* The attribution value of task for map (0 with attribution off). */
#define ktel_attr_of(map, task)                                                                   \
	({                                                                                        \
		__u64 __ktel_attr = 0;                                                            \
		if (map##_attr_by == KTEL_ATTR_BY_CGROUP)                                         \
			__ktel_attr = ktel_attr_cgroup_of((task), map##_attr_depth);              \
		else if (map##_attr_by == KTEL_ATTR_BY_USER || map##_attr_by == KTEL_ATTR_BY_APP) \
			__ktel_attr = ktel_attr_uid_of(task);                                     \
		else if (map##_attr_by == KTEL_ATTR_BY_PROCESS)                                   \
			__ktel_attr = ktel_attr_process_of(task);                                 \
		__ktel_attr;                                                                      \
	})

/* ktel_attr_of for a BTF-typed task pointer (see ktel_attr_cgroup_of_btf). */
#define ktel_attr_of_btf(map, task)                                                               \
	({                                                                                        \
		__u64 __ktel_attr = 0;                                                            \
		if (map##_attr_by == KTEL_ATTR_BY_CGROUP)                                         \
			__ktel_attr = ktel_attr_cgroup_of_btf((task), map##_attr_depth);          \
		else if (map##_attr_by == KTEL_ATTR_BY_USER || map##_attr_by == KTEL_ATTR_BY_APP) \
			__ktel_attr = ktel_attr_uid_of_btf(task);                                 \
		else if (map##_attr_by == KTEL_ATTR_BY_PROCESS)                                   \
			__ktel_attr = ktel_attr_process_of(task);                                 \
		__ktel_attr;                                                                      \
	})

/*
 * The same for the running task, where the event's subject is current (a
 * synchronous path): the cgroup and uid helpers need no CO-RE reads.
 */
#define ktel_attr_of_current(map)                                                 \
	({                                                                        \
		__u64 __ktel_attr = 0;                                            \
		if (map##_attr_by == KTEL_ATTR_BY_CGROUP) {                       \
			/* 0 when current is above the level: its own then. */    \
			if (map##_attr_depth)                                     \
				__ktel_attr = bpf_get_current_ancestor_cgroup_id( \
					(int)map##_attr_depth);                   \
			if (!__ktel_attr)                                         \
				__ktel_attr = bpf_get_current_cgroup_id();        \
		} else if (map##_attr_by == KTEL_ATTR_BY_USER ||                  \
			   map##_attr_by == KTEL_ATTR_BY_APP)                     \
			__ktel_attr = bpf_get_current_uid_gid() & 0xffffffffULL;  \
		else if (map##_attr_by == KTEL_ATTR_BY_PROCESS)                   \
			__ktel_attr = ktel_attr_process_of(                       \
				(struct task_struct *)bpf_get_current_task());    \
		__ktel_attr;                                                      \
	})

/*
 * Admit the key at keyp (a pointer to the key struct, whose attribution
 * member is attr) into map, or move it to the overflow key. A key already
 * in the map, and every key with attribution off, pass unchanged.
 *
 * First the overflow key of the same other dimensions is made, before this
 * key can take a slot: the admitted keys can then never fill the map ahead
 * of the overflow key that has to take what does not fit (the daemon sizes
 * the map to hold both). Then a new key takes a slot of <map>_attr_used;
 * past <map>_attr_limit (the add undone) its attr becomes
 * KTEL_ATTR_OVERFLOW. A key whose insert fails for any reason (-E2BIG from
 * a preallocated map whose free elements are being handed between CPUs,
 * -ENOMEM, a bucket lock the kernel gave up on) gives its slot back and is
 * counted under the overflow key too. Two CPUs racing to insert one new key
 * both take a slot; the one whose insert finds the key there (-EEXIST)
 * gives its slot back and keeps the key, so the count stays exact.
 *
 * Past the limit the count is read before it is added to: an event of an
 * id that is not admitted then costs no atomic.
 */
#define KTEL_ATTR_ADMIT(map, keyp, value_type)                                                  \
	({                                                                                      \
		__u32 __ktel_zero_idx = 0;                                                      \
		__u64 *__ktel_used, __ktel_id;                                                  \
		long __ktel_err;                                                                \
		if (map##_attr_by != KTEL_ATTR_BY_NONE && (keyp)->attr != KTEL_ATTR_OVERFLOW && \
		    !bpf_map_lookup_elem(&(map), (keyp))) {                                     \
			__ktel_id = (keyp)->attr;                                               \
			(keyp)->attr = KTEL_ATTR_OVERFLOW;                                      \
			if (!bpf_map_lookup_elem(&(map), (keyp))) {                             \
				value_type __ktel_zero_ovf = {};                                \
				bpf_map_update_elem(&(map), (keyp), &__ktel_zero_ovf,           \
						    BPF_NOEXIST);                               \
			}                                                                       \
			__ktel_used = bpf_map_lookup_elem(&map##_attr_used, &__ktel_zero_idx);  \
			if (__ktel_used && *(volatile __u64 *)__ktel_used < map##_attr_limit) { \
				if (__sync_fetch_and_add(__ktel_used, 1) >= map##_attr_limit) { \
					__sync_fetch_and_add(__ktel_used, -1);                  \
				} else {                                                        \
					value_type __ktel_zero_val = {};                        \
					(keyp)->attr = __ktel_id;                               \
					__ktel_err = bpf_map_update_elem(&(map), (keyp),        \
									 &__ktel_zero_val,      \
									 BPF_NOEXIST);          \
					if (__ktel_err) {                                       \
						__sync_fetch_and_add(__ktel_used, -1);          \
						/* -EEXIST: another CPU inserted it first. */   \
						if (!bpf_map_lookup_elem(&(map), (keyp)))       \
							(keyp)->attr = KTEL_ATTR_OVERFLOW;      \
					}                                                       \
				}                                                               \
			}                                                                       \
		}                                                                               \
	})

/*
 * The value at key (a pointer to the key struct) of map, admitted with
 * KTEL_ATTR_ADMIT when new: the admitted key's, or the overflow key's (and
 * key's attr then KTEL_ATTR_OVERFLOW). A key admitted and then deleted by
 * the daemon before this looks it up (the ageing of a released cgroup) is
 * not made again here, where it would hold a place without a slot: its
 * event goes to the overflow key. NULL only when even the overflow key
 * could not be made, or (attribution off) the key could not: a map that
 * the daemon sized to its plugin's max_entries plus the limit always has
 * room for it.
 */
#define KTEL_ATTR_GET_OR_CREATE(map, key, value_type)                                \
	({                                                                           \
		value_type *__ktel_v = bpf_map_lookup_elem(&(map), (key));           \
		if (!__ktel_v) {                                                     \
			KTEL_ATTR_ADMIT(map, key, value_type);                       \
			__ktel_v = bpf_map_lookup_elem(&(map), (key));               \
			if (!__ktel_v && map##_attr_by != KTEL_ATTR_BY_NONE &&       \
			    (key)->attr != KTEL_ATTR_OVERFLOW) {                     \
				(key)->attr = KTEL_ATTR_OVERFLOW;                    \
				__ktel_v = bpf_map_lookup_elem(&(map), (key));       \
			}                                                            \
			if (!__ktel_v)                                               \
				__ktel_v = ktel_get_or_create(map, key, value_type); \
		}                                                                    \
		__ktel_v;                                                            \
	})

/*
 * INCREMENT_ACCUMULATOR_SUM with the bound above: key is a pointer to the
 * key struct. BPF_TELEMETRY_INVALID_DURATION is ignored, as there. A key
 * already in the map costs one lookup, as without attribution; only a new
 * one goes through KTEL_ATTR_ADMIT.
 */
#define KTEL_ATTR_INCREMENT_SUM(map, key, value)                                                   \
	({                                                                                         \
		__u64 __ktel_attr_val = (value);                                                   \
		__u32 __ktel_attr_b = GET_BUCKET(__ktel_attr_val);                                 \
		struct accumulator_value_sum *__ktel_attr_acc;                                     \
		if (__ktel_attr_val != BPF_TELEMETRY_INVALID_DURATION) {                           \
			__ktel_attr_acc = KTEL_ATTR_GET_OR_CREATE(map, key,                        \
								  struct accumulator_value_sum);   \
			if (__ktel_attr_acc && __ktel_attr_b < BPF_TELEMETRY_NUM_BUCKETS) {        \
				__sync_fetch_and_add(&__ktel_attr_acc->buckets[__ktel_attr_b], 1); \
				__sync_fetch_and_add(&__ktel_attr_acc->sum, __ktel_attr_val);      \
				ktel_audit_counted();                                              \
			}                                                                          \
		}                                                                                  \
	})

/* INCREMENT_ACCUMULATOR (no sum) with the bound above. */
#define KTEL_ATTR_INCREMENT_BUCKET(map, key, bucket)                                               \
	({                                                                                         \
		__u32 __ktel_attr_b = (bucket);                                                    \
		struct accumulator_value *__ktel_attr_acc;                                         \
		if (__ktel_attr_b < BPF_TELEMETRY_NUM_BUCKETS) {                                   \
			__ktel_attr_acc = KTEL_ATTR_GET_OR_CREATE(map, key,                        \
								  struct accumulator_value);       \
			if (__ktel_attr_acc) {                                                     \
				__sync_fetch_and_add(&__ktel_attr_acc->buckets[__ktel_attr_b], 1); \
				ktel_audit_counted();                                              \
			}                                                                          \
		}                                                                                  \
	})

#endif /* KTEL_ATTR_H */
