// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Plugin intake, the embedded BPF object (core/engine/plugin_loader.c check_bpf):
 * the bytes are what a descriptor's bpf_object points at. As the loader
 * does, ktel_btf_validate_elf() judges the .BTF before libbpf's
 * bpf_object__open_mem() sees it (libbpf 1.1 trusts BTF), and only an
 * object that passes is opened, as the loader opens it: in a contained
 * child (core/engine/contain.c), where its maps, programs and .rodata variables
 * are looked up the way the descriptor checks look them up. A libbpf crash
 * there is a refusal, so no finding here; a crash of this process (the
 * validation, the containment) is. The shared object around the BPF object
 * is fuzz_plugin_so's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "bpf_lifecycle.h"
#include "btf_layout.h"
#include "contain.h"
#include "fuzz_libbpf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	const uint8_t *data;
	size_t size;
};

/* What the loader's contained child does with an object that passed. */
static int open_and_look_up(void *ctx, struct ktel_err *err)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "fuzz");
	const struct input *in = ctx;
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	size_t off, vsize;

	(void)err;
	obj = bpf_object__open_mem(in->data, in->size, &opts);
	if (!obj)
		return -EINVAL;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {.data = data, .size = size};
	struct ktel_err err;
	int rc;

	fuzz_libbpf_quiet();
	rc = ktel_btf_validate_elf(data, size, &err);
	if (rc && rc != -ENOENT)
		return 0;
	ktel_contain__run("fuzz: libbpf's parse", open_and_look_up, &in, KTEL_CONTAIN_TIMEOUT_MS,
			  &err);
	return 0;
}
