/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Global variables of a loaded BPF object, read back from the kernel.
 *
 * Counters a BPF program keeps in a plain global (such as
 * ktel_invalid_durations in bpf_telemetry.h) live in the object's .bss map;
 * the BTF datasec says where. Reading goes through the map, so it sees what
 * the programs wrote, not libbpf's initial image.
 */
#ifndef KTEL_BPF_GLOBALS_H
#define KTEL_BPF_GLOBALS_H

#include <stdint.h>

#include <bpf/libbpf.h>

/*
 * Read the 8-byte global variable name from obj's .bss into *out. Returns 0,
 * -ENOENT when the object has no such variable, -EINVAL when it is not 8
 * bytes, or -errno from the map lookup.
 */
int ktel_bpf_global_u64(const struct bpf_object *obj, const char *name, uint64_t *out);

#endif /* KTEL_BPF_GLOBALS_H */
