/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Generic BTF decoder.
 *
 * A map's key and value types come from the BPF object's BTF. This module
 * turns one such type into a flat, cached description - a ktel_layout - that
 * the pull and stream paths use to read raw map bytes without any per-metric
 * code: every decodable member becomes a ktel_field with a dotted name, a byte
 * offset, a size, a signedness and a kind.
 *
 * The installed libbpf (1.1) does not validate BTF it parses, so a plugin's
 * BTF is checked with ktel_btf_validate() before anything walks it. The layout
 * builder also bounds its own walk, so it never loops or reads out of bounds
 * even on BTF that skipped validation; it just gives poorer messages then.
 *
 * What a layout accepts (everything else is refused with the member named):
 *  - ints of 1, 2, 4 or 8 bytes (bool included), signed or not;
 *  - enums of 1, 2, 4 or 8 bytes (ENUM64 too); the enum's type id is kept so
 *    values can be labelled with ktel_layout_enum_label();
 *  - typedef / const / volatile / restrict / type tag chains, resolved;
 *  - nested structs, flattened to "outer.inner.x"; anonymous struct members
 *    contribute no path component;
 *  - unions with exactly one member (treated like a struct of that member);
 *    a union of several members is ambiguous to decode and is refused;
 *  - fixed arrays of chars (char / signed char / unsigned char written as
 *    such, not through a typedef): CHAR_ARRAY, a NUL-padded string;
 *  - fixed arrays of other ints (a typedef such as __u8 makes bytes an
 *    INT_ARRAY, not a string): INT_ARRAY with element size and count.
 * Refused: bitfields, pointers, floats, functions, forward declarations,
 * multi-member unions, arrays of structs/arrays/enums, zero-length arrays,
 * 16-byte ints, and a resolved size different from the expected map size.
 *
 * A struct whose member "buckets" is an INT_ARRAY of 8-byte unsigned ints is a
 * histogram: hist_field and n_buckets say where; sum_field points at an
 * 8-byte unsigned member named "sum" when there is one. The layout does not
 * limit n_buckets: the caller checks it against its scheme and record model.
 *
 * A layout copies every name it needs; only enum_type_id refers back to the
 * BTF, which the caller keeps alive for labels.
 */
#ifndef KTEL_BTF_LAYOUT_H
#define KTEL_BTF_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "error.h"

struct btf;

/* Longest non-pointer chain of types (typedef -> struct -> array -> ...). */
#define KTEL_BTF_MAX_DEPTH 32
/* Most fields one layout may hold; a bigger type is refused, not truncated. */
#define KTEL_LAYOUT_MAX_FIELDS 256
/* Longest dotted field name, including the terminating NUL. */
#define KTEL_FIELD_NAME_MAX 128

enum ktel_field_kind {
	KTEL_FIELD_INT = 1,        /* integer or bool of 1/2/4/8 bytes */
	KTEL_FIELD_ENUM = 2,       /* enum of 1/2/4/8 bytes; see enum_type_id */
	KTEL_FIELD_CHAR_ARRAY = 3, /* char name[N]: a NUL-padded string */
	KTEL_FIELD_INT_ARRAY = 4,  /* fixed array of ints: elem_size * count */
};

struct ktel_field {
	char name[KTEL_FIELD_NAME_MAX]; /* dotted path; "" for a scalar type */
	enum ktel_field_kind kind;
	__u32 offset;    /* bytes from the start of the key/value */
	__u32 size;      /* bytes in total (elem_size * count) */
	__u32 elem_size; /* bytes per element; == size for scalars */
	__u32 count;     /* array elements; 1 for scalars */
	bool is_signed;  /* of the (element) integer or enum */
	bool is_bool;
	__u32 enum_type_id; /* KTEL_FIELD_ENUM: the enum's BTF id, else 0 */
};

struct ktel_layout {
	__u32 type_id;                       /* the type asked for */
	__u32 size;                          /* its resolved size in bytes */
	char type_name[KTEL_FIELD_NAME_MAX]; /* "struct foo", for messages */
	__u32 n_fields;
	struct ktel_field *fields;
	int hist_field; /* index of the u64 "buckets" array, or -1 */
	__u32 n_buckets;
	int sum_field; /* index of the u64 "sum" member, or -1 */
};

/*
 * Check the whole of btf before anything walks it: every referenced type id in
 * range, every name offset inside the string section, int/enum/float sizes
 * legal, struct members inside their struct, array sizes that do not overflow
 * 32 bits, no type that contains itself without a pointer in between, and no
 * non-pointer chain deeper than KTEL_BTF_MAX_DEPTH. Only the types of btf
 * itself are checked, not those of a split BTF's base. Returns 0 or -EINVAL
 * (-ENOMEM) with err naming the type id and the rule.
 */
int ktel_btf_validate(const struct btf *btf, struct ktel_err *err);

/*
 * Validate the BTF inside a BPF ELF object held in memory (a plugin's
 * embedded bytes) BEFORE bpf_object__open_mem() sees it: libbpf 1.1's open
 * walks the map definitions' BTF unchecked and crashes on, for example, a
 * .maps variable whose type id is out of range. Returns 0, -ENOENT when the
 * object has no .BTF section, or -EINVAL with err naming what is wrong.
 * Only .BTF is checked, not .BTF.ext.
 */
int ktel_btf_validate_elf(const void *elf_bytes, size_t size, struct ktel_err *err);

/*
 * Build the layout of type_id. expect_size is the map's key or value size and
 * must equal the resolved size; 0 skips the check (ring buffer events, whose
 * size the map does not say). On success *ret holds a layout the caller frees
 * with ktel_layout__free(); on failure it is untouched and err names the type
 * and member ("struct foo: member bar is a bitfield, not supported").
 */
int ktel_layout__new(const struct btf *btf, __u32 type_id, __u32 expect_size,
		     struct ktel_layout **ret, struct ktel_err *err);
void ktel_layout__free(struct ktel_layout *layout);

/* Integer or enum: a field that can be read as one number (a dimension, a
 * counter, a gauge). */
bool ktel_field__is_number(const struct ktel_field *f);

/*
 * The rule for a per-CPU map's value: the copies are summed per 8-byte word,
 * so every member a pull reads (a histogram's buckets and sum, else each
 * integer or enum member) must be an 8-byte integer at an 8-byte offset, or
 * it would carry into its neighbour. 0, or -EINVAL with err naming the
 * member, its size and offset (the caller prefixes the metric and map).
 */
int ktel_layout__check_percpu_sum(const struct ktel_layout *vl, struct ktel_err *err);

/* The field with this dotted name; "" or NULL finds the field of a scalar
 * (non-struct) type. NULL when there is none. */
const struct ktel_field *ktel_layout__find(const struct ktel_layout *layout,
					   const char *dotted_name);

/*
 * Read element idx (0 for scalars) of an INT, ENUM or INT_ARRAY field from
 * data, which holds at least layout->size bytes in host byte order. The _u64
 * form zero-extends, the _s64 form sign-extends signed fields (and
 * zero-extends unsigned ones, so a u64 above INT64_MAX wraps).
 */
uint64_t ktel_field_read_elem_u64(const struct ktel_field *f, const void *data, __u32 idx);
int64_t ktel_field_read_elem_s64(const struct ktel_field *f, const void *data, __u32 idx);

static inline uint64_t ktel_field_read_u64(const struct ktel_field *f, const void *data)
{
	return ktel_field_read_elem_u64(f, data, 0);
}

static inline int64_t ktel_field_read_s64(const struct ktel_field *f, const void *data)
{
	return ktel_field_read_elem_s64(f, data, 0);
}

/*
 * Name of the enumerator of enum_type_id (ENUM or ENUM64) whose value is value,
 * or NULL when none is, or when the id is no enum. A value read from a wider
 * or differently signed member still matches: u32 0xffffffff finds a 4-byte
 * signed enum's -1. The string lives in btf.
 */
const char *ktel_layout_enum_label(const struct btf *btf, __u32 enum_type_id, int64_t value);

/* Index of the first enumerator of enum_type_id whose value is value (the
 * same match as ktel_layout_enum_label), or -1. */
int ktel_layout_enum_index(const struct btf *btf, __u32 enum_type_id, int64_t value);

/* Name of enumerator i, or NULL (i out of range, or no enum). Lives in btf. */
const char *ktel_layout_enum_name(const struct btf *btf, __u32 enum_type_id, __u32 i);

/* Number of enumerators of enum_type_id; 0 when it is no enum. */
__u32 ktel_layout_enum_count(const struct btf *btf, __u32 enum_type_id);

/*
 * Id of the first type of kind `kind` (BTF_KIND_*) named name; asking for
 * BTF_KIND_ENUM also finds an ENUM64 of that name. -ENOENT when there is none,
 * -EINVAL for bad arguments. Safe on unvalidated BTF (bad names are skipped).
 */
__s32 ktel_btf_find_type(const struct btf *btf, const char *name, int kind);

/* "process_state" -> id of enum process_state (ENUM or ENUM64). */
__s32 ktel_btf_find_enum(const struct btf *btf, const char *name);

/* "my_event" -> id of struct my_event (stream event types). */
__s32 ktel_btf_find_struct(const struct btf *btf, const char *name);

#endif /* KTEL_BTF_LAYOUT_H */
