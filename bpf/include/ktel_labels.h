/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ktel_labels.h - kernel strings as small integer dimension values.
 *
 * Map keys never hold raw strings: a CMA heap or dma-buf exporter name would
 * make every key 32+ bytes and let the kernel create unbounded label values.
 * Instead a program turns the string into a small id:
 *
 *   KTEL_DEFINE_LABEL_MAPS(heap, 64);            // heap_ids, heap_names
 *   struct ktel_label l = {};
 *   ktel_label_read(&l, name_ptr);
 *   __u32 id = KTEL_LABEL_ID(heap, &l);
 *
 * <prefix>_ids   HASH  struct ktel_label -> __u32 id   (lookup on the hot path;
 *                room for max strings beyond the ids, cached as "other")
 * <prefix>_names HASH  __u32 id -> struct ktel_label   (read by the daemon; a
 *                metric's dimension names it with .label_map = "<prefix>_names")
 *
 * Ids are 1..max-1, the lowest free one at first sight. When all are taken,
 * new strings share id 0, whose name is "other". A descriptor's label map must be pinned
 * and reused together with the metric map that holds the ids, or ids from a
 * previous run would be read against fresh names.
 */
#ifndef KTEL_LABELS_H
#define KTEL_LABELS_H

#ifndef KTEL_KERNEL_TYPES_H
#include <ktel_kernel_types.h>
#endif
#include <bpf/bpf_helpers.h>

#define KTEL_LABEL_LEN 32
#define KTEL_LABEL_OTHER_ID 0U

/*
 * Zero-padded so two reads of one string give the same hash key bytes.
 * Longer strings are cut at KTEL_LABEL_LEN - 1 characters.
 */
struct ktel_label {
	char name[KTEL_LABEL_LEN];
} __attribute__((aligned(8)));

static __always_inline bool ktel_label_eq(const struct ktel_label *a, const struct ktel_label *b)
{
	const __u64 *x = (const __u64 *)a->name, *y = (const __u64 *)b->name;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

#define KTEL_DEFINE_LABEL_MAPS(prefix, max)                    \
	struct {                                               \
		__uint(type, BPF_MAP_TYPE_HASH);               \
		__uint(max_entries, 2 * (max));                \
		__type(key, struct ktel_label);                \
		__type(value, __u32);                          \
	} prefix##_ids SEC(".maps");                           \
	struct {                                               \
		__uint(type, BPF_MAP_TYPE_HASH);               \
		__uint(max_entries, (max));                    \
		__type(key, __u32);                            \
		__type(value, struct ktel_label);              \
	} prefix##_names SEC(".maps");                         \
	/* Set once every id is taken; see ktel_label_id(). */ \
	__u32 prefix##_ids_full = 0;                           \
	enum {                                                 \
		prefix##_label_max = (max)                     \
	}

/* Read a kernel string into l (zeroed by the caller); "?" when unreadable. */
static __always_inline void ktel_label_read(struct ktel_label *l, const void *kstr)
{
	if (!kstr || bpf_probe_read_kernel_str(l->name, sizeof(l->name), kstr) <= 1) {
		__builtin_memset(l->name, 0, sizeof(l->name));
		l->name[0] = '?';
	}
}

/*
 * The id of label l, assigning the lowest free one on first sight.
 *
 * Claiming an id is an insert with BPF_NOEXIST into the id -> name map, which
 * is atomic, so two CPUs never get the same id for different strings and no
 * atomic fetch (BPF v3) is needed. If two CPUs see one new string at once,
 * both claim an id; the one whose name -> id insert fails gives its id back
 * and uses the winner's.
 *
 * The walk starts at id 1 each time: a taken id whose name is l is l's id.
 * So after a restart that kept the pinned id -> name map (and the metric map
 * with its ids) but not the name -> id map, a string gets its old id back
 * instead of a second one. The walk runs once per string and run; the
 * name -> id map caches the result, also for strings that got "other" while
 * it has room. Once no id is left, *full makes new strings skip the walk.
 */
static __always_inline __u32 ktel_label_id(void *ids, void *names, __u32 *full,
					   const struct ktel_label *l, __u32 max)
{
	static const struct ktel_label other = {.name = "other"};
	__u32 *found, i, id, other_id = KTEL_LABEL_OTHER_ID;
	struct ktel_label *have;

	found = bpf_map_lookup_elem(ids, l);
	if (found)
		return *found;
	if (*full)
		return KTEL_LABEL_OTHER_ID;
	/* i counts in a register: the verifier cannot see progress in id,
	 * which lives on the stack because its address goes to the helpers. */
	for (i = 1; i < max; i++) {
		id = i;
		if (bpf_map_update_elem(names, &id, l, BPF_NOEXIST) == 0)
			goto claimed;
		have = bpf_map_lookup_elem(names, &id);
		if (have && ktel_label_eq(have, l)) {
			bpf_map_update_elem(ids, l, &id, BPF_NOEXIST);
			return id;
		}
	}
	*full = 1;
	bpf_map_update_elem(ids, l, &other_id, BPF_NOEXIST);
	bpf_map_update_elem(names, &other_id, &other, BPF_NOEXIST);
	return KTEL_LABEL_OTHER_ID;

claimed:
	if (bpf_map_update_elem(ids, l, &id, BPF_NOEXIST) == 0)
		return id;
	/* Another CPU mapped this string first. It may have found our claim
	 * in its walk and mapped the string to our very id: then the name
	 * must stay. Only a claim nobody uses is given back. */
	found = bpf_map_lookup_elem(ids, l);
	if (found && *found == id)
		return id;
	bpf_map_delete_elem(names, &id);
	return found ? *found : KTEL_LABEL_OTHER_ID;
}

#define KTEL_LABEL_ID(prefix, l) \
	ktel_label_id(&prefix##_ids, &prefix##_names, &prefix##_ids_full, (l), prefix##_label_max)

#endif /* KTEL_LABELS_H */
