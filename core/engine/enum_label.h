/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Short enum labels (KTEL_DIM_ENUM_SHORT): the words users join on,
 * operation="read", instead of the C enumerator BLOCK_OP_READ.
 *
 * The rule, over the enum's enumerator names:
 *  1. A name takes part only when it is 1..KTEL_ENUM_LABEL_MAX-1 bytes of
 *     [A-Za-z0-9_] (a C identifier's characters; BTF is not trusted to
 *     hold one). Any other enumerator gets no label: the value shows as
 *     its number, as any unnamed value does.
 *  2. The prefix is the longest common prefix of those names, cut back to
 *     just after its last '_', then further back, underscore by underscore,
 *     until no name is the prefix itself (every label keeps a character).
 *     No '_' left: the prefix is empty.
 *  3. Label = the rest of the name, ASCII-lowercased.
 * So {BLOCK_OP_READ, BLOCK_OP_WRITE} -> read, write; a single BLOCK_OP_READ
 * -> read; {READ, WRITE} -> read, write; {BLOCK_OP_, BLOCK_OP_READ} -> op_,
 * op_read; {CMA_ALLOC_SUCCESS, CMA_ALLOC_FAILURE} -> success, failure.
 */
#ifndef KTEL_ENUM_LABEL_H
#define KTEL_ENUM_LABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "error.h"

struct btf;

#define KTEL_ENUM_LABEL_MAX 64

/* A name taking part in the rule (1 above). */
bool ktel_enum_name_valid(const char *name);

/*
 * Length of the prefix rule 2 strips from names (n of them; NULL and
 * invalid ones are skipped).
 */
size_t ktel_enum_prefix_len(const char *const *names, size_t n);

/* Rule 3 into buf (at least KTEL_ENUM_LABEL_MAX bytes): 0, or -EINVAL
 * when name is not valid or prefix leaves nothing. */
int ktel_enum_short_name(const char *name, size_t prefix, char *buf, size_t cap);

/* The short labels of one BTF enum, by enumerator. */
struct ktel_enum_labels;

/*
 * Short labels of enum enum_id of btf (which must outlive the table: lookups
 * match values as ktel_layout_enum_label does). 0 or -errno with err set.
 */
int ktel_enum_labels__new(const struct btf *btf, __u32 enum_id, struct ktel_enum_labels **ret,
			  struct ktel_err *err);
void ktel_enum_labels__free(struct ktel_enum_labels *el);

/* Short label of value, or NULL when no (valid) enumerator has it. */
const char *ktel_enum_labels__find(const struct ktel_enum_labels *el, int64_t value);

#endif /* KTEL_ENUM_LABEL_H */
