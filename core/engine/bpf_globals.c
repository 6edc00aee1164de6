// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Global variables of a loaded BPF object, read back from the kernel.
 */
#include "bpf_globals.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>

int ktel_bpf_global_u64(const struct bpf_object *obj, const char *name, uint64_t *out)
{
	const struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map;

	bpf_object__for_each_map(map, obj) {
		const char *mname = bpf_map__name(map);
		const struct btf_var_secinfo *vs;
		const struct btf_type *sec;
		size_t mlen = strlen(mname);
		uint32_t zero = 0;
		uint8_t *val;
		int fd, rc = -ENOENT;

		if (!btf || !bpf_map__is_internal(map) || mlen < 4 ||
		    strcmp(mname + mlen - 4, ".bss") != 0)
			continue;
		sec = btf__type_by_id(btf, bpf_map__btf_value_type_id(map));
		if (!sec || !btf_is_datasec(sec))
			continue;
		vs = btf_var_secinfos(sec);
		for (uint16_t i = 0; i < btf_vlen(sec); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);

			if (!var || strcmp(btf__name_by_offset(btf, var->name_off), name) != 0)
				continue;
			if (vs->size != sizeof(*out) ||
			    (size_t)vs->offset + vs->size > bpf_map__value_size(map))
				return -EINVAL;
			fd = bpf_map__fd(map);
			val = malloc(bpf_map__value_size(map));
			if (!val)
				return -ENOMEM;
			if (fd >= 0 && bpf_map_lookup_elem(fd, &zero, val) == 0) {
				memcpy(out, val + vs->offset, sizeof(*out));
				rc = 0;
			} else {
				rc = fd < 0 ? -EBADF : -errno;
			}
			free(val);
			return rc;
		}
	}
	return -ENOENT;
}
