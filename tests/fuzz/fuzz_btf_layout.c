// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * BTF layout / decoder (core/engine/btf_layout.c). The bytes are a raw BTF blob
 * (what a plugin's .BTF section holds) for libbpf's btf__new(). The type
 * lookups, documented safe on unvalidated BTF, run on it as it is; what
 * ktel_btf_validate() accepts is then laid out type by type as the loader
 * does for map keys and values, and a value (the same bytes again) is
 * decoded through every field: numbers, array elements, enum labels, name
 * lookups and the per-CPU rule. What validation refuses is laid out too
 * (without decoding): the builder promises a bounded walk on any BTF.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>
#include <linux/btf.h>

#include "btf_layout.h"
#include "fuzz_libbpf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Types laid out per input, and the largest value decoded. */
#define FUZZ_MAX_TYPES 64
#define FUZZ_MAX_VALUE (1u << 16)

static void decode(const struct btf *btf, const struct ktel_layout *l, const uint8_t *data,
		   size_t size)
{
	static uint8_t value[FUZZ_MAX_VALUE];
	struct ktel_err err;

	if (l->size > FUZZ_MAX_VALUE)
		return;
	for (size_t i = 0; i < l->size; i++)
		value[i] = size ? data[i % size] : 0;
	for (uint32_t i = 0; i < l->n_fields; i++) {
		const struct ktel_field *f = &l->fields[i];

		if (f->offset > l->size || f->size > l->size - f->offset)
			abort(); /* a field outside its type */
		if (ktel_layout__find(l, f->name) == NULL)
			abort(); /* every field is found by its own name */
		if (f->kind == KTEL_FIELD_CHAR_ARRAY)
			continue;
		for (uint32_t k = 0; k < f->count; k++) {
			int64_t v = ktel_field_read_elem_s64(f, value, k);

			ktel_field_read_elem_u64(f, value, k);
			if (f->kind == KTEL_FIELD_ENUM)
				ktel_layout_enum_label(btf, f->enum_type_id, v);
		}
	}
	if (l->hist_field >= 0 && (uint32_t)l->hist_field >= l->n_fields)
		abort();
	if (l->sum_field >= 0 && (uint32_t)l->sum_field >= l->n_fields)
		abort();
	ktel_layout__check_percpu_sum(l, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ktel_layout *l;
	struct ktel_err err;
	struct btf *btf;
	uint32_t n;

	fuzz_libbpf_quiet();
	btf = btf__new(data, size);
	if (!btf)
		return 0;
	ktel_btf_find_struct(btf, "ev");
	ktel_btf_find_enum(btf, "process_state");
	ktel_btf_find_type(btf, "int", BTF_KIND_INT);
	if (ktel_btf_validate(btf, &err) == 0) {
		n = btf__type_cnt(btf);
		for (uint32_t id = 0; id < n && id <= FUZZ_MAX_TYPES; id++) {
			if (ktel_layout__new(btf, id, 0, &l, &err) != 0)
				continue;
			decode(btf, l, data, size);
			ktel_layout__free(l);
		}
		/* An id out of range is refused, not read. */
		if (ktel_layout__new(btf, n, 0, &l, &err) == 0)
			abort();
	} else {
		/* btf_layout.h: the builder bounds its own walk, so it never
		 * loops or reads out of bounds even on unvalidated BTF. */
		n = btf__type_cnt(btf);
		for (uint32_t id = 1; id < n && id <= FUZZ_MAX_TYPES; id++) {
			if (ktel_layout__new(btf, id, 0, &l, &err) == 0)
				ktel_layout__free(l);
		}
	}
	btf__free(btf);
	return 0;
}
