/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Tests that load a BPF object of their own (tests/bpf) set its const
 * volatile globals before the load, as the daemon does for a plugin's
 * params, through the object's .rodata and its BTF.
 */
#ifndef KTEL_TEST_BPF_RODATA_H
#define KTEL_TEST_BPF_RODATA_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

/* Set the .rodata variable name of obj (4 or 8 bytes) to value, before load. */
static inline void ktel_test_set_rodata(struct bpf_object *obj, const char *name, uint64_t value)
{
	struct bpf_map *rodata = NULL, *m;
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec;
	struct btf *btf = bpf_object__btf(obj);
	const void *init;
	unsigned char *data;
	size_t size;
	int id;

	bpf_object__for_each_map(m, obj)
		if (strstr(bpf_map__name(m), ".rodata"))
			rodata = m;
	assert_non_null(rodata);
	assert_non_null(btf);
	init = bpf_map__initial_value(rodata, &size);
	assert_non_null(init);
	data = malloc(size);
	assert_non_null(data);
	memcpy(data, init, size);
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	assert_true(id > 0);
	sec = btf__type_by_id(btf, (uint32_t)id);
	vs = btf_var_secinfos(sec);
	for (int i = 0; i < btf_vlen(sec); i++, vs++) {
		const struct btf_type *var = btf__type_by_id(btf, vs->type);

		if (strcmp(btf__name_by_offset(btf, var->name_off), name))
			continue;
		assert_true(vs->offset + vs->size <= size);
		if (vs->size == 4) {
			uint32_t v = (uint32_t)value;

			memcpy(data + vs->offset, &v, 4);
		} else {
			assert_int_equal(vs->size, 8);
			memcpy(data + vs->offset, &value, 8);
		}
		assert_int_equal(bpf_map__set_initial_value(rodata, data, size), 0);
		free(data);
		return;
	}
	free(data);
	fail_msg("no %s in .rodata", name);
}

#endif /* KTEL_TEST_BPF_RODATA_H */
