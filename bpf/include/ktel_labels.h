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
 * <prefix>_ids   HASH  struct ktel_label -> __u32 id   (lookup on the hot path)
 * <prefix>_names HASH  __u32 id -> struct ktel_label   (read by the daemon; a
 *                metric's dimension names it with .label_map = "<prefix>_names")
 *
 * Ids are 1..max-1 in order of first sight. When all are taken, new strings
 * share id 0, whose name is "other". A descriptor's label map must be pinned
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
};

#define KTEL_DEFINE_LABEL_MAPS(prefix, max)                                    \
	struct {                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, (max));                                    \
		__type(key, struct ktel_label);                                \
		__type(value, __u32);                                          \
	} prefix##_ids SEC(".maps");                                           \
	struct {                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, (max));                                    \
		__type(key, __u32);                                            \
		__type(value, struct ktel_label);                              \
	} prefix##_names SEC(".maps");                                         \
	/* Where the search for a free id starts; only a hint, see below. */   \
	__u32 prefix##_id_hint = 0;                                            \
	enum { prefix##_label_max = (max) }

/* Read a kernel string into l (zeroed by the caller); "?" when unreadable. */
static __always_inline void ktel_label_read(struct ktel_label *l, const void *kstr)
{
	if (!kstr || bpf_probe_read_kernel_str(l->name, sizeof(l->name), kstr) <= 1) {
		__builtin_memset(l->name, 0, sizeof(l->name));
		l->name[0] = '?';
	}
}

/*
 * The id of label l, assigning the next free one on first sight.
 *
 * Claiming an id is an insert with BPF_NOEXIST into the id -> name map, which
 * is atomic, so two CPUs never get the same id for different strings and no
 * atomic fetch (BPF v3) is needed. If two CPUs see one new string at once,
 * both claim an id; the one whose name -> id insert fails gives its id back
 * and uses the winner's. The hint is read and written without atomics: a
 * stale hint only costs a few failed inserts, and a daemon restart (hint back
 * to 0 with pinned maps kept) walks past the ids already taken.
 */
static __always_inline __u32 ktel_label_id(void *ids, void *names, __u32 *hint,
					   const struct ktel_label *l, __u32 max)
{
	static const struct ktel_label other = {.name = "other"};
	__u32 *found, id = 0, i, other_id = KTEL_LABEL_OTHER_ID;
	bool claimed = false;

	found = bpf_map_lookup_elem(ids, l);
	if (found)
		return *found;
	for (i = 0; i < max; i++) {
		id = *hint + 1 + i;
		if (id >= max)
			break;
		if (bpf_map_update_elem(names, &id, l, BPF_NOEXIST) == 0) {
			claimed = true;
			break;
		}
	}
	if (!claimed) {
		bpf_map_update_elem(names, &other_id, &other, BPF_NOEXIST);
		return KTEL_LABEL_OTHER_ID;
	}
	*hint = id;
	if (bpf_map_update_elem(ids, l, &id, BPF_NOEXIST) == 0)
		return id;
	bpf_map_delete_elem(names, &id);
	found = bpf_map_lookup_elem(ids, l);
	return found ? *found : KTEL_LABEL_OTHER_ID;
}

#define KTEL_LABEL_ID(prefix, l)                                               \
	ktel_label_id(&prefix##_ids, &prefix##_names, &prefix##_id_hint, (l),  \
		      prefix##_label_max)

#endif /* KTEL_LABELS_H */
