// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test fixture: the embedded bytes start like a 64-bit little-endian BPF ELF
 * (so the header check passes) but the section header table lies far beyond
 * the end of the bytes, so libbpf must refuse to open them.
 */
#include <elf.h>

#include <ktelemetry/plugin.h>

static const Elf64_Ehdr corrupt = {
	.e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
	.e_type = ET_REL,
	.e_machine = EM_BPF,
	.e_version = EV_CURRENT,
	.e_shoff = 0x7fff0000,
	.e_ehsize = sizeof(Elf64_Ehdr),
	.e_shentsize = sizeof(Elf64_Shdr),
	.e_shnum = 9,
	.e_shstrndx = 1,
};

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_corrupt_bpf", .map_name = "fx_corrupt_bpf_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2),
};

KTEL_PLUGIN(.name = "fx_corrupt_bpf", .version = "1.0",
	    .bpf_object = &corrupt, .bpf_object_size = sizeof(corrupt),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
