// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Plugin intake, the embedded BPF object (core/plugin_loader.c check_bpf):
 * the bytes are what a descriptor's bpf_object points at. As the loader
 * does, ktel_btf_validate_elf() judges the .BTF before libbpf's
 * bpf_object__open_mem() sees it (libbpf 1.1 trusts BTF), and only an
 * object that passes is opened; its maps, programs and .rodata variables
 * are then looked up the way the descriptor checks look them up.
 *
 * The .so around it is dlopened by the loader (issue 12 items 1 and 3
 * replace that with an ELF reader that runs no plugin code); dlopen of
 * hostile bytes cannot be fuzzed in process, so the shared object itself
 * is not a target here until that reader exists.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "bpf_lifecycle.h"
#include "btf_layout.h"
#include "fuzz_libbpf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "fuzz");
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	struct ktel_err err;
	size_t off, vsize;
	int rc;

	fuzz_libbpf_quiet();
	rc = ktel_btf_validate_elf(data, size, &err);
	if (rc && rc != -ENOENT)
		return 0;
	obj = bpf_object__open_mem(data, size, &opts);
	if (!obj)
		return 0;
	bpf_object__for_each_map(map, obj) {
		bpf_object__find_map_by_name(obj, bpf_map__name(map));
		bpf_map__key_size(map);
		bpf_map__value_size(map);
		bpf_map__btf_key_type_id(map);
		bpf_map__btf_value_type_id(map);
	}
	bpf_object__for_each_program(prog, obj)
		bpf_object__find_program_by_name(obj, bpf_program__name(prog));
	ktel_bpf_rodata_var(obj, "min_ns", &off, &vsize);
	bpf_object__close(obj);
	return 0;
}
